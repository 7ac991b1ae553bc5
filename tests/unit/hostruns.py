"""Host runs on the fakes: a fake web patched over ``http.fetch``, a fake clock, and a runner on the fake stores.

Shared by the tests of ``crawlstack.runs`` and of what a response means
(``crawlstack.fetch.outcomes``): ``Env`` admits tasks as dispatch does (the
bundle first, then the run), runs ``HostRunner`` on the run messages, and
wakes the hosts that were rescheduled (``Env.settle``), so a test drives a
host's whole life through the runner.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fakes import (
    FakeBacklog,
    FakeBlobs,
    FakeClock,
    FakeCrawls,
    FakeHeld,
    FakeHosts,
    FakeResolved,
    FakeRuns,
    FakeUrls,
    url_outcome,
)

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.fetch import http
from crawlstack.fetch.host_runner import HostRunner, RunResult
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.ports import ALLOW_ALL, RobotsRecord
from crawlstack.records.resolution import CompletedRecords
from crawlstack.urls import fingerprint

UA = "crawlstack/test"
HTML = [("Content-Type", "text/html; charset=utf-8")]
HOST = "example.com"


class Web:
    """Stands in for crawlstack.fetch.http.fetch: canned results per URL, and a log of calls (url, user agent, time)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.pages: dict[str, Callable[[], http.FetchResult]] = {}
        self.calls: list[tuple[str, str, float]] = []
        self.headers: dict[str, list[tuple[str, str]]] = {}  # the extra headers of the last request of each URL
        self._lock = threading.Lock()

    def page(
        self, url: str, status: int | None = 200, body: bytes = b"<p>hi</p>", headers: list | None = None, **kw: object
    ) -> None:
        reason = str(kw.pop("reason", "OK" if status == 200 else "Other"))

        def result() -> http.FetchResult:
            return http.FetchResult(
                url=url,
                status=status,
                reason=reason,
                headers=list(HTML if headers is None else headers),
                request_headers=[("User-Agent", UA)],
                body=body,
                ip_address="203.0.113.5",
                started_at=self.clock.now,
                finished_at=self.clock.now,
                **kw,  # type: ignore[arg-type]
            )

        self.pages[url] = result

    def answers(self, url: str, *statuses: int, **kw: Any) -> None:
        """The page answers each of ``statuses`` in turn, then the last one for ever."""
        left = list(statuses)

        def status() -> int:
            return left.pop(0) if len(left) > 1 else left[0]

        self.page(url, **kw)
        page = self.pages[url]

        def result() -> http.FetchResult:
            answer = page()
            answer.status = status()
            return answer

        self.pages[url] = result

    def fetch(self, url: str, user_agent: str, guard: http.AddressGuard, **kw: Any) -> http.FetchResult:
        with self._lock:
            self.calls.append((url, user_agent, self.clock.now))
            self.headers[url] = list(kw.get("extra_headers") or ())
        return self.pages[url]()

    def urls(self) -> list[str]:
        with self._lock:
            return [url for url, _, _ in self.calls]


class SharedClock(FakeClock):
    """Virtual time for threads: a sleep blocks until every worker sleeps, then time jumps to the earliest wake.

    Workers are the runner's host threads (named ``run-<host>``); one that
    finished no longer counts.
    """

    def __init__(self, workers: int) -> None:
        super().__init__()
        self.workers = workers
        self.cond = threading.Condition()
        self.known: set[threading.Thread] = set()
        self.asleep: dict[threading.Thread, float] = {}

    def __call__(self) -> float:
        self._know()
        return self.now

    def _know(self) -> None:
        me = threading.current_thread()
        if me.name.startswith("run-"):  # HostRunner's host threads
            with self.cond:
                self.known.add(me)

    def sleep(self, seconds: float) -> None:
        self._know()
        me = threading.current_thread()
        with self.cond:
            self.sleeps.append(seconds)
            wake = self.now + seconds
            self.asleep[me] = wake
            while self.now < wake:
                live = {t for t in self.known if t.is_alive()}
                all_asleep = live <= set(self.asleep)
                earliest = min((self.asleep[t] for t in live), default=wake) if all_asleep else self.now
                if len(self.known) >= self.workers and all_asleep and earliest > self.now:
                    self.now = earliest
                    self.cond.notify_all()
                    continue
                self.cond.wait(0.005)
            del self.asleep[me]


