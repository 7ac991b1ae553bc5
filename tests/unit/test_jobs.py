"""Crawl jobs on the in-memory stores: several crawls on one host, stop and resume, per-crawl rules."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import pytest
from dispatching import build_dispatcher
from fakes import FakeBacklog, FakeBlobs, FakeClock, FakeCrawls, FakeHeld, FakeHosts, FakeRuns, FakeUrls, url_outcome

from crawlstack import jobs, settings
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import Outbox, dispatch_in_turns, flush_runs
from crawlstack.fetch import http
from crawlstack.fetch.host_runner import HostRunner
from crawlstack.messages import FetchTask, FrontierMessage, RunMessage, frontier_messages
from crawlstack.ports import RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.runs.admission import AdmissionFailed
from crawlstack.scope import out_of_scope, rules_for
from crawlstack.urls import fingerprint

HOST = "example.com"
DELAY = 1.0
UA = "crawlstack/test"


def config(crawl_id: str, **kw: object) -> CrawlConfig:
    return CrawlConfig(crawl_id=crawl_id, delay=DELAY, user_agent=UA, **kw)  # type: ignore[arg-type]


def urls(prefix: str, n: int) -> list[str]:
    return [f"http://{HOST}/{prefix}{i}" for i in range(n)]


@dataclass
class Frontier:
    """The frontier queue: ``send`` takes (body, delay) as ``aws.Queue`` does; delays are not waited out here."""

    bodies: list[str] = field(default_factory=list)

    def send(self, messages: Iterable[tuple[str, int]]) -> int:
        sent = [body for body, _ in messages]
        self.bodies.extend(sent)
        return len(sent)


class Sim:
    """Dispatch and host runs on the fakes, with a fake web and clock; no extract (tests send every URL)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *configs: CrawlConfig) -> None:
        self.clock = FakeClock()
        self.crawls = FakeCrawls(*configs)
        self.urls = FakeUrls(clock=self.clock)
        self.blobs = FakeBlobs()
        self.hosts = FakeHosts(self.clock)
        self.held = FakeHeld(self.crawls)
        self.backlog = FakeBacklog()
        self.runs = FakeRuns()
        self.frontier = Frontier()
        self.dispatcher = build_dispatcher(self.crawls, self.urls, self.hosts, clock=self.clock, held=self.held)
        self.runner = HostRunner(
            self.runs,
            self.backlog,
            self.urls,
            self.crawls,
            self.blobs,
            self.hosts,
            clock=self.clock,
            sleep=self.clock.sleep,
            held=self.held,
            jitter=lambda: 0.5,
        )
        self.run_messages: list[tuple[float, RunMessage]] = []  # (visible at, message)
        self.requests: list[tuple[str, float]] = []
        self.on_request: Callable[[str], None] = lambda url: None
        self._batches = 0
        monkeypatch.setattr(http, "fetch", self._fetch)
        self.hosts.put_robots(RobotsRecord.from_fetch(f"http://{HOST}", 404, b""))

    def _fetch(self, url: str, user_agent: str, guard: http.AddressGuard, **kw: object) -> http.FetchResult:
        self.requests.append((url, self.clock.now))
        self.on_request(url)
        now = self.clock.now
        return http.FetchResult(
            url=url,
            status=200,
            reason="OK",
            headers=[("Content-Type", "text/html")],
            body=b"<p>hi</p>",
            started_at=now,
            finished_at=now,
        )

    def seed(self, crawl_id: str, *seeds: str) -> None:
        self.frontier.send((FrontierMessage(url=url, crawl_id=crawl_id).to_json(), 0) for url in seeds)

    def send_runs(self, messages: Sequence[RunMessage]) -> None:
        self.run_messages.extend((self.clock.now, msg) for msg in messages)

    def dispatch(self) -> None:
        """The frontier's messages as one dispatch batch, then its tasks into their hosts' runs."""
        bodies, self.frontier.bodies = self.frontier.bodies, []
        if not bodies:
            return
        outbox = Outbox()
        batch = []
        for body in bodies:
            self._batches += 1
            batch.append((self._batches, f"m{self._batches}", frontier_messages(body)))
        assert dispatch_in_turns(self.dispatcher, batch, outbox) == {}
        flush_runs(outbox, self.backlog, self.runs, self.send_runs, clock=self.clock)

    def run(self) -> None:
        """Dispatch and fetch until nothing is left; a delayed run message is waited for on the clock."""
        while self.frontier.bodies or self.run_messages:
            self.dispatch()
            if not self.run_messages:
                continue
            due = min(at for at, _ in self.run_messages)
            self.clock.now = max(self.clock.now, due)
            ready = [msg for at, msg in self.run_messages if at <= self.clock.now]
            self.run_messages = [(at, msg) for at, msg in self.run_messages if at > self.clock.now]
            deadline = self.clock.now + settings.FUNCTIONS["fetch"].timeout_seconds
            result = self.runner.run(ready, deadline)
            assert result.errors == {}
            self.run_messages.extend((self.clock.now + delay, RunMessage.from_json(b)) for b, delay in result.runs)

    def resume(self, crawl_id: str) -> int:
        return jobs.resume(
            crawl_id,
            self.crawls,
            self.held,
            self.frontier,
            self.backlog,
            self.runs,
            self.send_runs,
            clock=self.clock,
        )

    def gaps(self) -> list[float]:
        times = sorted(t for _, t in self.requests)
        return [round(b - a, 6) for a, b in itertools.pairwise(times)]

    def assert_nothing_left(self) -> None:
        """No bundle waits in the host's backlog, and its run ended."""
        assert self.backlog.items.get(HOST, {}) == {}
        assert "run_id" not in self.runs.items.get(HOST, {}), self.runs.items[HOST]


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Sim:
    return Sim(monkeypatch, config("a"), config("b"))


