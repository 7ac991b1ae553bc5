"""A host's backlog is parked, not cycled through the fetch queue (ARCHITECTURE.md, "Frontier at scale").

SQS delays stop at 15 minutes (``settings.MAX_SQS_DELAY_SECONDS``).  Here the
limit is shortened to 2 s and one host is crawled whose backlog, at its
delay, lasts several times longer, through :class:`FaultyEndpoint` (with no
faults) in front of a moto server, which sees every AWS call the crawl makes.
A design that queued the backlog with delays would need longer delays than
the limit, and one that cycled waiting URLs through the queue would send each
URL once per limit it waits: sends per URL would grow with the backlog.  So
the crawl runs at two backlog sizes and the test compares sends per URL.

From the endpoint: the fetch-queue messages sent (SendMessage and each entry
of SendMessageBatch), their ``DelaySeconds``, and the parked table's writes.
From the server's request log: every page fetched once, never closer together
than the delay.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

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
# Fetch-queue sends per URL allowed: one per admission (or unpark), plus a
# re-send now and then when a task reaches its slot before the host is free.
MAX_SENDS_PER_URL = 1.25
# Scheduling slack in the waits, seconds.
SLACK = 0.2


@dataclass
class Observed:
    """What the endpoint saw of the fetch queue and the parked table."""

    # Per fetch-queue message: (time seen, URL, seconds to its slot (not_before) when seen, DelaySeconds).
    sent: list[tuple[float, str, float, int]] = field(default_factory=list)
    parked_writes: Counter[str] = field(default_factory=Counter)  # parked-table calls by operation
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def sends(self) -> Counter[str]:
        """Fetch-queue messages per URL."""
        return Counter(url for _, url, _, _ in self.sent)

    def describe(self) -> str:
        """Every fetch-queue send, for assertion messages."""
        t0 = self.sent[0][0] if self.sent else 0.0
        lines = [
            f"  +{t - t0:7.3f}s {url} slot in {wait:.3f}s, DelaySeconds {delay}" for t, url, wait, delay in self.sent
        ]
        return "fetch-queue sends:\n" + "\n".join(lines) + f"\nparked-table writes: {dict(self.parked_writes)}"

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
                    task = json.loads(entry["MessageBody"])
                    self.sent.append((now, task["url"], task["not_before"] - now, int(entry.get("DelaySeconds", 0))))
        elif call.service == "dynamodb" and call.operation in ("PutItem", "UpdateItem", "DeleteItem"):
            request = json.loads(call.request)
            if request.get("TableName") == settings.TABLES["frontier"].name:
                with self.lock:
                    self.parked_writes[call.operation] += 1


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


def test_a_backlog_longer_than_the_sqs_delay_limit_is_parked_not_cycled(
    web: LoopbackWeb, crawl: Crawl, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # politeness.sqs_delay and aws.Queue.send read the limit when they run; nothing reads it at import.
    monkeypatch.setattr(settings, "MAX_SQS_DELAY_SECONDS", LIMIT)
    for host, n in BACKLOG.items():
        site = star_site(n)
        for path in list(site):
            if path != "/":
                site[path] = Response(site[path].body, delay=LATENCY)
        web.add_host(host, site)

    per_url: dict[str, float] = {}
    for host, n in BACKLOG.items():
        observed, urls = crawl_through_endpoint(web, crawl, moto_server, host)
        why = f"{host}, {n} pages:\n{observed.describe()}"

        # Every page fetched once, never closer together than the delay, over
        # a time several times the shortened limit.
        got = Counter(e.bare_path for e in page_requests(web, host))
        assert got == Counter(["/"] + [f"/p{i}.html" for i in range(1, n + 1)]), got
        assert_spacing(web, host, DELAY)
        assert span(page_requests(web, host)) > n * DELAY > LIMIT

        # No message was to wait longer than the window's requests take, far
        # below the limit, and none was sent with a longer DelaySeconds.
        window_time = settings.DELAYED_HOST_WINDOW * (DELAY + LATENCY)
        assert max(wait for _, _, wait, _ in observed.sent) <= window_time + SLACK < LIMIT, why
        assert max(delay for _, _, _, delay in observed.sent) <= LIMIT, why

        # Each URL goes to the fetch queue a small, constant number of times.
        pages = {web.url(host, "/")} | {web.url(host, f"/p{i}.html") for i in range(1, n + 1)}
        assert set(observed.sends) == pages, why
        per_url[host] = sum(observed.sends.values()) / urls
        assert per_url[host] <= MAX_SENDS_PER_URL, why
        assert max(observed.sends.values()) <= 2, why

        # The backlog waited in the parked table: most URLs parked, each at
        # most once, and each parked row deleted once its URL was sent.
        puts = observed.parked_writes["PutItem"]
        assert n // 2 <= puts <= n and observed.parked_writes["DeleteItem"] == puts, why

    # Three times the backlog, and no more sends per URL: nothing cycles.
    assert per_url[LARGE] <= per_url[SMALL] + 0.1, per_url
