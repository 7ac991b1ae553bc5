"""Crawl jobs on the in-memory stores: several crawls on one host, stop and resume, per-crawl rules."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from crawlsim import SimCrawl
from dispatching import build_dispatcher
from fakes import FakeCrawls, FakeHeld

from crawlstack import jobs
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import Outbox
from crawlstack.messages import FrontierMessage
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.scope import out_of_scope, rules_for
from crawlstack.urls import fingerprint

HOST = "example.com"
DELAY = 1.0


def config(crawl_id: str, **kw: object) -> CrawlConfig:
    return CrawlConfig(crawl_id=crawl_id, delay=DELAY, user_agent="crawlstack/test", **kw)  # type: ignore[arg-type]


def urls(prefix: str, n: int) -> list[str]:
    return [f"http://{HOST}/{prefix}{i}" for i in range(n)]


def gaps(sim: SimCrawl) -> list[float]:
    times = sorted(t for _, t in sim.requests)
    return [b - a for a, b in itertools.pairwise(times)]


def assert_nothing_leaked(sim: SimCrawl) -> None:
    assert sim.parking.count() == 0
    assert "window" not in sim.hosts.slots.get(HOST, {}), sim.hosts.slots[HOST]


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> SimCrawl:
    s = SimCrawl(monkeypatch, config("a"), config("b"))
    s.allow_robots(f"http://{HOST}")
    return s


# --- several crawls ----------------------------------------------------------
def test_two_crawls_fetch_the_same_urls_once_each_and_share_the_hosts_spacing(sim: SimCrawl) -> None:
    same = urls("p", 6)
    sim.seed("a", *same)
    sim.seed("b", *same)
    sim.run()
    # Dedupe is per crawl: each URL once for each crawl, however the windows and parked rows interleave.
    assert Counter(url for url, _ in sim.requests) == dict.fromkeys(same, 2)
    for crawl_id in ("a", "b"):
        assert {sim.urls.state(crawl_id, fingerprint(u)) for u in same} == {"fetched"}
    # Politeness is per host across crawls.
    assert min(gaps(sim)) >= DELAY
    assert_nothing_leaked(sim)


# --- stop and resume -----------------------------------------------------------
def test_a_stopped_crawl_makes_no_request_holds_its_work_and_its_host_neighbour_goes_on(sim: SimCrawl) -> None:
    a, b = urls("a", 8), urls("b", 8)
    sim.seed("a", *a)
    sim.seed("b", *b)
    start = sim.clock.now
    sim.run(until=start + 4.5)  # a few of each fetched, the rest in windows, parked or queued
    fetched_before = {u for u, _ in sim.requests}
    assert fetched_before & set(a) and set(a) - fetched_before

    jobs.stop("a", sim.crawls)
    stopped_at = sim.clock.now
    sim.run()
    assert not [u for u, t in sim.requests if u in a and t >= stopped_at]
    # The other crawl on the same host finished, and nothing was left in a window or parked.
    assert {u for u, _ in sim.requests} >= set(b)
    assert_nothing_leaked(sim)
    left = set(a) - fetched_before
    assert sim.held.count() == len(left)
    # All dispatched before the stop: what was held are fetch tasks, out of their windows and parked rows.
    assert all(key.startswith(jobs.TASK_KEY) for key, _ in sim.held.held("a", 100))
    assert {sim.urls.state("a", fingerprint(u)) for u in left} == {"queued"}

    sent = jobs.resume("a", sim.crawls, sim.held, sim.frontier, sim.fetch, sim.politeness, sim.clock)
    assert sent == len(left)
    sim.run()
    assert sim.held.count() == 0
    assert Counter(u for u, _ in sim.requests) == dict.fromkeys(a + b, 1)
    assert min(gaps(sim)) >= DELAY
    assert_nothing_leaked(sim)


def test_a_stopped_crawls_parked_backlog_spends_none_of_the_hosts_time(sim: SimCrawl) -> None:
    a, b = urls("a", 10), urls("b", 10)
    sim.seed("a", *a)  # a fills the window and parks first, b parks behind it
    sim.seed("b", *b)
    sim.run(until=sim.clock.now + 0.5)
    jobs.stop("a", sim.crawls)
    stopped_at = sim.clock.now
    sim.run()
    b_after = [t for u, t in sim.requests if u in b and t >= stopped_at]
    assert len(b_after) == len(b)
    # Held straight from the parked table: no slot reserved for a's backlog, b runs at the host's pace.
    assert max(b_after) - stopped_at <= (len(b) + 2) * DELAY
    assert sim.held.count() == len(a) - len([u for u, _ in sim.requests if u in a])
    assert_nothing_leaked(sim)


def test_stop_before_dispatch_holds_messages_unclaimed_and_resume_sends_each_once(sim: SimCrawl) -> None:
    jobs.stop("a", sim.crawls)
    sim.seed("a", *urls("a", 5))
    sim.seed("a", urls("a", 5)[0])  # a duplicate message holds onto the same row
    sim.run()
    assert sim.requests == [] and sim.held.count() == 5 and sim.urls.items == {}
    assert jobs.resume("a", sim.crawls, sim.held, sim.frontier, sim.fetch, sim.politeness, sim.clock) == 5
    assert jobs.resume("a", sim.crawls, sim.held, sim.frontier, sim.fetch, sim.politeness, sim.clock) == 0
    sim.run()
    assert sorted(u for u, _ in sim.requests) == urls("a", 5)
    assert_nothing_leaked(sim)


def test_a_stale_cached_stop_costs_a_failed_hold_and_nothing_else(sim: SimCrawl) -> None:
    # This container still thinks "a" is stopped; the table says it runs again.
    stale = FakeCrawls(config("a", state=jobs.STOPPED))
    sim.dispatcher = build_dispatcher(
        stale, sim.urls, sim.hosts, sim.politeness, clock=sim.clock, held=FakeHeld(sim.crawls)
    )
    outbox = Outbox()
    decision = sim.dispatcher.dispatch(FrontierMessage(url=urls("a", 1)[0], crawl_id="a"), outbox, "m1")
    assert decision.action == "queued" and len(outbox.fetch) == 1


def test_stop_and_resume_need_a_known_crawl(sim: SimCrawl) -> None:
    with pytest.raises(jobs.UnknownCrawl):
        jobs.stop("nope", sim.crawls)
    with pytest.raises(jobs.UnknownCrawl):
        jobs.resume("nope", sim.crawls, sim.held, sim.frontier, sim.fetch, sim.politeness)


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
