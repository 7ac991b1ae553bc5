"""Dispatch on the in-memory stores: canonical, in scope, new, robots-allowed, within budget, polite."""

from __future__ import annotations

import json

import pytest
from fakes import FakeClock, FakeCrawls, FakeHosts, FakeParking, FakeUrls

from crawlstack import http
from crawlstack.config import CrawlConfig
from crawlstack.dispatcher import ROBOTS_WAIT_SECONDS, Dispatcher, Outbox
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import Politeness
from crawlstack.robots import RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.urls import fingerprint

SEED = "http://example.com/"
UA = "crawlstack/test (+https://example.org/bot)"


class Env:
    def __init__(self, config: CrawlConfig, rules: RuleSet | None = None) -> None:
        self.clock = FakeClock()
        self.crawls = FakeCrawls(config)
        self.urls = FakeUrls()
        self.hosts = FakeHosts(self.clock)
        self.parking = FakeParking()
        self.politeness = Politeness(self.hosts, self.parking, self.clock)
        self.dispatcher = Dispatcher(
            self.crawls, self.urls, self.hosts, self.politeness, rules or RuleSet(), clock=self.clock
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


def test_a_mapping_pattern_or_a_rule_choice_brings_a_link_in(env: Env) -> None:
    rules = RuleSet((compile_mapping("m.json", {"name": "m", "url_patterns": [{"type": "regex", "pattern": "/b/"}]}),))
    env.dispatcher.rules = rules
    env.robots("http://books.example")
    env.robots("http://chosen.example")
    assert env.send("http://books.example/b/1", depth=1)[0] == "queued"
    assert env.send("http://chosen.example/x", depth=1, via="m")[0] == "queued"


def test_duplicates_are_deduped_but_a_redelivery_is_sent_again(env: Env) -> None:
    _, _, first = env.send(SEED, message_id="m1")
    action, _, outbox = env.send("http://EXAMPLE.com/", message_id="m2")
    assert (action, outbox.fetch) == ("deduped", [])
    # The same message again (the first delivery may have died before sending).
    action, _, again = env.send(SEED, message_id="m1")
    assert action == "queued"
    assert [t.fp for t, _ in tasks(again)] == [t.fp for t, _ in tasks(first)]
    assert env.hosts.read_slot("example.com").window == {f"c#{fingerprint(SEED)}"}


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
    other = Dispatcher(env.crawls, env.urls, env.hosts, env.politeness, RuleSet(), clock=env.clock)
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
    env.dispatcher.sleep = env.clock.sleep
    env.hosts.push_back("gap.example", env.clock.now + 0.4)  # the last request's delay ends in 0.4 s
    action, _, _ = env.send("http://gap.example/")
    assert action == "queued"
    assert env.clock.sleeps == [pytest.approx(0.4)]
    assert env.hosts.get_robots("http://gap.example") is not None
