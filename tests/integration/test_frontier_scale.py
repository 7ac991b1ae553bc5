"""A host's backlog waits in DynamoDB, not in the fetch queue: its run works through it (ARCHITECTURE.md).

SQS delays stop at 15 minutes (``settings.MAX_SQS_DELAY_SECONDS``).  Here the
limit is shortened to 2 s and one host is crawled whose backlog, at its
delay, lasts several times longer, through :class:`FaultyEndpoint` (with no
faults) in front of a moto server, which sees every AWS call the crawl makes.
A design that queued the backlog with delays would need longer delays than
the limit, and one that cycled waiting URLs through the queue would send
more the longer the backlog.  So the crawl runs at two backlog sizes and the
test compares fetch-queue messages: run messages, a host each, never a URL.

From the endpoint: the fetch-queue messages sent (SendMessage and each entry
of SendMessageBatch) and their ``DelaySeconds``, and the backlog's writes.
From the server's request log: every page fetched once, never closer
together than the delay.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from webs import Crawl, assert_spacing, page_requests, span, star_site

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Response
from crawlstack.local.faulty import Call, FaultPlan, FaultyEndpoint

SMALL, LARGE = "127.0.0.2", "127.0.0.3"
BACKLOG = {SMALL: 10, LARGE: 30}
DELAY = 0.3
# The shortened SQS delay limit: each backlog lasts longer at DELAY (3 s and 9 s).
LIMIT = 2
# Each page takes this long to answer, so a request ends later than its slot
# began, as it does on a real network (and the next slot may come before the host is free).
LATENCY = 0.05


@dataclass
class Observed:
    """What the endpoint saw of the fetch queue and the parked table."""

    # Per fetch-queue message: (time seen, its body, DelaySeconds).
    sent: list[tuple[float, dict[str, Any], int]] = field(default_factory=list)
    backlog_writes: Counter[str] = field(default_factory=Counter)  # backlog (parked table) calls by operation
    lock: threading.Lock = field(default_factory=threading.Lock)

    def describe(self) -> str:
        """Every fetch-queue send, for assertion messages."""
        t0 = self.sent[0][0] if self.sent else 0.0
        lines = [f"  +{t - t0:7.3f}s {body} DelaySeconds {delay}" for t, body, delay in self.sent]
        return "fetch-queue sends:\n" + "\n".join(lines) + f"\nbacklog writes: {dict(self.backlog_writes)}"

    def __call__(self, call: Call) -> None:
        if call.status is None or call.status >= 300 or not call.request:
            return
        if call.service == "sqs" and call.operation in ("SendMessage", "SendMessageBatch"):
            request = json.loads(call.request)
            if not request["QueueUrl"].endswith("/" + settings.QUEUES["fetch"].name):
                return
            entries = request.get("Entries") or [request]
            with self.lock:
                now = time.time()
                for entry in entries:
                    self.sent.append((now, json.loads(entry["MessageBody"]), int(entry.get("DelaySeconds", 0))))
        elif call.service == "dynamodb" and call.operation in ("BatchWriteItem", "PutItem", "DeleteItem"):
            request = json.loads(call.request)
            table = settings.TABLES["parked"].name
            if request.get("TableName") == table or table in request.get("RequestItems", {}):
                with self.lock:
                    self.backlog_writes[call.operation] += 1


def reset(upstream: str) -> None:
    """Empty moto's backends (they are per process): each crawl starts from no queues, tables or hosts."""
    urllib.request.urlopen(urllib.request.Request(f"{upstream}/moto-api/reset", method="POST"), timeout=10).close()


def crawl_through_endpoint(web: LoopbackWeb, crawl: Crawl, upstream: str, host: str) -> tuple[Observed, int]:
    """Crawl ``host`` alone; what the endpoint saw, and the number of URLs (pages and robots.txt are apart)."""
    reset(upstream)
    observed = Observed()
    with FaultyEndpoint(upstream, FaultPlan(failure_rate=0.0)) as endpoint:
        endpoint.observers.append(observed)
        result = crawl(web.url(host, "/"), delay=DELAY, max_depth=1, extra=["--endpoint-url", endpoint.url])
    urls = 1 + BACKLOG[host]
    assert sorted(e["outcome"] for e in result.log) == ["fetched"] * urls, result.log_text()
    return observed, urls


def test_a_backlog_longer_than_the_sqs_delay_limit_waits_in_its_hosts_run_not_the_queue(
    web: LoopbackWeb, crawl: Crawl, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sqs_delay and aws.Queue.send read the limit when they run; nothing reads it at import.
    monkeypatch.setattr(settings, "MAX_SQS_DELAY_SECONDS", LIMIT)
    for host, n in BACKLOG.items():
        site = star_site(n)
        for path in list(site):
            if path != "/":
                site[path] = Response(site[path].body, delay=LATENCY)
        web.add_host(host, site)

    sends: dict[str, int] = {}
    for host, n in BACKLOG.items():
        observed, _ = crawl_through_endpoint(web, crawl, moto_server, host)
        why = f"{host}, {n} pages:\n{observed.describe()}"

        # Every page fetched once, never closer together than the delay, over
        # a time several times the shortened limit.
        got = Counter(e.bare_path for e in page_requests(web, host))
        assert got == Counter(["/"] + [f"/p{i}.html" for i in range(1, n + 1)]), got
        assert_spacing(web, host, DELAY)
        assert span(page_requests(web, host)) > n * DELAY > LIMIT

        # The fetch queue carried run messages of this host only, none delayed past the limit.
        assert observed.sent and all(set(body) == {"host", "run_id"} for _, body, _ in observed.sent), why
        assert {body["host"] for _, body, _ in observed.sent} == {host}, why
        assert max(delay for _, _, delay in observed.sent) <= LIMIT, why
        sends[host] = len(observed.sent)
        # The backlog took the URLs in bundles: a few writes for the whole host, not one per URL.
        assert sum(observed.backlog_writes.values()) < n, why

    # Three times the backlog, and no more messages for it: nothing cycles through the queue per URL.
    assert sends[LARGE] <= sends[SMALL] + 1, sends
