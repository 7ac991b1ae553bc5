"""Host runs on moto: fetch invocations racing for a lease, one dying mid-run, and a long backlog.

The stores are the AWS adapters on the embedded moto stack; requests go to
a loopback web and are judged from its request log (or, for the long
backlog, from a stand-in for the network, since what is measured there is
SQS calls, not pages).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from webs import assert_spacing, page, page_requests

from crawlstack import aws, settings
from crawlstack.config import CrawlConfig
from crawlstack.demo.server import LoopbackWeb, Response
from crawlstack.fetch import host_loop as host_module
from crawlstack.fetch import http
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.runs.admission import RunAdmissions, admit
from crawlstack.urls import canonicalize, fingerprint, host_of
from crawlstack.wiring import Services
from functions import container
from functions.fetch import handler as fetch_handler

HOST = "127.0.0.2"
CRAWL = "c"
UA = "crawlstack-test/1.0"
# An invocation's time: enough that no host stops for its deadline here.
ROOMY = settings.RUN_STOP_MARGIN_SECONDS + 30


class Context:
    """The Lambda context's remaining time, which the fetch handler turns into its deadline."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.function_name = "crawlstack-fetch"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:crawlstack-fetch"
        self.aws_request_id = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def enqueue(svc: Services, urls: list[str], delay: float, *, claim: bool = True) -> list[RunMessage]:
    """Claim ``urls`` and admit them to their hosts' backlogs, as dispatch does; the run messages won.

    ``claim=False`` admits without the claims: a first try reads no claim and
    writes none (``fetch.host_loop.HostLoop._read_states``, ``fetch.outcomes.logged_only``),
    so only a test of the queue's calls may leave them out.
    """
    svc.crawls.put(CrawlConfig(crawl_id=CRAWL, delay=delay, user_agent=UA, allow_private=("127.0.0.0/8",)))
    admissions = RunAdmissions()
    for url in urls:
        canonical = canonicalize(url)
        fp = fingerprint(canonical)
        if claim:
            assert svc.urls.claim(CRAWL, fp, canonical, 1, claimer="seed")
        admissions.add(FetchTask(canonical, fp, host_of(canonical), 1, CRAWL, 0.0))
    return admit(admissions, svc.backlog, svc.runs, time.time())


def event(*messages: RunMessage) -> dict[str, Any]:
    return {
        "Records": [
            _record({"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": msg.to_json()})
            for i, msg in enumerate(messages)
        ]
    }


@pytest.fixture
def svc(stack: dict[str, str]) -> Iterator[Services]:
    yield container.services()


def test_two_fetch_invocations_racing_for_one_hosts_lease_fetch_each_page_once(
    svc: Services, web: LoopbackWeb
) -> None:
    web.add_host(HOST, {f"/p{i}": Response(page(f"p{i}"), delay=0.05) for i in range(6)})
    [msg] = enqueue(svc, [web.url(HOST, f"/p{i}") for i in range(6)], delay=0.3)
    # The run's message twice (a duplicate delivery), each to its own invocation, at once.
    responses: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda: responses.append(fetch_handler.handler(event(msg), Context(ROOMY))))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert responses == [{"batchItemFailures": []}] * 2  # the loser's lease was refused: done with, no retry
    assert sorted(e.bare_path for e in page_requests(web, HOST)) == [f"/p{i}" for i in range(6)]
    assert_spacing(web, HOST, 0.3)
    run = svc.runs.get(HOST)
    assert run.run_id is None and run.holder is None  # the winner ended the run with the backlog
    assert svc.backlog.peek(HOST, 10) == []


class Died(BaseException):
    """The invocation's process ends here: nothing after it runs, no ``except Exception`` sees it."""