# --- several crawls ----------------------------------------------------------
def test_two_crawls_fetch_the_same_urls_once_each_and_share_the_hosts_spacing(sim: Sim) -> None:
    same = urls("p", 6)
    sim.seed("a", *same)
    sim.seed("b", *same)
    sim.run()
    # Dedupe is per crawl: each URL once for each crawl, from the one backlog of the host.
    assert Counter(url for url, _ in sim.requests) == dict.fromkeys(same, 2)
    for crawl_id in ("a", "b"):
        assert {url_outcome(sim.urls, sim.blobs, crawl_id, fingerprint(u))["state"] for u in same} == {"fetched"}
    # Politeness is per host across crawls: one request a delay, no slower.
    assert sim.gaps() == [DELAY] * (2 * len(same) - 1)
    sim.assert_nothing_left()


# --- stop and resume -----------------------------------------------------------
def test_a_stopped_crawl_makes_no_request_holds_its_work_and_its_host_neighbour_goes_on(sim: Sim) -> None:
    a, b = urls("a", 8), urls("b", 8)
    sim.seed("a", *a)
    sim.seed("b", *b)

    def stop_after_three(url: str) -> None:
        if len(sim.requests) == 3:
            jobs.stop("a", sim.crawls)

    sim.on_request = stop_after_three
    sim.run()
    fetched_before = [u for u, _ in sim.requests if u in a]
    assert fetched_before == a[:3]
    # The other crawl on the same host finished, at the host's pace: the held tasks took none of its time.
    b_times = [t for u, t in sim.requests if u in b]
    assert [u for u, _ in sim.requests if u in b] == b
    assert b_times[0] == max(t for u, t in sim.requests if u in a) + DELAY
    assert sim.gaps() == [DELAY] * (len(sim.requests) - 1)
    sim.assert_nothing_left()
    left = a[3:]
    assert sim.held.count() == len(left)
    # All dispatched before the stop: what was held are fetch tasks, taken out of the backlog, still claimed.
    assert all(key.startswith(jobs.TASK_KEY) for key, _ in sim.held.held("a", 100))
    assert {url_outcome(sim.urls, sim.blobs, "a", fingerprint(u))["state"] for u in left} == {"queued"}

    sim.on_request = lambda url: None
    resumed_at = sim.clock.now
    assert sim.resume("a") == len(left)
    assert sim.crawls.get("a").state == jobs.RUNNING
    # Back in the host's backlog, and its run scheduled: no dispatch needed.
    assert sorted(task.url for bundle in sim.backlog.peek(HOST, 10) for task in bundle.tasks) == left
    assert [msg.host for _, msg in sim.run_messages] == [HOST]
    sim.run()
    assert sim.held.count() == 0
    assert Counter(u for u, _ in sim.requests) == dict.fromkeys(a + b, 1)
    assert sorted(u for u, t in sim.requests if t >= resumed_at) == left
    assert min(sim.gaps()) >= DELAY
    sim.assert_nothing_left()


