"""A deployed watch's days, in this process: the four handlers on a moto server behind a counting endpoint.

``simulate`` runs what bench/watch_cost.py prices (its docstring says how)
and returns each schedule tick's quantities and the checks' pipeline
quantities, as ``{"units:ddb_wru": n, "calls:sqs:SendMessageBatch": n,
"wru:<table>": n, "op:dynamodb:PutItem:ddb_wru": n, "lambda_s:fetch": s, "lambda_gb_s:fetch": s,
"invocations:fetch": n, "log_bytes:fetch": n, "metric:fetch:RunSecondsSlept": s, ...}``
(the last: the functions' EMF metrics, summed).

Loopback only: the listings are served on 127.0.0.2 and up, the endpoint
and moto on 127.0.0.1.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import json
import logging
import math
import os
import random
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from crawlstack import settings

DAY = 86_400.0
# The web (assumed, not measured): items a day a source posts, log-uniform between these; items a page
# shows, newest first; a listing page's size with its navigation and text.
RATES = (0.5, 20.0)
PER_PAGE = 20
PAGE_BYTES = 30_000
# Each source's priority_max: after its first check (unbilled, below) a day's tokens make one check.
PRIORITY = 1.0
RULE = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": r"/news/\d+$"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [
        {"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]},
        {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "a"}}]},
    ],
}
# Sources checked at once before the day (unbilled): consecutive sources are on different hosts.
FIRST_CHECKS = 5
Q = dict[str, float]


class Listings:
    """Each source's listing in simulated time (``now``): its newest items, and a 304 while none arrived."""

    def __init__(self, count: int, rng: random.Random, start: float, end: float) -> None:
        self.now = start
        self.arrivals: list[list[float]] = []
        for _ in range(count):
            rate = math.exp(rng.uniform(math.log(RATES[0]), math.log(RATES[1]))) / DAY
            times, at = [], start
            while (at := at + rng.expovariate(rate)) < end:
                times.append(at)
            self.arrivals.append(times)
        self.shown = [0] * count  # items arrived when the source's last 200 was sent
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def respond(self, request: Any) -> Any:
        from crawlstack.demo.server import Response

        stem = request.bare_path.removeprefix("/news/")
        if not stem.isdigit() or int(stem) >= len(self.arrivals):
            return None  # robots.txt too: a 404, so everything is allowed
        i = int(stem)
        count = bisect.bisect_right(self.arrivals[i], self.now)
        etag = f'"{count}"'
        with self._lock:
            if {k.lower(): v for k, v in request.headers.items()}.get("if-none-match") == etag:
                self.counts["not_modified"] += 1
                return Response(b"", status=304, headers={"ETag": etag})
            self.counts["ok"] += 1
            self.counts["new_items"] += min(PER_PAGE, count - self.shown[i])
            self.shown[i] = count
        body = listing_page(i, count)
        with self._lock:
            self.counts["ok_bytes"] += len(body)
        return Response(body, headers={"ETag": etag})


