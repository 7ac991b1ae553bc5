"""Dispatch's components one at a time, the chain, and each link canonicalised at most once."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import (
    FakeClock,
    FakeCrawls,
    FakeHeld,
    FakeHosts,
    FakeParking,
    FakeResolved,
    FakeScopeStore,
    FakeUrls,
)

from crawlstack import http, jobs
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import (
    BudgetAndCaps,
    Canonicalise,
    Chain,
    Decision,
    Dedupe,
    DropNotes,
    Enqueue,
    Link,
    Outbox,
    RecordComplete,
    Robots,
    Scope,
)
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import Politeness
from crawlstack.resolution import RECORD_COMPLETE
from crawlstack.robots import RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.urls import fingerprint

UA = "crawlstack/test"


def config(**kw: Any) -> CrawlConfig:
    return CrawlConfig(crawl_id="c", delay=1.0, user_agent=UA, **kw)


def link(url: str, depth: int = 1, configured: CrawlConfig | None = None, **kw: Any) -> Link:
    made = Link(FrontierMessage(url=url, depth=depth, crawl_id="c", **kw), message_id="m1")
    made.config = configured
    return made


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "fetch_robots", lambda *a: pytest.fail("unexpected robots.txt fetch"))


# --- the chain and its link ----------------------------------------------------------------


def test_the_chain_stops_at_the_first_step_that_decides() -> None:
    ran: list[str] = []

    def step(name: str, decides: bool) -> Any:
        def run(link: Link, outbox: Outbox) -> Decision | None:
            ran.append(name)
            return Decision(link.url, name) if decides else None

        return run

    chain = Chain([step("a", False), step("b", True), step("c", True)])
    assert chain(link("http://h.example/"), Outbox()).action == "b"
    assert ran == ["a", "b"]
    with pytest.raises(RuntimeError):
        Chain([step("a", False)])(link("http://h.example/"), Outbox())


def test_an_invalid_link_keeps_its_url_and_has_no_correlation_id() -> None:
    made = link("http://example.com/a%zz")
    assert str(made.invalid) == "bad percent-escape '%zz'"
    assert (made.url, made.fp, made.correlation_id) == ("http://example.com/a%zz", fingerprint(made.url), None)


# --- one component at a time ----------------------------------------------------------------


def test_canonicalise_drops_an_invalid_url_and_notes_it_once() -> None:
    urls = FakeUrls()
    store = FakeScopeStore(urls)
    step = Canonicalise(DropNotes(store))
    assert step(link("http://example.com/"), Outbox()) is None
    decision = step(link("ftp://example.com/x"), Outbox())
    assert decision == Decision(
        "ftp://example.com/x", "dropped", "invalid URL: scheme 'ftp' is not http or https", "invalid"
    )
    step(link("ftp://example.com/x"), Outbox())
    assert store.notes == 1


def test_scope_registers_a_seed_and_hands_its_config_on() -> None:
    crawls = FakeCrawls(config())
    scope = Scope(crawls, RuleSet(), DropNotes(None))
    seed = link("http://example.com:8080/", depth=0)
    assert scope(seed, Outbox()) is None
    assert {"example.com", "example.com:8080"} <= crawls.get("c").seed_hosts
    assert seed.config is not None and "example.com" in seed.config.seed_hosts
    off = link("http://other.example/")
    assert scope(off, Outbox()) == Decision(
        "http://other.example/", "dropped", "off-site: not a seed host, a mapping or an allow pattern", "scope"
    )


def test_scope_refuses_ports_and_traps_but_takes_a_seed_as_written() -> None:
    scope = Scope(FakeCrawls(config(seed_hosts=frozenset({"example.com"}))), RuleSet(), DropNotes(None))
    assert scope(link("http://example.com:9000/"), Outbox()) == Decision(
        "http://example.com:9000/", "dropped", "port 9000 is not allowed", "port"
    )
    trap = scope(link("http://example.com/x/x/x"), Outbox())
    assert trap is not None and trap.kind == "trap"
    assert scope(link("http://example.com/x/x/x", depth=0), Outbox()) is None


def test_scope_holds_a_stopped_crawls_message_before_anything_else() -> None:
    crawls = FakeCrawls(config(state=jobs.STOPPED))
    held = FakeHeld(crawls)
    scope = Scope(crawls, RuleSet(), DropNotes(None), held=held)
    assert scope(link("http://example.com/", depth=0), Outbox()) == Decision(
        "http://example.com/", "held", "crawl stopped"
    )
    assert held.holds == 1 and crawls.get("c").seed_hosts == frozenset()


def test_record_complete_skips_without_a_claim_and_reads_a_batch_once() -> None:
    urls, resolved = FakeUrls(), FakeResolved()
    resolved.merge("c", "r1", ("title",), {"title": "x"}, "http://example.com/")
    step = RecordComplete(urls, resolved)
    mine = link("http://example.com/a", record_id="r1", want=("title",))
    other = link("http://example.com/b", record_id="r2", want=("title",))
    step.prepare([mine.msg, other.msg])
    reads = len(resolved.calls)
    assert step(mine, Outbox()) == Decision("http://example.com/a", "skipped", RECORD_COMPLETE, "record-complete")
    assert step(other, Outbox()) is None
    assert step(link("http://example.com/c"), Outbox()) is None  # no record: no read
    assert len(resolved.calls) == reads
    assert urls.item("c", fingerprint("http://example.com/a"))["state"] == "skipped"
    assert urls.claim("c", fingerprint("http://example.com/a"), "http://example.com/a", 1)  # still free


def test_robots_waits_for_another_dispatchers_fetch_then_judges_after_the_claim() -> None:
    clock = FakeClock()
    hosts, urls = FakeHosts(clock), FakeUrls()
    robots = Robots(hosts, urls, clock=clock)
    assert hosts.lock_robots("http://example.com", clock.now + 30)
    outbox = Outbox()
    waiting = link("http://example.com/private", configured=config())
    assert robots.load(waiting, outbox) == Decision(
        "http://example.com/private", "retry", "robots.txt being fetched by another dispatcher"
    )
    assert outbox.frontier == [(waiting.msg.to_json(), 2)]
    hosts.put_robots(RobotsRecord.from_fetch("http://example.com", 200, b"User-agent: *\nDisallow: /private\n"))
    again = link("http://example.com/private", configured=config())
    assert robots.load(again, Outbox()) is None and again.policy is not None
    assert robots.check(again, Outbox()) == Decision("http://example.com/private", "skipped", "robots", "robots")
    assert urls.item("c", again.fp)["reason"] == "robots: disallowed by robots.txt"


def test_dedupe_lets_one_claim_through_and_a_redelivery_again() -> None:
    dedupe = Dedupe(FakeUrls())
    assert dedupe(link("http://example.com/"), Outbox()) is None
    assert dedupe(link("http://example.com/"), Outbox()) is None  # the same message id
    other = Link(FrontierMessage(url="http://example.com/", crawl_id="c"), message_id="m2")
    assert dedupe(other, Outbox()) == Decision("http://example.com/", "deduped")


def test_budget_and_caps_skip_the_first_url_over_a_limit_then_drop_at_no_write() -> None:
    crawls, urls = FakeCrawls(config(max_pages=1)), FakeUrls()
    limits = BudgetAndCaps(crawls, urls, FakeScopeStore(urls))
    limited = config(max_pages=1)
    assert limits.known_spent(link("http://example.com/a", configured=limited), Outbox()) is None
    assert limits.take(link("http://example.com/a", configured=limited), Outbox()) is None
    over = link("http://example.com/b", configured=limited)
    assert limits.take(over, Outbox()) == Decision(over.url, "skipped", "page budget spent", "budget")
    assert urls.item("c", over.fp)["reason"] == "page budget of 1 spent"
    writes = len(urls.journal)
    later = link("http://example.com/c", configured=limited)
    assert limits.known_spent(later, Outbox()) == Decision(later.url, "dropped", "page budget spent", "budget")
    assert len(urls.journal) == writes


def test_enqueue_admits_to_the_hosts_window_or_parks() -> None:
    clock = FakeClock()
    hosts, parking = FakeHosts(clock), FakeParking()
    hosts.put_robots(RobotsRecord.from_fetch("http://example.com", 404, b""))
    enqueue = Enqueue(Politeness(hosts, parking, clock), FakeCrawls(config()), clock=clock)
    robots = Robots(hosts, FakeUrls(), clock=clock)
    actions = []
    outbox = Outbox()
    for path in ("a", "b", "c"):
        made = link(f"http://example.com/{path}", configured=config())
        robots.load(made, outbox)
        actions.append(enqueue(made, outbox).action)
    assert actions == ["queued", "queued", "parked"]  # a window of 2 at a 1 s delay
    task = FetchTask.from_json(outbox.fetch[0][0])
    assert (task.url, task.fp, task.host) == (
        "http://example.com/a",
        fingerprint("http://example.com/a"),
        "example.com",
    )