def test_stop_before_dispatch_holds_messages_unclaimed_and_resume_sends_each_once(sim: Sim) -> None:
    jobs.stop("a", sim.crawls)
    sim.seed("a", *urls("a", 5))
    sim.seed("a", urls("a", 5)[0])  # a duplicate message holds onto the same row
    sim.run()
    assert sim.requests == [] and sim.held.count() == 5 and sim.urls.items == {}
    assert all(key.startswith(jobs.FRONTIER_KEY) for key, _ in sim.held.held("a", 100))
    assert sim.backlog.items == {} and sim.runs.calls == []
    assert sim.resume("a") == 5
    assert sorted(FrontierMessage.from_json(body).url for body in sim.frontier.bodies) == urls("a", 5)
    assert sim.resume("a") == 0
    sim.run()
    assert sorted(u for u, _ in sim.requests) == urls("a", 5)
    sim.assert_nothing_left()


def test_resume_puts_a_held_task_back_without_its_old_backoff(sim: Sim) -> None:
    jobs.stop("a", sim.crawls)
    url = urls("a", 1)[0]
    task = FetchTask(
        url=url,
        fp=fingerprint(url),
        host=HOST,
        depth=2,
        crawl_id="a",
        not_before=sim.clock.now + 3600,
        attempt=2,
    )
    assert jobs.hold_task(sim.held, task)
    assert sim.resume("a") == 1
    [bundle] = sim.backlog.peek(HOST, 10)
    assert bundle.key.startswith("0002#") and bundle.tasks == (replace(task, not_before=0.0),)
    assert sim.held.count() == 0
    assert [call[:2] for call in sim.runs.calls] == [("get", HOST), ("schedule", HOST)]