def test_an_invocation_that_dies_mid_run_loses_no_url_and_the_next_holder_keeps_the_delay(
    svc: Services, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    delay = 0.3  # under a lone host's break-even wait (crawlstack.fetch.pacing): slept, not rescheduled
    web.add_host(HOST, {f"/p{i}": page(f"p{i}") for i in range(5)})
    [msg] = enqueue(svc, [web.url(HOST, f"/p{i}") for i in range(5)], delay=delay)
    runner = svc.runner
    runner.lease_seconds, runner.renew_before = 3.0, 1.0
    started: list[tuple[str, float]] = []
    real = host_module.guarded_fetch

    def fetch(url: str, user_agent: str, guard: http.AddressGuard, headers: Any = ()) -> http.FetchResult:
        started.append((url, time.time()))
        if len(started) == 3 and dying:
            raise Died  # after sending its third request
        return real(url, user_agent, guard, headers)

    monkeypatch.setattr(host_module, "guarded_fetch", fetch)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the dead thread's traceback
    dying = True
    first = runner.run([msg], time.time() + ROOMY)
    dead = svc.runs.get(HOST)
    assert dead.holder == first.holder and dead.lease_until > 0  # never released
    assert len(svc.backlog.peek(HOST, 10)) == 1  # its bundle stayed: nothing was flushed

    dying = False
    refused = runner.run(
        [msg], time.time() + settings.RUN_STOP_MARGIN_SECONDS + 30
    )  # redelivered before the lease ran out
    assert refused.ends == {HOST: "refused"}
    time.sleep(max(0.0, dead.lease_until - time.time()))
    second = runner.run(
        [msg], time.time() + settings.RUN_STOP_MARGIN_SECONDS + 30
    )  # redelivered after the lease ran out
    assert second.ends == {HOST: "done"}

    after = [t for _, t in started[3:]]
    # The dead holder may have sent a request at any moment of its lease: the next waits a delay past it.
    assert after[0] >= dead.lease_until + delay
    fetched = Counter(e.bare_path for e in page_requests(web, HOST))
    assert set(fetched) == {f"/p{i}" for i in range(5)}  # no URL lost
    assert sum(fetched.values()) - 5 <= 2  # refetched: at most what the dead holder fetched unflushed
    assert_spacing(web, HOST, delay)
    assert svc.backlog.peek(HOST, 10) == []


def test_a_10000_url_backlog_costs_a_constant_number_of_queue_operations(
    svc: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQS calls grow with the invocations a backlog takes, not with its URLs; none are per URL."""

    def answer(url: str, *_: Any) -> http.FetchResult:
        return http.FetchResult(url=url, status=404, finished_at=time.time())

    monkeypatch.setattr(host_module, "guarded_fetch", answer)
    monkeypatch.setattr(http, "fetch_robots", answer)
    calls: Counter[str] = Counter()
    sqs = aws.client("sqs")
    sqs.meta.events.register("before-call.sqs.*", lambda model, **_: calls.update([model.name]))

    def crawl(n: int) -> tuple[int, int]:
        """Queue calls and fetch invocations for a backlog of ``n`` URLs of one host."""
        host = f"h{n}.test"
        calls.clear()
        # Unclaimed: 11,000 conditional writes to moto took nine tenths of this test, and no fetch reads them.
        messages = enqueue(svc, [f"http://{host}/p{i}" for i in range(n)], delay=0.0, claim=False)
        svc.send_runs(messages)
        invocations = 0
        assert isinstance(svc.fetch_queue, aws.Queue)
        queue = svc.fetch_queue.url
        while True:
            got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
            if not got:
                attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
                if attributes["ApproximateNumberOfMessagesDelayed"] == "0":
                    break
                time.sleep(0.2)  # a wake-up waiting out its delay
                continue
            invocations += 1
            # Each invocation may run 2 s before the host must stop: a long backlog takes several.
            fetch_handler.handler({"Records": [_record(m) for m in got]}, Context(settings.RUN_STOP_MARGIN_SECONDS + 2))
            sqs.delete_message_batch(
                QueueUrl=queue, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
            )
        assert svc.backlog.peek(host, 1) == []
        return sum(calls.values()), invocations

    small_calls, small_invocations = crawl(1_000)
    large_calls, large_invocations = crawl(10_000)
    # Per invocation: a receive, a delete, at most one wake-up send; and one send to start the run.
    assert large_calls <= 3 * large_invocations + 3, calls
    assert small_calls <= 3 * small_invocations + 3
    # Calls follow the invocations the backlog's fetching takes, never its URLs: per URL they do not grow.
    assert large_calls / 10_000 <= small_calls / 1_000


def _record(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:crawlstack-fetch",
        "awsRegion": "us-east-1",
    }
