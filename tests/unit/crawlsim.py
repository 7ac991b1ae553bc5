"""A tiny in-memory crawl: dispatcher and fetcher on the fakes, queues as lists, a fake clock and web.

Messages wait in the simulated queues for their ``DelaySeconds`` on the fake
clock, so politeness gaps can be judged from the web's request log.  There is
no extract stage: the tests send every URL to the frontier themselves.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
from dispatching import build_dispatcher
from fakes import FakeBlobs, FakeClock, FakeCrawls, FakeHeld, FakeHosts, FakeParking, FakeUrls

from crawlstack import http
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import Outbox
from crawlstack.fetcher import Fetcher
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import Politeness
from crawlstack.robots import RobotsRecord

UA = "crawlstack/test"


@dataclass
class SimQueue:
    """(visible_at, body) pairs; ``send`` takes (body, delay) like ``aws.Queue``."""

    clock: FakeClock
    messages: list[tuple[float, str]] = field(default_factory=list)

    def send(self, messages: object) -> int:
        n = 0
        for body, delay in messages:  # type: ignore[attr-defined]
            self.messages.append((self.clock.now + delay, body))
            n += 1
        return n

    def take_visible(self) -> list[str]:
        ready = [m for m in self.messages if m[0] <= self.clock.now]
        self.messages = [m for m in self.messages if m[0] > self.clock.now]
        return [body for _, body in sorted(ready, key=lambda m: m[0])]

    def next_visible(self) -> float | None:
        return min((t for t, _ in self.messages), default=None)


class SimCrawl:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *configs: CrawlConfig) -> None:
        self.clock = FakeClock()
        self.crawls = FakeCrawls(*configs)
        self.urls = FakeUrls()
        self.hosts = FakeHosts(self.clock)
        self.parking = FakeParking()
        self.held = FakeHeld(self.crawls)
        self.politeness = Politeness(self.hosts, self.parking, self.clock)
        self.dispatcher = build_dispatcher(
            self.crawls, self.urls, self.hosts, self.politeness, clock=self.clock, held=self.held
        )
        self.fetcher = Fetcher(
            self.urls,
            self.crawls,
            self.politeness,
            FakeBlobs(),
            clock=self.clock,
            sleep=self.clock.sleep,
            held=self.held,
        )
        self.frontier = SimQueue(self.clock)
        self.fetch = SimQueue(self.clock)
        # (url, crawl user agent, time) per request made.
        self.requests: list[tuple[str, float]] = []
        # Seconds each request takes on the fake clock.
        self.latency = 0.0
        self._lock = threading.Lock()
        monkeypatch.setattr(http, "fetch", self._fetch)

    def _fetch(self, url: str, user_agent: str, guard: http.AddressGuard, **kw: object) -> http.FetchResult:
        with self._lock:
            self.requests.append((url, self.clock.now))
        started = self.clock.now
        self.clock.advance(self.latency)
        return http.FetchResult(
            url=url,
            status=200,
            reason="OK",
            headers=[("Content-Type", "text/html")],
            request_headers=[("User-Agent", user_agent)],
            body=b"<p>hi</p>",
            ip_address="203.0.113.5",
            started_at=started,
            responded_at=started,
            finished_at=self.clock.now,
        )

    def allow_robots(self, origin: str) -> None:
        self.hosts.put_robots(RobotsRecord.from_fetch(origin, 404, b""))

    def seed(self, crawl_id: str, *urls: str, depth: int = 0) -> None:
        self.frontier.send((FrontierMessage(url=u, depth=depth, crawl_id=crawl_id).to_json(), 0) for u in urls)

    def _flush(self, outbox: Outbox) -> None:
        self.fetch.send(outbox.fetch)
        self.frontier.send(outbox.frontier)
        for host, orders in outbox.unparked.items():
            self.politeness.unparked(host, orders)

    def step(self) -> bool:
        """Dispatch what the frontier holds, then fetch one visible batch; False when nothing is left to do."""
        bodies = self.frontier.take_visible()
        if bodies:
            outbox = Outbox()
            for i, body in enumerate(bodies):
                self.dispatcher.dispatch(FrontierMessage.from_json(body), outbox, message_id=f"m{len(body)}-{i}")
            self._flush(outbox)
            return True
        tasks = [FetchTask.from_json(b) for b in self.fetch.take_visible()[:10]]
        if tasks:
            outbox = Outbox()
            for task in tasks:  # one at a time: the fake clock is not per thread
                result = self.fetcher.fetch_batch([task], outbox)
                assert not result.errors, result.errors
            self._flush(outbox)
            return True
        nxt = min((t for t in (self.frontier.next_visible(), self.fetch.next_visible()) if t is not None), default=None)
        if nxt is None:
            return False
        self.clock.now = max(self.clock.now, nxt)
        return True

    def run(self, until: float | None = None, limit: int = 10_000) -> None:
        """Run until idle (or the clock passes ``until``)."""
        for _ in range(limit):
            if until is not None and self.clock.now >= until:
                return
            if not self.step():
                return
        raise AssertionError("simulated crawl did not settle")