def listing_page(source: int, count: int) -> bytes:
    newest = range(count - 1, max(-1, count - 1 - PER_PAGE), -1)
    items = "".join(f'<li><a href="/n/{source}/{k}">Item {k} of listing {source}</a></li>' for k in newest)
    nav = "".join(f'<a href="/section/{k}">Section {k}</a> ' for k in range(60))
    head = f"<html><head><title>Listing {source}</title></head><body><nav>{nav}</nav><ul>{items}</ul><p>"
    tail = "</p></body></html>"
    room = max(0, PAGE_BYTES - len(head) - len(tail))
    return (head + ("Words about the listing. " * (room // 25 + 1))[:room] + tail).encode()


class Meter:
    """The endpoint's bill and the handlers' Lambda seconds, invocations and log bytes, read between steps."""

    def __init__(self, endpoint: Any, logs: Any) -> None:
        from crawlstack.local.billing import Bill

        self.endpoint, self.logs = endpoint, logs
        self.bill = Bill()
        self.lambdas: Counter[str] = Counter()
        self._lock = threading.Lock()
        # Calls forwarded before this meter began (no call is in flight between the set-up's calls).
        self._observed = self._forwarded()
        endpoint.observers.append(self._observe)

    def _observe(self, call: Any) -> None:
        try:
            self.bill.observe(call)
        finally:
            with self._lock:
                self._observed += 1

    def _forwarded(self) -> int:
        while True:
            try:
                return sum(list(self.endpoint.calls.values()))
            except RuntimeError:  # a new key arrived meanwhile
                continue

    def invoke(self, function: str, handler: Callable[..., Any], event: dict[str, Any]) -> Any:
        """Call a handler as Lambda would: its wall time, memory, invocation and log bytes counted."""
        from crawlstack.local.pump import LambdaContext

        spec = settings.FUNCTIONS[function]
        logged = self.logs.logger_bytes[function]
        emf = io.StringIO()  # Lambda sends the EMF lines on stdout to CloudWatch Logs
        began = time.perf_counter()
        with contextlib.redirect_stdout(emf):
            reply = handler(event, LambdaContext(f"crawlstack-{function}", spec.memory_mb, spec.timeout_seconds))
        seconds = time.perf_counter() - began
        self.lambdas[f"lambda_s:{function}"] += seconds
        self.lambdas[f"lambda_gb_s:{function}"] += seconds * spec.memory_mb / 1024
        self.lambdas[f"invocations:{function}"] += 1
        emf_bytes = len(emf.getvalue().encode())
        self.lambdas[f"log_bytes:{function}"] += emf_bytes + self.logs.logger_bytes[function] - logged
        for line in emf.getvalue().splitlines():  # the function's own metrics, e.g. fetch's RunSecondsSlept
            with contextlib.suppress(ValueError, AttributeError):
                for name, value in json.loads(line).items():
                    values = value if isinstance(value, list) else [value]
                    if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                        self.lambdas[f"metric:{function}:{name}"] += sum(values)
        if isinstance(reply, dict) and reply.get("batchItemFailures"):
            raise SystemExit(f"watch_cost: {function} failed part of its batch: {reply}")
        return reply

    def snapshot(self) -> Q:
        """Everything so far, once the endpoint's observer has seen every call it forwarded."""
        deadline = time.monotonic() + 30
        while self._observed < self._forwarded():
            if time.monotonic() > deadline:
                raise SystemExit("watch_cost: the endpoint forwarded calls its observer never saw")
            time.sleep(0.0005)
        b = self.bill
        out: Counter[str] = Counter({f"units:{k}": v for k, v in b.units.items()})
        out.update({f"calls:{s}:{o}": n for (s, o), n in b.billed_calls.items()})
        out.update({f"wru:{t}": v for t, v in b.write_units_by_table.items()})
        out.update({f"op:{s}:{o}:{u}": v for (s, o, u), v in b.units_by_operation.items()})
        out.update(self.lambdas)
        return dict(out)


@contextlib.contextmanager
def table_sized_moto_work_skipped() -> Iterator[list[str]]:
    """moto without two costs in proportion to a table's size, which DynamoDB has not and this bench would bill.

    The handlers' Lambda time here includes moto's time to answer each call,
    and the watch table holds every item seen.  moto sorts a table's every item
    for each Query (here: only the queried partition's, the same answer) and
    deep-copies each table a TransactWriteItems names to roll a failure back
    (here: no copy).  No transaction is meant to fail in this bench (checks run
    one after the other); one that fails anyway is listed, since nothing
    rolled it back.
    """
    import copy

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    failed: list[str] = []
    transact_write_items, query = models.DynamoDBBackend.transact_write_items, Table.query

    def deepcopy(value: Any, memo: Any = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def transact(self: Any, items: list[dict[str, Any]]) -> None:
        try:
            transact_write_items(self, items)
        except Exception as exc:
            failed.append(repr(exc)[:300])
            raise

    def partition_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("index_name") is not None or hash_key is None or not self.range_key_attr:
            return query(self, hash_key, *args, **kwargs)
        self.all_items = lambda: sorted(self.items.get(hash_key, {}).values(), key=lambda x: x.range_key)
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    models.copy = SimpleNamespace(deepcopy=deepcopy)  # type: ignore[assignment]  # its module's one name for copy
    models.DynamoDBBackend.transact_write_items = transact  # type: ignore[method-assign]
    Table.query = partition_query  # type: ignore[method-assign]
    try:
        yield failed
    finally:
        models.copy = copy
        models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
        Table.query = query  # type: ignore[method-assign]


class Stack:
    """The stack's queues as event source mappings see them: drained in batches, handed to the handlers."""

    def __init__(
        self, names: dict[str, str], meter: Meter, handlers: dict[str, Any], consume: Callable[[], object]
    ) -> None:
        """``consume``: called after each extract invocation (the bus's rule's consumer)."""
        from crawlstack import aws

        self.sqs, self.meter, self.handlers, self.consume = aws.client("sqs"), meter, handlers, consume
        self.urls = {key: names[settings.ENV_QUEUE_URL[key]] for key in settings.QUEUES}
        self.arns = {
            key: self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            for key, url in self.urls.items()
        }

    def drain(self, key: str) -> list[str]:
        out: list[str] = []
        while got := self.sqs.receive_message(QueueUrl=self.urls[key], MaxNumberOfMessages=10).get("Messages", []):
            out += [m["Body"] for m in got]
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
            self.sqs.delete_message_batch(QueueUrl=self.urls[key], Entries=entries)
        return out

    def event(self, key: str, bodies: list[str]) -> dict[str, Any]:
        record = {"attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {}, "md5OfBody": ""}
        record |= {"eventSource": "aws:sqs", "eventSourceARN": self.arns[key], "awsRegion": "us-east-1"}
        return {
            "Records": [
                {**record, "messageId": str(uuid.uuid4()), "receiptHandle": f"rh-{i}", "body": body}
                for i, body in enumerate(bodies)
            ]
        }

    def push(self) -> None:
        """Dispatch, fetch and extract what the queues hold, in their mappings' batches, until none is left."""
        while True:
            moved = 0
            for key in ("frontier", "fetch", "extract"):
                bodies, queue = self.drain(key), settings.QUEUES[key]
                moved += len(bodies)
                for start in range(0, len(bodies), queue.batch_size):
                    batch = self.event(key, bodies[start : start + queue.batch_size])
                    self.meter.invoke(queue.consumer, self.handlers[queue.consumer], batch)
                    if key == "extract":
                        self.consume()
            if not moved:
                return


def simulate(sources: int, hosts: int, days: int, seed: int, minutes: int | None = None) -> dict[str, Any]:
    """``days`` of ``sources`` on ``hosts``: each tick's (what it did, quantities), the pipeline's, the web's.

    ``minutes``: stop after that many ticks (a short look; the split needs whole days).
    """
    import boto3

    from crawlstack import aws
    from crawlstack.demo.server import LoopbackWeb
    from crawlstack.fetch.crawllog import iso_time
    from crawlstack.local import resources
    from crawlstack.local.billing import LogMeter
    from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, moto_server
    from crawlstack.messages import CheckRef, FrontierMessage
    from crawlstack.urls import canonicalize
    from crawlstack.watch.pages import WATCH_CRAWL_ID
    from crawlstack.watch.sources import Source
    from functions import container

    if not 1 <= hosts <= 250:
        raise SystemExit("watch_cost: --hosts must be 1 to 250 (127.0.0.2 and up)")
    began, t0 = time.monotonic(), float(int(time.time() // 60) * 60 + 1)
    listings = Listings(sources, random.Random(seed), t0 - 30 * DAY, t0 + (days + 1) * DAY)
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(moto_server(reset=True))
        failed = stack.enter_context(table_sized_moto_work_skipped())
        endpoint = stack.enter_context(FaultyEndpoint(upstream, FaultPlan(failure_rate=0.0)))
        web = stack.enter_context(LoopbackWeb())
        rules = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="crawlstack-watch-cost-")))
        (rules / "listing.json").write_text(json.dumps(RULE), encoding="utf-8")
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": endpoint.url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "POWERTOOLS_LOG_LEVEL": "INFO",  # the deployed application log level (infra.functions)
                "POWERTOOLS_TRACE_DISABLED": "true",
                settings.ENV_RULES_DIR: str(rules),
                settings.ENV_ALLOW_PRIVATE: "127.0.0.0/8",
                settings.ENV_DEFAULT_DELAY: "0",
            }
        )
        container.reset()
        names = resources.create_all()
        os.environ.update(names)
        bus = names[settings.ENV_EVENT_BUS]
        sqs, events = aws.client("sqs"), aws.client("events")
        items = sqs.create_queue(QueueName="items")["QueueUrl"]
        # The rule's consumer reads straight from moto (its costs are its own), so the queue stays short:
        # moto's SQS takes time in proportion to a queue's length.
        consumer = boto3.session.Session().client("sqs", endpoint_url=upstream)
        delivered = Counter[str]()

        def consume() -> None:
            while got := consumer.receive_message(QueueUrl=items, MaxNumberOfMessages=10).get("Messages", []):
                delivered["events"] += len(got)
                entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
                consumer.delete_message_batch(QueueUrl=items, Entries=entries)

        arn = sqs.get_queue_attributes(QueueUrl=items, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        pattern = json.dumps({"detail-type": [settings.EVENT_DETAIL_TYPE]})
        events.put_rule(Name="items", EventBusName=bus, EventPattern=pattern)

        from functions.dispatch import handler as dispatch
        from functions.extract import handler as extract
        from functions.fetch import handler as fetch
        from functions.schedule import handler as schedule

        for function in settings.FUNCTIONS:  # their lines are counted, not shown
            for h in logging.getLogger(function).handlers:
                if isinstance(h, logging.StreamHandler):
                    h.setStream(stack.enter_context(open(os.devnull, "w", encoding="utf-8")))
        logs = stack.enter_context(LogMeter().counting(settings.FUNCTIONS))
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        meter = Meter(endpoint, logs)
        handlers = {"dispatch": dispatch.handler, "fetch": fetch.handler, "extract": extract.handler}
        queues = Stack(names, meter, handlers, consume)

        def tick(at: float) -> dict[str, int]:
            listings.now = at
            schedule.clock = lambda: at  # type: ignore[attr-defined]
            done: dict[str, int] = meter.invoke("schedule", schedule.handler, {})
            return done

        tick(t0 - 2 * 3600)  # no sources yet: the watch crawl's config, the container warmed
        urls = []
        for i in range(sources):
            address = f"127.0.0.{2 + i % hosts}"
            if address not in web.hosts:
                web.add_host(address, fallback=listings.respond)
            urls.append(canonicalize(web.url(address, f"/news/{i}")))
        found = [Source(f"s{i:05d}", url, "listing", priority_max=PRIORITY) for i, url in enumerate(urls)]
        aws.DynamoSources(names[settings.ENV_TABLE["watch"]]).add_all(found)
        # Each source checked once, unbilled: its items seen and its ETag kept, as after a first day.  A few
        # at a time, so a fetch invocation does not linger; the rule has no target yet (moto is slow to
        # deliver events, and these are not the day's).
        listings.now = t0 - 3600
        first = [FrontierMessage(s.url, 0, WATCH_CRAWL_ID, check=CheckRef(s.id, iso_time(t0 - 3600))) for s in found]
        for start in range(0, len(first), FIRST_CHECKS):
            chunk = first[start : start + FIRST_CHECKS]
            entries = [{"Id": str(n), "MessageBody": m.to_json()} for n, m in enumerate(chunk)]
            sqs.send_message_batch(QueueUrl=queues.urls["frontier"], Entries=entries)
            queues.push()
        print(f"watch_cost: first checks done, {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        listings.counts.clear()
        events.put_targets(Rule="items", EventBusName=bus, Targets=[{"Id": "items", "Arn": arn}])

        ticks: list[tuple[dict[str, int], Q]] = []
        pipeline: Q = {}
        step = 60.0 * settings.SCHEDULE_RATE_MINUTES  # EventBridge Scheduler's rate
        for minute in range(days * round(DAY / step) if minutes is None else minutes):
            before = meter.snapshot()
            done = tick(t0 + step * minute)
            after = meter.snapshot()
            ticks.append((done, {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}))
            if done["sent"]:
                queues.push()
                pushed = meter.snapshot()
                pipeline = {k: pipeline.get(k, 0) + v - after.get(k, 0) for k, v in pushed.items()}
            if (minute + 1) * step % (4 * 3600) == 0:
                sent = sum(d["sent"] for d, _ in ticks)
                print(f"watch_cost: {(minute + 1) * step / 3600:g} h simulated, {sent} checks, "
                      f"{time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
        container.reset()
    return {
        "ticks": ticks,
        "pipeline": {k: v for k, v in pipeline.items() if v},
        "web": dict(listings.counts),
        "events_delivered": delivered["events"],  # to the rule's queue, by the day's checks
        "transactions_failed": failed,
        "seconds": time.monotonic() - began,
    }