class Env:
    """One crawl ("c", its delay, user agent ``UA``) on the fakes, its web patched over ``http.fetch``.

    Every task carries record r1 (want title) unless told otherwise,
    incomplete unless a test completes it (``complete``).
    """

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, delay: float = 0.25, clock: FakeClock | None = None, **config: Any
    ) -> None:
        self.clock = clock or FakeClock()
        self.journal: list[tuple[str, ...]] = []
        self.urls = FakeUrls(self.journal, clock=self.clock)
        self.blobs = FakeBlobs(journal=self.journal)
        self.crawls = FakeCrawls(CrawlConfig(crawl_id="c", delay=delay, user_agent=UA, **config))
        self.hosts = FakeHosts(self.clock)
        self.runs = FakeRuns()
        self.backlog = FakeBacklog()
        self.held = FakeHeld(self.crawls)
        self.resolved = FakeResolved()
        self.completed = CompletedRecords()
        self.web = Web(self.clock)
        self.robots: dict[str, Callable[[], http.FetchResult]] = {}
        self.sent: list[list[tuple[str, int]]] = []  # redirects sent at each flush, with send_frontier
        monkeypatch.setattr(http, "fetch", self.web.fetch)
        self.runner = self.make_runner()
        self._seq = 0
        real_delete = self.backlog.delete

        def delete(host: str, key: str) -> None:
            self.journal.append(("delete", host, key))
            real_delete(host, key)

        monkeypatch.setattr(self.backlog, "delete", delete)

    def make_runner(self, send_frontier: bool = False) -> HostRunner:
        def send(messages: list[tuple[str, int]]) -> None:
            self.journal.append(("send_frontier", str(len(messages))))
            self.sent.append(messages)

        return HostRunner(
            self.runs,
            self.backlog,
            self.urls,
            self.crawls,
            self.blobs,
            self.hosts,
            clock=self.clock,
            sleep=self.clock.sleep,
            resolved=self.resolved,
            completed=self.completed,
            held=self.held,
            jitter=lambda: 0.5,
            fetch_robots=self.fetch_robots,
            send_frontier=send if send_frontier else None,
        )

    def fetch_robots(
        self, origin: str, user_agent: str, guard: http.AddressGuard, may_follow: Callable[[str], str | None]
    ) -> http.FetchResult:
        with self.web._lock:
            self.web.calls.append((origin + "/robots.txt", user_agent, self.clock.now))
        return self.robots[origin]()

    def cache_robots(self, host: str = HOST) -> None:
        origin = f"http://{host}"
        self.hosts.put_robots(RobotsRecord(origin, ALLOW_ALL, "", 404, self.clock.now, self.clock.now + 1e9))

    # -- URLs and tasks -----------------------------------------------------
    @staticmethod
    def url(path: str, host: str = HOST) -> str:
        return f"http://{host}/{path}"

    def fp(self, path: str, host: str = HOST) -> str:
        return fingerprint(self.url(path, host))

    def task(
        self,
        path: str,
        host: str = HOST,
        depth: int = 1,
        page: bool = True,
        claimer: str = "",
        record_id: str | None = "r1",
        want: tuple[str, ...] = ("title",),
        **kw: Any,
    ) -> FetchTask:
        """A task claimed as dispatch claims it; with ``page``, its URL answers 200 with a small page."""
        url = self.url(path, host)
        self.urls.claim("c", fingerprint(url), url, depth, claimer=claimer, record_id=record_id)
        if page:
            self.web.page(url, body=f"<p>{path}</p>".encode())
        return FetchTask(
            url=url,
            fp=fingerprint(url),
            host=host,
            depth=depth,
            crawl_id="c",
            not_before=0.0,
            record_id=record_id,
            want=want,
            **kw,
        )

    def add(self, tasks: list[FetchTask], host: str = HOST, robots: bool = True) -> RunMessage | None:
        """Dispatch's side: the bundle first, then the run; the message if the schedule was won."""
        if robots:
            self.cache_robots(host)
        by_depth: dict[int, list[FetchTask]] = {}
        for task in tasks:
            by_depth.setdefault(task.depth, []).append(task)
        for depth, some in by_depth.items():
            self.backlog.add(host, depth, some)
        self._seq += 1
        run_id = f"run-{host}-{self._seq}"
        won = self.runs.schedule(host, run_id, self.clock.now, self.clock.now + 3600)
        return RunMessage(host, run_id) if won else None

    def admit(self, paths: list[str], host: str = HOST, depth: int = 1, robots: bool = True) -> RunMessage | None:
        return self.add([self.task(p, host, depth) for p in paths], host, robots)

    # -- running ------------------------------------------------------------
    def run(self, *messages: RunMessage | None, seconds: float = 240.0) -> RunResult:
        return self.runner.run([m for m in messages if m is not None], self.clock.now + seconds)

    def settle(self, *messages: RunMessage | None, seconds: float = 240.0, limit: int = 50) -> list[RunResult]:
        """Run the messages, then each wake-up at its SQS delay, until no host goes on; every invocation's result."""
        results = [self.run(*messages, seconds=seconds)]
        for _ in range(limit):
            wakes = results[-1].runs
            if not wakes:
                return results
            self.clock.advance(max(delay for _, delay in wakes))
            results.append(self.run(*(RunMessage.from_json(body) for body, _ in wakes), seconds=seconds))
        raise AssertionError("the hosts never settled")

    # -- what happened ------------------------------------------------------
    def starts(self, host: str = HOST) -> list[float]:
        return [at for url, _, at in self.web.calls if url.startswith(f"http://{host}/")]

    def state(self, path: str, host: str = HOST) -> str | None:
        """The URL's end as the crawl reports it (urls table and crawl log); None: never claimed."""
        if self.urls.state("c", self.fp(path, host)) is None:
            return None
        state: str | None = self.item(path, host).get("state")
        return state

    def item(self, path: str, host: str = HOST) -> dict[str, Any]:
        """The URL's urls-table item with its crawl log's last line merged in (``crawllog.outcome_of``)."""
        return url_outcome(self.urls, self.blobs, "c", self.fp(path, host))

    def outcome(self, task: FetchTask) -> dict[str, Any]:
        """``task``'s URL's end as the crawl reports it (``item`` for a task)."""
        return url_outcome(self.urls, self.blobs, task.crawl_id, task.fp)

    def table_item(self, path: str, host: str = HOST) -> dict[str, Any]:
        """The URL's urls-table item alone."""
        return self.urls.item("c", self.fp(path, host))

    def warcs(self) -> list[str]:
        return self.blobs.keys(settings.PAGES_PREFIX)

    def crawl_logs(self) -> list[str]:
        return self.blobs.keys(settings.CRAWL_LOG_PREFIX)

    def complete(self, record_id: str = "r1") -> None:
        self.resolved.merge("c", record_id, ("title",), {"title": "done"}, "http://example.com/done")
        self.resolved.calls.clear()

    def reads(self) -> list[tuple[object, ...]]:
        return [call for call in self.resolved.calls if call[0] == "get_many"]

    def left(self, host: str = HOST) -> list[FetchTask]:
        """The host's backlog, in order."""
        return [t for b in self.backlog.peek(host, 1000) for t in b.tasks]


def fetched_of(results: list[RunResult]) -> list[Any]:
    return [f for r in results for f in r.fetched]