class FailingOnce(FakeBacklog):
    """A backlog whose write for the second host it sees fails, while ``failing``."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = True
        self.hosts: list[str] = []

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        if host not in self.hosts:
            self.hosts.append(host)
        if self.failing and self.hosts.index(host) == 1:
            raise RuntimeError("throttled")
        return super().add(host, depth, tasks)


def test_a_resume_that_fails_midway_sends_the_runs_it_started_keeps_the_rows_and_can_be_run_again(
    sim: Sim,
) -> None:
    jobs.stop("a", sim.crawls)
    for host in ("one.example", "two.example"):
        url = f"http://{host}/x"
        task = FetchTask(url=url, fp=fingerprint(url), host=host, depth=1, crawl_id="a", not_before=0.0)
        assert jobs.hold_task(sim.held, task)
    sim.backlog = backlog = FailingOnce()
    with pytest.raises(AdmissionFailed) as failed:
        sim.resume("a")
    first, second = backlog.hosts
    # The first host's run exists now: its message went out, or nothing would start it.
    assert [msg.host for _, msg in sim.run_messages] == [first] == [msg.host for msg in failed.value.messages]
    assert sim.held.count() == 2  # no row released before its task was added
    backlog.failing = False
    assert sim.resume("a") == 2
    assert sim.held.count() == 0
    # The second host's run starts now; the first's is still live, so its new bundle (a copy) needs no message.
    assert [msg.host for _, msg in sim.run_messages] == [first, second]
    assert [len(backlog.peek(host, 10)) for host in (first, second)] == [2, 1]


def test_a_stale_cached_stop_costs_a_failed_hold_and_nothing_else(sim: Sim) -> None:
    # This container still thinks "a" is stopped; the table says it runs again.
    stale = FakeCrawls(config("a", state=jobs.STOPPED))
    held = FakeHeld(sim.crawls)
    dispatcher = build_dispatcher(stale, sim.urls, sim.hosts, clock=sim.clock, held=held)
    outbox = Outbox()
    decision = dispatcher.dispatch(FrontierMessage(url=urls("a", 1)[0], crawl_id="a"), outbox, "m1")
    assert decision.action == "queued" and held.count() == 0
    assert [task.url for _, depths in outbox.runs for _, tasks in depths for task in tasks] == urls("a", 1)


def test_stop_and_resume_need_a_known_crawl(sim: Sim) -> None:
    with pytest.raises(jobs.UnknownCrawl):
        jobs.stop("nope", sim.crawls)
    with pytest.raises(jobs.UnknownCrawl):
        sim.resume("nope")


def test_state_and_rules_round_trip_through_the_crawls_item() -> None:
    stored = config("a", rules=("book",), state=jobs.STOPPED)
    item = stored.to_item()
    assert (item["state"], item["rules"]) == ("stopped", ["book"])
    back = CrawlConfig.from_item(item, CrawlConfig(crawl_id="a"))
    assert (back.rules, back.state, back.stopped) == (("book",), "stopped", True)
    default = CrawlConfig.from_item({"crawl_id": "x"}, CrawlConfig(crawl_id="x"))
    assert (default.rules, default.state, default.stopped) == (None, "running", False)
    # An empty subset (no mapping at all) survives too.
    assert CrawlConfig.from_item(config("e", rules=()).to_item(), CrawlConfig()).rules == ()


# --- rules set -------------------------------------------------------------------
RULES = RuleSet(
    tuple(
        compile_mapping(f"{name}.json", {"name": name, "url_patterns": [{"type": "regex", "pattern": pattern}]})
        for name, pattern in (("book", r"//books\.example/"), ("author", r"//authors\.example/"))
    )
)


def test_a_crawl_uses_only_the_mappings_its_rules_name() -> None:
    everything, books = config("a"), config("b", rules=("book",))
    assert rules_for(RULES, everything) is RULES
    assert [m.name for m in rules_for(RULES, books)] == ["book"]
    assert rules_for(RULES, books) is rules_for(RULES, books)  # built once
    assert len(rules_for(RULES, config("n", rules=("missing",)))) == 0
    # Scope follows the same subset: another mapping's pattern brings nothing in.
    assert out_of_scope("http://authors.example/x", 1, everything, RULES) is None
    assert out_of_scope("http://authors.example/x", 1, books, RULES) is not None
    assert out_of_scope("http://books.example/x", 1, books, RULES) is None


def test_extract_uses_only_the_mappings_its_crawl_names() -> None:
    from test_extractor import AUTHOR, BOOK, Env, exchange, html

    env = Env(CrawlConfig(crawl_id="c", max_depth=2, rules=("author",)), RuleSet((BOOK, AUTHOR)))
    out = env.run(
        exchange("http://shop.example/books/emma", html("Emma")),
        exchange("http://shop.example/authors/austen", html("Jane Austen")),
    )
    assert [(r["mapping"], r["url"]) for r in out.records] == [("author", "http://shop.example/authors/austen")]
