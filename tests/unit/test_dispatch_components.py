"""Dispatch's components one at a time, the chain, and each link canonicalised at most once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from fakes import (
    FakeClock,
    FakeCrawls,
    FakeHeld,
    FakeHosts,
    FakeResolved,
    FakeScopeStore,
    FakeUrls,
)

from crawlstack import jobs
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import (
    ROBOTS_MISS_SECONDS,
    BudgetAndCaps,
    Canonicalise,
    Chain,
    Decision,
    Dedupe,
    DropNotes,
    Link,
    Outbox,
    RecordComplete,
    Robots,
    RunEnqueue,
    Scope,
)
from crawlstack.fetch import http
from crawlstack.messages import FrontierMessage
from crawlstack.ports import RobotsRecord
from crawlstack.records.resolution import RECORD_COMPLETE
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
    monkeypatch.setattr(http, "fetch_robots", lambda *a: pytest.fail("dispatch fetched robots.txt"))


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


def test_robots_loads_a_cached_policy_before_the_claim_and_judges_after_it() -> None:
    clock = FakeClock()
    hosts, urls = FakeHosts(clock), FakeUrls()
    hosts.put_robots(RobotsRecord.from_fetch("http://example.com", 200, b"User-agent: *\nDisallow: /private\n"))
    robots = Robots(hosts, urls, clock=clock)
    private = link("http://example.com/private", configured=config())
    assert robots.load(private, Outbox()) is None and private.policy is not None
    assert urls.items == {}  # nothing written before the claim
    assert robots.check(private, Outbox()) == Decision("http://example.com/private", "skipped", "robots", "robots")
    assert urls.item("c", private.fp) == {"state": "skipped", "reason": "robots: disallowed by robots.txt"}
    allowed = link("http://example.com/public", configured=config())
    assert robots.load(allowed, Outbox()) is None and robots.check(allowed, Outbox()) is None
    # The container remembers the policy: one read of the table for the origin.
    assert hosts.calls.count(("get_robots", "http://example.com")) == 1


def test_robots_lets_a_link_of_an_uncached_origin_go_on_and_looks_again_after_a_while() -> None:
    clock = FakeClock()
    hosts, urls = FakeHosts(clock), FakeUrls()
    robots = Robots(hosts, urls, clock=clock)
    unknown = link("http://example.com/private", configured=config())
    assert robots.load(unknown, Outbox()) is None and unknown.policy is None
    assert robots.check(unknown, Outbox()) is None and urls.items == {}
    # The host's run caches the file; this container looks again only once its miss is forgotten.
    hosts.put_robots(RobotsRecord.from_fetch("http://example.com", 200, b"User-agent: *\nDisallow: /private\n"))
    soon = link("http://example.com/private", configured=config())
    assert robots.load(soon, Outbox()) is None and soon.policy is None
    clock.advance(ROBOTS_MISS_SECONDS)
    later = link("http://example.com/private", configured=config())
    robots.load(later, Outbox())
    assert later.policy is not None and robots.check(later, Outbox()) is not None
    assert hosts.calls.count(("get_robots", "http://example.com")) == 2


def test_robots_reads_an_expired_policy_again() -> None:
    clock = FakeClock()
    hosts = FakeHosts(clock)
    record = RobotsRecord.from_fetch("http://example.com", 200, b"User-agent: *\nDisallow: /private\n")
    hosts.put_robots(replace(record, expires_at=clock.now + 10.0))
    robots = Robots(hosts, FakeUrls(), clock=clock)
    first = link("http://example.com/private", configured=config())
    robots.load(first, Outbox())
    assert first.policy is not None
    clock.advance(10.0)
    # Its cached copy expired too: no policy until the host's run fetches the file again.
    stale = link("http://example.com/private", configured=config())
    robots.load(stale, Outbox())
    assert stale.policy is None and robots.check(stale, Outbox()) is None
    assert hosts.calls.count(("get_robots", "http://example.com")) == 2


def test_dedupe_lets_one_claim_through_and_a_redelivery_again() -> None:
    dedupe = Dedupe(FakeUrls())
    assert dedupe(link("http://example.com/"), Outbox()) is None
    assert dedupe(link("http://example.com/"), Outbox()) is None  # the same message id
    other = Link(FrontierMessage(url="http://example.com/", crawl_id="c"), message_id="m2")
    assert dedupe(other, Outbox()) == Decision("http://example.com/", "deduped")


def test_dedupe_drops_a_known_url_on_a_read_and_writes_only_to_claim_or_lower_its_depth() -> None:
    urls = FakeUrls()
    dedupe = Dedupe(urls)
    url = "http://example.com/"
    assert dedupe(link(url, depth=3), Outbox()) is None
    writes = len(urls.journal)
    again = Link(FrontierMessage(url=url, depth=3, crawl_id="c"), message_id="m2")
    assert dedupe(again, Outbox()) == Decision(url, "deduped")
    assert len(urls.journal) == writes  # dropped on the read: no refused conditional write
    nearer = Link(FrontierMessage(url=url, depth=1, crawl_id="c"), message_id="m3")
    assert dedupe(nearer, Outbox()) == Decision(url, "deduped")
    assert urls.journal[writes:] == [("lower_depth", "c", fingerprint(url))]
    assert urls.items[("c", fingerprint(url))]["depth"] == 1
    # A URL a complete record passed over unfetched is claimable: the read lets the claim go on.
    skipped = "http://example.com/skipped"
    assert urls.note_skip("c", fingerprint(skipped), skipped, 1, RECORD_COMPLETE)
    assert dedupe(link(skipped), Outbox()) is None
    assert urls.items[("c", fingerprint(skipped))]["state"] == "queued"


def spy_reads_and_claims(urls: FakeUrls, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The fingerprints ``urls`` is read (one at a time) and claimed for, from now on."""
    reads: list[str] = []
    claims: list[str] = []
    real_seen, real_claim = urls.seen, urls.claim
    monkeypatch.setattr(urls, "seen", lambda crawl_id, fp: reads.append(fp) or real_seen(crawl_id, fp))
    monkeypatch.setattr(
        urls, "claim", lambda crawl_id, fp, *a, **k: claims.append(fp) or real_claim(crawl_id, fp, *a, **k)
    )
    return reads, claims


