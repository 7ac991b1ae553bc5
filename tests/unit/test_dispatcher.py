"""Dispatch on the in-memory stores: canonical, in scope, new, robots-allowed, within budget, into its host's run."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from dispatching import build_dispatcher
from fakes import FakeBacklog, FakeClock, FakeCrawls, FakeHosts, FakeRuns, FakeScopeStore, FakeUrls

from crawlstack import settings as crawl_settings
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import (
    ROBOTS_MISS_SECONDS,
    Decision,
    Link,
    NotedDrops,
    Outbox,
    dispatch_in_turns,
    flush_runs,
)
from crawlstack.fetch import http
from crawlstack.messages import FetchTask, FrontierMessage, RunMessage
from crawlstack.ports import RobotsRecord
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
        self.scope_store = FakeScopeStore(self.urls) if scoped else None
        self.dispatcher = build_dispatcher(
            self.crawls, self.urls, self.hosts, rules, clock=self.clock, scope_records=self.scope_store
        )

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
        raise AssertionError(f"dispatch fetched robots.txt of {origin}: the host's run does that")

    monkeypatch.setattr(http, "fetch_robots", no_network)
    return e


def tasks(outbox: Outbox) -> list[FetchTask]:
    """The fetch tasks the outbox gathered for host runs, host by host, shallowest first."""
    return [task for _, depths in outbox.runs for _, queued in depths for task in queued]


def test_seed_is_queued_for_its_hosts_run_and_registers_its_host(env: Env) -> None:
    action, _, outbox = env.send("HTTP://Example.com:80/#top", message_id="m1")
    assert action == "queued"
    [task] = tasks(outbox)
    assert task.url == SEED and task.fp == fingerprint(SEED) and task.host == "example.com"
    assert (task.depth, task.crawl_id) == (0, "c")
    assert task.not_before == 0.0  # no slot: the host's run spaces its requests
    assert outbox.frontier == []
    assert "example.com" in env.crawls.get("c").seed_hosts
    item = env.urls.item("c", task.fp)
    assert item.pop("seen_at") > 0
    assert item == {"url": SEED, "depth": 0, "state": "queued", "claimed_by": "m1"}


def test_a_hosts_links_gather_by_depth_and_each_depth_goes_to_its_backlog_in_one_write(env: Env) -> None:
    a, b, c = "http://example.com/a", "http://example.com/b", "http://example.com/c"
    outbox = Outbox()
    for url, depth in ((SEED, 0), (a, 1), (c, 2), (b, 1)):
        msg = FrontierMessage(url=url, depth=depth, crawl_id="c")
        assert env.dispatcher.dispatch(msg, outbox, message_id=f"m-{url}").action == "queued"
    by_depth = {depth: [t.url for t in queued] for depth, queued in outbox.runs.hosts["example.com"].items()}
    assert by_depth == {0: [SEED], 1: [a, b], 2: [c]}
    backlog, runs, sent = FakeBacklog(), FakeRuns(), list[list[RunMessage]]()
    messages = flush_runs(outbox, backlog, runs, sent.append, clock=env.clock, new_run_id=lambda: "run-1")
    assert sent == [messages] == [[RunMessage("example.com", "run-1")]]
    assert backlog.calls == [
        ("add", "example.com", "0", "1"),
        ("add", "example.com", "1", "2"),
        ("add", "example.com", "2", "1"),
    ]
    # One look at the run and one run per host, however many links.
    assert runs.calls == [("get", "example.com"), ("schedule", "example.com", "run-1")]
    assert [[t.url for t in bundle.tasks] for bundle in backlog.peek("example.com", 10)] == [[SEED], [a, b], [c]]


def test_invalid_url_is_dropped_with_its_reason(env: Env) -> None:
    action, reason, outbox = env.send("ftp://example.com/x")
    assert (action, tasks(outbox)) == ("dropped", [])
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


def test_duplicates_are_deduped_but_a_redelivery_is_queued_again(env: Env) -> None:
    _, _, first = env.send(SEED, message_id="m1")
    action, _, outbox = env.send("http://EXAMPLE.com/", message_id="m2")
    assert (action, tasks(outbox)) == ("deduped", [])
    # The same message again (the first delivery may have died before its batch was sent).
    action, _, again = env.send(SEED, message_id="m1")
    assert action == "queued"
    assert tasks(again) == tasks(first) and len(tasks(first)) == 1


def test_a_url_a_message_names_twice_is_gathered_once(env: Env) -> None:
    outbox = Outbox()
    msg = FrontierMessage(url=SEED, depth=0, crawl_id="c")
    # Both pass the claim under the message's own id; the batch's backlog gets the URL once.
    assert [env.dispatcher.dispatch(msg, outbox, message_id="m1").action for _ in range(2)] == ["queued"] * 2
    assert [t.url for t in tasks(outbox)] == [SEED] and len(outbox.runs) == 1


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


# --- robots.txt: a cached policy's verdict; the host's run fetches the file ---------------------


def test_a_cached_disallow_is_skipped_with_an_outcome_after_the_claim(env: Env) -> None:
    env.robots("http://example.com", 200, b"User-agent: crawlstack\nDisallow: /private\n")
    env.send(SEED)
    action, reason, outbox = env.send("http://example.com/private/x", depth=1, message_id="m1")
    assert (action, reason, tasks(outbox)) == ("skipped", "robots", [])
    item = env.urls.item("c", fingerprint("http://example.com/private/x"))
    assert item["state"] == "skipped" and item["reason"] == "robots: disallowed by robots.txt"
    assert item["claimed_by"] == "m1"  # the claimed URL's outcome, not a note


@pytest.mark.parametrize(
    ("status", "error", "reason"),
    [
        (503, "", "robots: robots.txt 503, host disallowed"),
        (429, "", "robots.txt unavailable (429)"),
        (None, "connection failed", "robots: robots.txt unreachable: connection failed, host disallowed"),
    ],
)
def test_a_cached_robots_txt_that_could_not_be_read_skips_the_host(
    env: Env, status: int | None, error: str, reason: str
) -> None:
    env.hosts.put_robots(RobotsRecord.from_fetch("http://example.com", status, b"", error=error))
    action, _, outbox = env.send(SEED)
    assert (action, tasks(outbox)) == ("skipped", [])
    assert env.urls.item("c", fingerprint(SEED))["reason"] == reason


def test_a_link_of_an_origin_whose_robots_txt_is_not_cached_is_queued(env: Env) -> None:
    action, _, outbox = env.send("http://new.example/")
    assert action == "queued"  # no robots.txt fetch: no_network would have raised
    [task] = tasks(outbox)
    assert task.host == "new.example"
    assert env.urls.state("c", fingerprint("http://new.example/")) == "queued"
    # The miss is remembered a moment: the origin's other links cost no read.
    assert env.send("http://new.example/a", depth=1)[0] == "queued"
    assert env.hosts.calls.count(("get_robots", "http://new.example")) == 1


def test_a_robots_txt_the_run_cached_is_used_once_the_miss_is_forgotten(env: Env) -> None:
    assert env.send("http://new.example/")[0] == "queued"
    # The host's run fetches robots.txt and caches it in the hosts table.
    env.robots("http://new.example", 200, b"User-agent: *\nDisallow: /no\nCrawl-delay: 3\n")
    # Within the miss's memory the link still goes on; the run checks it before its request.
    assert env.send("http://new.example/no/1", depth=1)[0] == "queued"
    env.clock.advance(ROBOTS_MISS_SECONDS)
    assert env.send("http://new.example/no/2", depth=1)[:2] == ("skipped", "robots")
    _, _, outbox = env.send("http://new.example/b", depth=1)
    [task] = tasks(outbox)
    assert task.url == "http://new.example/b"
    assert env.hosts.calls.count(("get_robots", "http://new.example")) == 2
    # Another dispatcher (a fresh container) reads it from the table at once.
    other = build_dispatcher(env.crawls, env.urls, env.hosts, clock=env.clock)
    decision = other.dispatch(FrontierMessage(url="http://new.example/no/3", depth=1, crawl_id="c"), Outbox())
    assert (decision.action, decision.kind) == ("skipped", "robots")


# --- the page budget and the host cap ----------------------------------------------------------


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
    assert actions.count("queued") == budget
    assert env.crawls.pages["c"] == budget
    # One page first (to learn what is left), then up to BUDGET_CHUNK at a
    # time, shrinking to single pages as the budget runs out.
    assert takes[0] == 1 and max(takes) == crawl_settings.BUDGET_CHUNK and takes[-1] == 1
    assert len(takes) < budget / 4
    assert all(b <= a for a, b in itertools.pairwise(takes[1:]))


def test_message_fields_are_carried_into_the_task(env: Env) -> None:
    env.send(SEED)
    _, _, outbox = env.send("http://example.com/a", depth=1, referrer=SEED, record_id="r1", want=("title",), hops=2)
    [task] = tasks(outbox)
    assert (task.referrer, task.record_id, task.want, task.hops) == (SEED, "r1", ("title",), 2)


def test_a_redelivered_message_does_not_undo_an_outcome(env: Env) -> None:
    env.crawls.put(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, seed_hosts=frozenset({"example.com"})))
    assert env.send("http://example.com/a", depth=1, message_id="m1")[0] == "queued"
    fp = fingerprint("http://example.com/a")
    env.urls.set_outcome("c", fp, "fetched", status=200)
    # SQS delivers the same message again (same id): the page is not queued a second time.
    action, _, outbox = env.send("http://example.com/a", depth=1, message_id="m1")
    assert action == "deduped" and tasks(outbox) == []
    assert env.urls.item("c", fp)["state"] == "fetched"


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
    assert actions.count("queued") == cap
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
    assert env.send("http://example.com/a", depth=1)[:2] == ("skipped", "host page cap of 1 reached")
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
            if action != "queued":
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


# --- a batch in turns ------------------------------------------------------------------------


class RecordingDispatcher:
    """Admits every URL as a fetch task, fails the URLs it is told to, and records the order."""

    def __init__(self, failing: set[str]) -> None:
        self.order: list[str] = []
        self.failing = failing

    def dispatch(self, msg: FrontierMessage | Link, outbox: Outbox, message_id: str = "") -> Decision:
        link = Link.of(msg, message_id)
        self.order.append(link.url)
        if link.url in self.failing:
            raise RuntimeError(f"{link.url} failed")
        outbox.runs.add(
            FetchTask(
                url=link.url,
                fp=link.fp,
                host=link.host,
                depth=link.msg.depth,
                crawl_id=link.msg.crawl_id,
                not_before=0.0,
            )
        )
        return Decision(link.url, "queued")


def test_a_batch_is_dispatched_in_turns_and_all_it_admits_waits_for_the_batchs_send() -> None:
    bundles = {
        f"m{i}": [FrontierMessage(url=f"http://h{i}.example/{j}", depth=1) for j in range(n)]
        for i, n in enumerate([3, 1, 12])
    }
    bundles["m1"] = [FrontierMessage(url="http://h1.example/bad", depth=1)]
    stub = RecordingDispatcher({"http://h1.example/bad"})
    outbox = Outbox()
    failed = dispatch_in_turns(stub, [(key, key, links) for key, links in bundles.items()], outbox)
    # One link of every message per turn, first links first.
    assert stub.order[:5] == [
        "http://h0.example/0",
        "http://h1.example/bad",
        "http://h2.example/0",
        "http://h0.example/1",
        "http://h2.example/1",
    ]
    assert list(failed) == ["m1"] and str(failed["m1"]) == "http://h1.example/bad failed"
    # Nothing is sent during the turns: everything admitted is in the outbox, by host.
    assert [host for host, _ in outbox.runs] == ["h0.example", "h2.example"]
    assert sorted(t.url for t in tasks(outbox)) == sorted(
        m.url for key, links in bundles.items() if key != "m1" for m in links
    )
    assert outbox.frontier == []


def test_each_link_is_announced_before_it_is_dispatched() -> None:
    links = [FrontierMessage(url=f"http://h.example/{j}", depth=1) for j in range(3)]
    stub = RecordingDispatcher({"http://h.example/1"})
    seen: list[tuple[str, str, int]] = []

    def before(link: Link) -> None:
        seen.append(("before", link.url, len(stub.order)))

    failed = dispatch_in_turns(
        stub,
        [("m", "m", links)],
        Outbox(),
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


def test_in_turns_a_small_budget_goes_to_every_pages_first_links_and_each_host_gets_one_run(env: Env) -> None:
    hosts = ("a.example", "b.example", "c.example")
    env.crawls.put(CrawlConfig(crawl_id="c", delay=0.0, user_agent=UA, max_pages=3, seed_hosts=frozenset(hosts)))
    for host in hosts:
        env.robots(f"http://{host}")
    batch = [
        (host, f"m-{host}", [FrontierMessage(url=f"http://{host}/{i}", depth=1, crawl_id="c") for i in range(4)])
        for host in hosts
    ]
    outbox, actions = Outbox(), []
    failed = dispatch_in_turns(env.dispatcher, batch, outbox, on_decision=lambda m, d: actions.append(d.action))
    assert failed == {}
    # Taken bundle by bundle, the first page's host would have had it all.
    assert [t.url for t in tasks(outbox)] == ["http://a.example/0", "http://b.example/0", "http://c.example/0"]
    assert actions[:4] == ["queued", "queued", "queued", "skipped"] and env.crawls.pages == {"c": 3}
    backlog, runs, sent = FakeBacklog(), FakeRuns(), list[RunMessage]()
    flush_runs(outbox, backlog, runs, sent.extend, clock=env.clock, new_run_id=lambda: "run")
    assert sent == [RunMessage(host, "run") for host in hosts]
    assert [call[:2] for call in backlog.calls] == [("add", host) for host in hosts]
    assert [call[:2] for call in runs.calls if call[0] == "schedule"] == [("schedule", host) for host in hosts]
