"""Dispatch on the in-memory stores: canonical, in scope, new, robots-allowed, within budget, polite."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest
from dispatching import build_dispatcher
from fakes import FakeClock, FakeCrawls, FakeHosts, FakeParking, FakeScopeStore, FakeUrls

from crawlstack import http
from crawlstack import settings as crawl_settings
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import ROBOTS_WAIT_SECONDS, Decision, Link, NotedDrops, Outbox, dispatch_in_turns
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import Politeness
from crawlstack.robots import RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.urls import canonicalize, fingerprint

SEED = "http://example.com/"
UA = "crawlstack/test (+https://example.org/bot)"


class Env:
    def __init__(self, config: CrawlConfig, rules: RuleSet | None = None, scoped: bool = False) -> None:
        self.clock = FakeClock()
        self.crawls = FakeCrawls(config)
        self.urls = FakeUrls()
        self.hosts = FakeHosts(self.clock)
        self.parking = FakeParking()
        self.politeness = Politeness(self.hosts, self.parking, self.clock)
        self.scope_store = FakeScopeStore(self.urls) if scoped else None
        self.dispatcher = build_dispatcher(
            self.crawls, self.urls, self.hosts, self.politeness, rules, clock=self.clock, scope_records=self.scope_store
        )
        self.robots_fetches: list[str] = []

    def robots(self, origin: str, status: int | None = 404, body: bytes = b"") -> None:
        self.hosts.put_robots(RobotsRecord.from_fetch(origin, status, body))

    def send(self, url: str, depth: int = 0, message_id: str = "", **kw: object) -> tuple[str, str, Outbox]:
        outbox = Outbox()
        msg = FrontierMessage(url=url, depth=depth, crawl_id="c", **kw)  # type: ignore[arg-type]
        decision = self.dispatcher.dispatch(msg, outbox, message_id=message_id)
        return decision.action, decision.reason, outbox


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Env:
    e = Env(CrawlConfig(crawl_id="c", delay=1.0, user_agent=UA, max_depth=2))
    e.robots("http://example.com")

    def no_network(origin: str, user_agent: str, guard: http.AddressGuard) -> http.FetchResult:
        raise AssertionError(f"unexpected robots.txt fetch for {origin}")

    monkeypatch.setattr(http, "fetch_robots", no_network)
    return e


def tasks(outbox: Outbox) -> list[tuple[FetchTask, int]]:
    return [(FetchTask.from_json(body), delay) for body, delay in outbox.fetch]


def test_seed_is_queued_with_its_slot_and_registers_its_host(env: Env) -> None:
    action, _, outbox = env.send("HTTP://Example.com:80/#top", message_id="m1")
    assert action == "queued"
    [(task, delay)] = tasks(outbox)
    assert task.url == SEED and task.fp == fingerprint(SEED) and task.host == "example.com"
    assert (task.depth, task.crawl_id, task.delay, task.window) == (0, "c", 1.0, 2)
    assert task.not_before == env.clock.now and delay == 0
    assert outbox.unparked == {"example.com": [None]}
    assert "example.com" in env.crawls.get("c").seed_hosts
    assert env.urls.item("c", task.fp) == {"url": SEED, "depth": 0, "state": "queued", "claimed_by": "m1"}


def test_second_url_of_a_host_waits_its_delay_in_sqs(env: Env) -> None:
    env.send(SEED)
    _, _, outbox = env.send("http://example.com/a", depth=1)
    [(task, delay)] = tasks(outbox)
    assert task.not_before == env.clock.now + 1.0 and delay == 1


def test_invalid_url_is_dropped_with_its_reason(env: Env) -> None:
    action, reason, outbox = env.send("ftp://example.com/x")
    assert (action, outbox.fetch) == ("dropped", [])
    assert reason == "invalid URL: scheme 'ftp' is not http or https"
    assert env.urls.items == {}


def test_off_site_and_too_deep_are_dropped_before_dedupe(env: Env) -> None:
    env.send(SEED)
    assert env.send("http://other.example/", depth=1)[:2] == (
        "dropped",
        "off-site: not a seed host, a mapping or an allow pattern",
    )
    assert env.send("http://example.com/deep", depth=3)[:2] == ("dropped", "deeper than max depth 2")
    assert len(env.urls.items) == 1


def test_a_mapping_pattern_or_a_rule_choice_for_a_record_brings_a_link_in(env: Env) -> None:
    title = [{"name": "title", "processors": [{"type": "xpath", "parameters": {"expression": "//h1"}}]}]
    mapping = {"name": "m", "url_patterns": [{"type": "regex", "pattern": "/b/"}], "fields": title}
    env.dispatcher.scope.rules = RuleSet((compile_mapping("m.json", mapping),))
    env.robots("http://books.example")
    env.robots("http://chosen.example")
    assert env.send("http://books.example/b/1", depth=1)[0] == "queued"
    # A url_parser's choice alone takes no link to a stranger's host...
    assert env.send("http://chosen.example/x", depth=1, via="m")[:2] == (
        "dropped",
        "off-site: chosen by a url_parser, but no mapping, allow pattern or record wants it",
    )
    # ...but a record still wanting a field a mapping gives does.
    assert env.send("http://chosen.example/y", depth=1, via="m", record_id="r1", want=("title",))[0] == "queued"


def test_duplicates_are_deduped_but_a_redelivery_is_sent_again(env: Env) -> None:
    _, _, first = env.send(SEED, message_id="m1")
    action, _, outbox = env.send("http://EXAMPLE.com/", message_id="m2")
    assert (action, outbox.fetch) == ("deduped", [])
    # The same message again (the first delivery may have died before sending).
    action, _, again = env.send(SEED, message_id="m1")
    assert action == "queued"
    assert [t.fp for t, _ in tasks(again)] == [t.fp for t, _ in tasks(first)]
    assert env.hosts.read_slot("example.com").window == {f"c#{fingerprint(SEED)}"}


def test_a_url_found_again_nearer_a_seed_before_its_fetch_takes_the_smaller_depth(env: Env) -> None:
    """Depth is the shortest path from a seed, not the order links were found in."""
    url = "http://example.com/deep"
    env.send(SEED)  # registers the seed host
    assert env.send(url, depth=2, message_id="m1")[0] == "queued"
    assert env.send(url, depth=1, message_id="m2")[0] == "deduped"
    assert env.urls.items[("c", fingerprint(url))]["depth"] == 1
    # A longer path changes nothing, and neither does a shorter one once the page is fetched.
    env.send(url, depth=2, message_id="m3")
    env.urls.set_outcome("c", fingerprint(url), "fetched")
    env.send(url, depth=0, message_id="m4")
    assert env.urls.items[("c", fingerprint(url))]["depth"] == 1
    assert [e for e in env.urls.journal if e[0] == "lower_depth"] == [("lower_depth", "c", fingerprint(url))]


def test_robots_disallow_is_skipped_with_an_outcome(env: Env) -> None:
    env.robots("http://example.com", 200, b"User-agent: crawlstack\nDisallow: /private\n")
    env.send(SEED)
    action, reason, outbox = env.send("http://example.com/private/x", depth=1)
    assert (action, reason, outbox.fetch) == ("skipped", "robots", [])
    item = env.urls.item("c", fingerprint("http://example.com/private/x"))
    assert item["state"] == "skipped" and item["reason"] == "robots: disallowed by robots.txt"


def test_robots_5xx_skips_the_host(env: Env) -> None:
    env.robots("http://example.com", 503)
    action, _, _ = env.send(SEED)
    assert action == "skipped"
    assert env.urls.item("c", fingerprint(SEED))["reason"] == "robots: robots.txt 503, host disallowed"


def test_robots_crawl_delay_longer_than_the_crawl_delay_wins(env: Env) -> None:
    env.robots("http://example.com", 200, b"User-agent: *\nCrawl-delay: 4\n")
    env.send(SEED)
    _, _, outbox = env.send("http://example.com/a", depth=1)
    [(task, delay)] = tasks(outbox)
    assert task.delay == 4.0 and delay == 4


def test_robots_is_fetched_once_cached_and_pushes_the_host_back(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, list[str]]] = []

    def fetch_robots(origin: str, user_agent: str, guard: http.AddressGuard) -> http.FetchResult:
        calls.append((origin, user_agent, [str(n) for n in guard.allowed]))
        return http.FetchResult(
            url=origin + "/robots.txt",
            status=200,
            body=b"User-agent: *\nDisallow: /no\nCrawl-delay: 3\n",
            finished_at=env.clock.now + 0.5,
        )

    monkeypatch.setattr(http, "fetch_robots", fetch_robots)
    env.crawls.put(CrawlConfig(crawl_id="c", delay=1.0, user_agent=UA, allow_private=("10.0.0.0/8",)))
    action, _, outbox = env.send("http://new.example/")
    assert action == "queued"
    assert calls == [("http://new.example", UA, ["10.0.0.0/8"])]
    # The robots.txt request counts against the host's delay.
    [(task, delay)] = tasks(outbox)
    assert task.not_before == env.clock.now + 0.5 + 3.0 and delay == 3
    assert env.send("http://new.example/no", depth=1)[:2] == ("skipped", "robots")
    assert env.hosts.get_robots("http://new.example") is not None
    # Another dispatcher (fresh container) reads it from the table, not the web.
    other = build_dispatcher(env.crawls, env.urls, env.hosts, env.politeness, clock=env.clock)
    other.dispatch(FrontierMessage(url="http://new.example/b", depth=1, crawl_id="c"), Outbox())
    assert len(calls) == 1


def test_unreachable_robots_frees_the_host_without_a_delay(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        http, "fetch_robots", lambda o, u, g: http.FetchResult(url=o, error="connection failed", finished_at=1.0)
    )
    action, _, _ = env.send("http://down.example/")
    assert action == "skipped"
    assert (
        "robots.txt unreachable: connection failed" in env.urls.item("c", fingerprint("http://down.example/"))["reason"]
    )
    slot = env.hosts.read_slot("down.example")
    assert slot.free_at == 1.0 and not slot.busy  # no request reached it: no delay added


@pytest.mark.parametrize(("retry_after", "ttl"), [("7200", 7200.0), ("²", crawl_settings.ROBOTS_ERROR_TTL_SECONDS)])
def test_robots_429_skips_the_host_until_its_retry_after(
    env: Env, monkeypatch: pytest.MonkeyPatch, retry_after: str, ttl: float
) -> None:
    monkeypatch.setattr(
        http,
        "fetch_robots",
        lambda o, u, g: http.FetchResult(
            url=o, status=429, headers=[("Retry-After", retry_after)], finished_at=env.clock.now
        ),
    )
    action, _, outbox = env.send("http://busy.example/")
    assert (action, outbox.fetch) == ("skipped", [])
    assert env.urls.item("c", fingerprint("http://busy.example/"))["reason"] == "robots.txt unavailable (429)"
    record = env.hosts.get_robots("http://busy.example")
    assert record is not None and record.expires_at - record.fetched_at == pytest.approx(ttl)


def test_robots_waits_for_a_host_busy_with_another_crawls_request(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "fetch_robots", lambda o, u, g: pytest.fail("fetched robots.txt of a busy host"))
    assert env.hosts.claim("busy.example", env.clock.now, env.clock.now + 60) is None  # a fetch in flight
    action, _, outbox = env.send("http://busy.example/")
    assert action == "retry" and len(outbox.frontier) == 1
    # The robots.txt lock is given back, so the retry can take it.
    assert env.hosts.lock_robots("http://busy.example", env.clock.now + 30)


def test_robots_being_fetched_elsewhere_sends_the_message_back(env: Env) -> None:
    assert env.hosts.lock_robots("http://busy.example", env.clock.now + 30)
    msg = FrontierMessage(url="http://busy.example/", depth=0, crawl_id="c")
    outbox = Outbox()
    decision = env.dispatcher.dispatch(msg, outbox, message_id="m9")
    assert decision.action == "retry"
    assert outbox.frontier == [(msg.to_json(), ROBOTS_WAIT_SECONDS)]
    assert outbox.fetch == []
    # The message put back is a new SQS message with a new id; it must find
    # its URL unclaimed, not deduped away.
    assert ("c", fingerprint("http://busy.example/")) not in env.urls.items
    env.robots("http://busy.example")
    assert env.dispatcher.dispatch(msg, Outbox(), message_id="m10").action == "queued"


def test_page_budget(env: Env) -> None:
    env.crawls.put(
        CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_pages=2, seed_hosts=frozenset({"example.com"}))
    )
    actions = [env.send(f"http://example.com/{i}", depth=1)[:2] for i in range(4)]
    assert actions == [
        ("queued", ""),
        ("queued", ""),
        ("skipped", "page budget spent"),
        ("dropped", "page budget spent"),
    ]
    assert env.urls.item("c", fingerprint("http://example.com/2"))["reason"] == "page budget of 2 spent"


def test_a_large_budget_is_taken_in_shrinking_chunks_and_never_exceeded(env: Env) -> None:
    budget = 2000
    env.crawls.put(
        CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_pages=budget, seed_hosts=frozenset({"example.com"}))
    )
    takes: list[int] = []
    real = env.crawls.take_pages

    def counted(crawl_id: str, max_pages: int, pages: int) -> int | None:
        takes.append(pages)
        return real(crawl_id, max_pages, pages)

    env.crawls.take_pages = counted  # type: ignore[method-assign]
    actions = [env.send(f"http://example.com/{i}", depth=1)[0] for i in range(budget + 3)]
    assert actions.count("queued") + actions.count("parked") == budget
    assert env.crawls.pages["c"] == budget
    # One page first (to learn what is left), then up to BUDGET_CHUNK at a
    # time, shrinking to single pages as the budget runs out.
    assert takes[0] == 1 and max(takes) == crawl_settings.BUDGET_CHUNK and takes[-1] == 1
    assert len(takes) < budget / 4
    assert all(b <= a for a, b in itertools.pairwise(takes[1:]))


def test_full_window_parks(env: Env) -> None:
    env.send(SEED)
    env.send("http://example.com/a", depth=1)
    action, _, outbox = env.send("http://example.com/b", depth=1)
    assert (action, outbox.fetch) == ("parked", [])
    [(order, body)] = env.parking.peek("example.com", 10)
    assert order.startswith("0001#")
    assert json.loads(body)["url"] == "http://example.com/b"


def test_message_fields_are_carried_into_the_task(env: Env) -> None:
    env.send(SEED)
    _, _, outbox = env.send("http://example.com/a", depth=1, referrer=SEED, record_id="r1", want=("title",), hops=2)
    [(task, _)] = tasks(outbox)
    assert (task.referrer, task.record_id, task.want, task.hops) == (SEED, "r1", ("title",), 2)


def test_a_redelivered_message_does_not_undo_an_outcome(env: Env) -> None:
    env.crawls.put(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, seed_hosts=frozenset({"example.com"})))
    assert env.send("http://example.com/a", depth=1, message_id="m1")[0] == "queued"
    fp = fingerprint("http://example.com/a")
    env.urls.set_outcome("c", fp, "fetched", status=200)
    # SQS delivers the same message again (same id): the page is not queued a second time.
    action, _, outbox = env.send("http://example.com/a", depth=1, message_id="m1")
    assert action == "deduped" and outbox.fetch == []
    assert env.urls.item("c", fp)["state"] == "fetched"


def test_robots_refresh_sleeps_out_a_short_gap_after_the_last_request(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        http,
        "fetch_robots",
        lambda o, u, g: http.FetchResult(url=o, status=404, finished_at=env.clock.now),
    )
    env.dispatcher.robots.sleep = env.clock.sleep
    env.hosts.push_back("gap.example", env.clock.now + 0.4)  # the last request's delay ends in 0.4 s
    action, _, _ = env.send("http://gap.example/")
    assert action == "queued"
    assert env.clock.sleeps == [pytest.approx(0.4)]
    assert env.hosts.get_robots("http://gap.example") is not None


# --- spider traps, ports, and notes of dropped URLs -------------------------------------


def scoped_env(config: CrawlConfig) -> tuple[Env, FakeScopeStore]:
    env = Env(config, scoped=True)
    assert env.scope_store is not None
    return env, env.scope_store


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_per_host_cap_counts_each_new_url_once_and_then_drops_without_writes() -> None:
    env, store = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_depth=5, max_pages_per_host=2))
    env.robots("http://example.com")
    env.robots("http://other.example")
    assert env.send(SEED)[0] == "queued"
    assert env.send(SEED)[0] == "deduped"  # a duplicate takes nothing from the cap
    assert env.send("http://example.com/a", depth=1)[0] == "queued"
    assert env.send("http://example.com/b", depth=1)[:2] == ("skipped", "host page cap of 2 reached")
    assert env.urls.item("c", fingerprint("http://example.com/b"))["reason"] == "host page cap of 2 reached"
    # Known full now: dropped before any claim, at no write (every link of every page would cost one).
    writes = len(env.urls.journal)
    assert env.send("http://example.com/c", depth=1)[:2] == ("dropped", "host page cap of 2 reached")
    assert len(env.urls.journal) == writes and store.notes == 0
    assert store.host_pages == {("c", "example.com"): 2}
    # The cap is per host name: another host has its own.
    assert env.send("http://other.example/", depth=0)[0] == "queued"


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_the_host_cap_is_taken_a_chunk_at_a_time_and_never_exceeded() -> None:
    cap = crawl_settings.HOST_CAP_CHUNK * 2 + 3
    env, store = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_depth=5, max_pages_per_host=cap))
    env.robots("http://example.com")
    actions = [env.send(SEED)[0]] + [env.send(f"http://example.com/{i}", depth=1)[0] for i in range(cap + 5)]
    assert actions.count("queued") + actions.count("parked") == cap
    assert store.host_pages == {("c", "example.com"): cap}
    # Two whole chunks, a chunk refused near the cap, then single pages: three, and one refused.
    assert store.host_page_calls == 2 + 1 + 3 + 1


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_no_per_host_cap_when_the_crawl_has_none() -> None:
    env, store = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_pages_per_host=None))
    env.robots("http://example.com")
    assert [env.send(f"http://example.com/{i}")[0] for i in range(5)] == ["queued"] * 5
    assert store.host_pages == {}


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_a_trap_host_at_its_cap_spends_none_of_the_page_budget() -> None:
    env, _ = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_pages=10, max_pages_per_host=1))
    env.robots("http://example.com")
    env.send(SEED)
    env.send("http://example.com/a", depth=1)
    assert env.crawls.pages == {"c": 1}


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_an_endless_calendar_is_bounded_by_the_host_cap_and_by_depth() -> None:
    def crawl(max_depth: int, cap: int) -> list[str]:
        """Follow /calendar?month=... 'next month' links as extract would, until nothing new is admitted."""
        env, _ = scoped_env(
            CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_depth=max_depth, max_pages_per_host=cap)
        )
        env.robots("http://example.com")
        admitted: list[str] = []
        frontier = [("http://example.com/calendar?month=2031-07", 0)]
        while frontier:
            url, depth = frontier.pop()
            action, _, _ = env.send(url, depth=depth)
            if action not in ("queued", "parked"):
                continue
            admitted.append(url)
            year, month = map(int, url.rsplit("=", 1)[1].split("-"))
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            if depth + 1 <= max_depth:  # extract sends no links beyond max depth
                frontier.append((f"http://example.com/calendar?month={year}-{month:02d}", depth + 1))
        return admitted

    capped = crawl(max_depth=10_000, cap=25)
    assert len(capped) == 25 and capped[-1].endswith("month=2033-07")
    assert len(crawl(max_depth=4, cap=10_000)) == 5


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_a_port_other_than_80_and_443_is_refused_unless_seeded_or_allowed() -> None:
    env, _ = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA))
    for origin in ("http://127.0.0.1:8080", "http://127.0.0.1:8081", "http://127.0.0.1:9000"):
        env.robots(origin)
    # A seed on 8080 registers its host and its port.
    assert env.send("http://127.0.0.1:8080/")[0] == "queued"
    assert {"127.0.0.1", "127.0.0.1:8080"} <= env.crawls.get("c").seed_hosts
    assert env.send("http://127.0.0.1:8080/a", depth=1)[0] == "queued"
    # The same host on an unseeded port: refused, and noted for the crawl log.
    assert env.send("http://127.0.0.1:8081/a", depth=1)[:2] == ("dropped", "port 8081 is not allowed")
    decision = env.dispatcher.dispatch(FrontierMessage(url="http://127.0.0.1:8081/b", depth=1, crawl_id="c"), Outbox())
    assert decision.kind == "port"
    item = env.urls.item("c", fingerprint("http://127.0.0.1:8081/a"))
    assert (item["state"], item["reason"]) == ("dropped", "port 8081 is not allowed")
    # A seed's redirect to another port does not allow it.
    assert env.send("http://127.0.0.1:9000/", hops=1)[:2] == ("dropped", "port 9000 is not allowed")
    # allow_ports does.
    env.crawls.put(replace(env.crawls.get("c"), allow_ports=(8081,)))
    assert env.send("http://127.0.0.1:8081/a", depth=1)[0] == "queued"  # the claim takes the note over
    assert env.urls.item("c", fingerprint("http://127.0.0.1:8081/a"))["state"] == "queued"


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_trap_shaped_links_are_dropped_but_a_seed_is_taken_as_written() -> None:
    env, _ = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_depth=5))
    env.robots("http://example.com")
    env.send(SEED)
    action, reason, _ = env.send("http://example.com/a/b/a/b/a/b/", depth=1)
    assert (action, reason) == ("dropped", "trap: 'a/b' repeats 3 times in a row in the path")
    decision = env.dispatcher.dispatch(FrontierMessage(url="http://example.com/x/x/x", depth=2, crawl_id="c"), Outbox())
    assert (decision.action, decision.kind) == ("dropped", "trap")
    assert env.send("http://example.com/s/s/s/", depth=0)[0] == "queued"


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_each_drop_reason_is_noted_once_per_container() -> None:
    env, store = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_depth=1))
    env.robots("http://example.com")
    env.send(SEED)
    drops = {
        "http://example.com/a%zz": "invalid URL: bad percent-escape '%zz'",
        "http://[::1/": "invalid URL: broken IPv6 literal",
        "http://example.com:99999/": "invalid URL: port 99999 out of range",
        "http://other.example/": "off-site: not a seed host, a mapping or an allow pattern",
        "http://example.com/deep": "deeper than max depth 1",
        "http://example.com:8080/": "port 8080 is not allowed",
        "http://example.com/x/x/x": "trap: 'x' repeats 3 times in a row in the path",
    }
    for url, reason in drops.items():
        depth = 2 if url.endswith("/deep") else 1
        assert env.send(url, depth=depth)[:2] == ("dropped", reason)
        assert env.send(url, depth=depth)[:2] == ("dropped", reason)  # the same link from another page
    noted = {item["url"]: item["reason"] for item in env.urls.items.values() if item["state"] == "dropped"}
    assert noted == {
        (url if "%zz" in url or "[" in url or "99999" in url else canonicalize(url)): reason
        for url, reason in drops.items()
    }
    assert store.notes == len(drops)  # one write each, not one per copy


@pytest.mark.usefixtures("env")  # no robots.txt fetch
def test_an_over_long_invalid_url_is_noted_cut_to_the_url_length_cap() -> None:
    env, _ = scoped_env(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA))
    long = "http://example.com/" + "a" * 100_000
    action, reason, _ = env.send(long)
    assert (action, reason) == ("dropped", f"invalid URL: longer than {crawl_settings.MAX_URL_LENGTH} characters")
    [item] = env.urls.items.values()
    assert len(item["url"]) == crawl_settings.MAX_URL_LENGTH + 1


def test_the_memory_of_noted_drops_is_bounded_and_least_recently_used_goes_first() -> None:
    noted = NotedDrops(size=2)
    assert noted.add("c", "a") and noted.add("c", "b")
    assert not noted.add("c", "a")  # known, and now the most recent
    assert noted.add("c", "z")  # "b" goes
    assert noted.add("c", "b") and not noted.add("c", "z")


class RecordingDispatcher:
    """Admits every URL as a fetch task, fails the URLs it is told to, and records the order."""

    def __init__(self, failing: set[str]) -> None:
        self.order: list[str] = []
        self.failing = failing

    def dispatch(self, msg: FrontierMessage, outbox: Outbox, message_id: str = "") -> Decision:
        self.order.append(msg.url)
        if msg.url in self.failing:
            raise RuntimeError(f"{msg.url} failed")
        outbox.fetch.append((msg.url, 0))
        return Decision(msg.url, "queued")


def test_a_batch_is_dispatched_in_turns_and_its_first_turns_are_sent_at_once() -> None:
    bundles = {
        f"m{i}": [FrontierMessage(url=f"http://h{i}.example/{j}", depth=1) for j in range(n)]
        for i, n in enumerate([3, 1, 12])
    }
    bundles["m1"] = [FrontierMessage(url="http://h1.example/bad", depth=1)]
    stub = RecordingDispatcher({"http://h1.example/bad"})
    outbox, sends = Outbox(), []

    def send(box: Outbox) -> None:
        sends.append([url for url, _ in box.fetch])

    failed = dispatch_in_turns(
        stub,  # type: ignore[arg-type]
        [(key, key, links) for key, links in bundles.items()],
        outbox,
        send,
        clock=lambda: 0.0,
    )
    # One link of every message per turn, first links first.
    assert stub.order[:5] == [
        "http://h0.example/0",
        "http://h1.example/bad",
        "http://h2.example/0",
        "http://h0.example/1",
        "http://h2.example/1",
    ]
    assert list(failed) == ["m1"] and str(failed["m1"]) == "http://h1.example/bad failed"
    # The first two turns go out at once, then only full batches (the clock
    # stands still: no turn took long); the rest stays for the batch's own send.
    assert sends[0] == ["http://h0.example/0", "http://h2.example/0"]
    assert sends[1] == ["http://h0.example/1", "http://h2.example/1"]
    assert all(len(s) >= crawl_settings.SQS_BATCH_SIZE for s in sends[2:])
    sent = [url for s in sends for url in s] + [url for url, _ in outbox.fetch]
    assert sorted(sent) == sorted(m.url for key, links in bundles.items() if key != "m1" for m in links)


def test_admitted_tasks_wait_at_most_a_moment_for_a_full_send() -> None:
    links = [FrontierMessage(url=f"http://h.example/{j}", depth=1) for j in range(6)]
    stub, sends = RecordingDispatcher(set()), []
    ticks = iter(range(100))

    def clock() -> float:
        return next(ticks) * 0.15  # each turn takes 0.15 s

    dispatch_in_turns(
        stub,  # type: ignore[arg-type]
        [("m", "m", links)],
        Outbox(),
        lambda box: sends.append([url for url, _ in box.fetch]),
        clock=clock,
    )
    # Turns 1 and 2 at once; then every second turn (0.3 s >= EARLY_SEND_SECONDS).
    assert [len(s) for s in sends] == [1, 1, 2, 2]


def test_each_link_is_announced_before_it_is_dispatched() -> None:
    links = [FrontierMessage(url=f"http://h.example/{j}", depth=1) for j in range(3)]
    stub, seen = RecordingDispatcher({"http://h.example/1"}), []

    def before(msg: Link) -> None:
        seen.append(("before", msg.url, len(stub.order)))

    failed = dispatch_in_turns(
        stub,  # type: ignore[arg-type]
        [("m", "m", links)],
        Outbox(),
        lambda box: None,
        on_decision=lambda msg, decision: seen.append(("after", msg.url, len(stub.order))),
        before=before,
    )
    # Log keys are bound before each dispatch (its own lines carry its URL); a failed link has no decision.
    assert seen == [
        ("before", "http://h.example/0", 0),
        ("after", "http://h.example/0", 1),
        ("before", "http://h.example/1", 1),
    ]
    assert list(failed) == ["m"]