def test_dedupe_reads_a_batch_in_one_go_and_a_url_named_twice_again_after_its_first_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    urls = FakeUrls()
    known, new = "http://example.com/known", "http://example.com/new"
    assert urls.claim("c", fingerprint(known), known, 0, claimer="m0")
    dedupe = Dedupe(urls)
    batch = [
        Link(FrontierMessage(url=new, crawl_id="c"), message_id="m1"),
        Link(FrontierMessage(url=known, crawl_id="c"), message_id="m1"),
        Link(FrontierMessage(url=new, crawl_id="c"), message_id="m2"),
        Link(FrontierMessage(url="http://example.com/%zz", crawl_id="c"), message_id="m1"),
    ]
    dedupe.prepare(batch)
    assert urls.journal[-1] == ("seen_many", "2")  # the invalid URL is not read, a URL named twice once
    reads, claims = spy_reads_and_claims(urls, monkeypatch)
    assert [dedupe(one, Outbox()) for one in batch[:3]] == [
        None,
        Decision(known, "deduped"),
        Decision(new, "deduped"),
    ]
    # Only the second naming is read again, at its turn: it finds the first one's claim, so no refused write.
    assert reads == [fingerprint(new)]
    assert claims == [fingerprint(new)]


def test_dedupe_gives_the_batchs_read_to_whichever_link_of_a_url_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # Turns go round the messages: message 2's only link comes before message 1's third.
    urls = FakeUrls()
    dedupe = Dedupe(urls)
    x = "http://example.com/x"
    first_message = [Link(FrontierMessage(url=f"http://example.com/{p}", crawl_id="c"), "m1") for p in ("a", "b")]
    late, early = Link(FrontierMessage(url=x, crawl_id="c"), "m1"), Link(FrontierMessage(url=x, crawl_id="c"), "m2")
    dedupe.prepare([*first_message, late, early])
    reads, claims = spy_reads_and_claims(urls, monkeypatch)
    assert dedupe(early, Outbox()) is None  # the batch's read: not seen, claimed
    assert dedupe(late, Outbox()) == Decision(x, "deduped")  # read again: the claim is there, none refused
    assert reads == [fingerprint(x)] and claims == [fingerprint(x)]


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


def test_run_enqueue_gathers_each_hosts_tasks_by_depth() -> None:
    clock = FakeClock()
    hosts = FakeHosts(clock)
    hosts.put_robots(RobotsRecord.from_fetch("http://slow.example", 200, b"User-agent: *\nCrawl-delay: 5\n"))
    robots = Robots(hosts, FakeUrls(), clock=clock)
    outbox = Outbox()
    decisions = []
    for url in ("http://example.com/a", "http://example.com/b", "http://slow.example/a"):
        made = link(url, configured=config())
        robots.load(made, outbox)
        decisions.append(RunEnqueue()(made, outbox))
    assert [d.action for d in decisions] == ["queued"] * 3  # no window, nothing parked
    assert {host: {depth: [t.url for t in ts] for depth, ts in depths} for host, depths in outbox.runs} == {
        "example.com": {1: ["http://example.com/a", "http://example.com/b"]},
        "slow.example": {1: ["http://slow.example/a"]},
    }
    [task, *_] = outbox.runs.hosts["example.com"][1]
    assert (task.url, task.fp, task.host, task.not_before) == (
        "http://example.com/a",
        fingerprint("http://example.com/a"),
        "example.com",
        0.0,
    )
