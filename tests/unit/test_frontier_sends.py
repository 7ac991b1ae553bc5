"""Fetch-queue sends per URL of a host's backlog, on the simulated crawl (fake clock, requests that take time).

A backlog waits parked and costs each URL one send to the fetch queue however
long it is; the end-to-end proof against the SQS limit is
tests/integration/test_frontier_scale.py.  Here: requests that take time
(0.5 s at a 5 s delay) must not make the unparked URLs reach their slots
before the host is free, which sent each URL round the fetch queue 2.7 times
on average (6 at most) before ``host_free_floor``.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest
from crawlsim import SimCrawl
from fakes import FakeClock, FakeHosts, FakeParking

from crawlstack.config import CrawlConfig
from crawlstack.messages import FetchTask
from crawlstack.politeness import HostSlot, Politeness, host_free_floor, window_size
from crawlstack.urls import fingerprint

HOST = "example.com"


def task(path: str, delay: float = 2.0) -> FetchTask:
    url = f"http://{HOST}/{path}"
    return FetchTask(
        url=url,
        fp=fingerprint(url),
        host=HOST,
        depth=1,
        crawl_id="c",
        not_before=0.0,
        delay=delay,
        window=window_size(delay, 8),
    )


def crawl(monkeypatch: pytest.MonkeyPatch, n: int, delay: float, latency: float) -> tuple[Counter[str], SimCrawl]:
    sim = SimCrawl(monkeypatch, CrawlConfig(crawl_id="a", delay=delay, user_agent="crawlstack/test"))
    sim.latency = latency
    sim.allow_robots(f"http://{HOST}")
    sends: Counter[str] = Counter()
    send = sim.fetch.send

    def counting(messages: object) -> int:
        batch = list(messages)  # type: ignore[call-overload]
        sends.update(json.loads(body)["url"] for body, _ in batch)
        return send(batch)

    monkeypatch.setattr(sim.fetch, "send", counting)
    sim.seed("a", *(f"http://{HOST}/p{i}" for i in range(n)))
    sim.run(limit=100_000)
    return sends, sim


@pytest.mark.parametrize("latency", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("n", [20, 100])
def test_a_backlog_goes_to_the_fetch_queue_once_per_url_when_requests_take_time(
    monkeypatch: pytest.MonkeyPatch, n: int, latency: float
) -> None:
    delay = 5.0
    sends, sim = crawl(monkeypatch, n, delay, latency)
    assert len(sim.requests) == n
    assert set(sends.values()) == {1}, sends
    times = sorted(t for _, t in sim.requests)
    # The host's pace is its delay from one request's start to the next, no slower.
    assert [round(b - a, 6) for a, b in itertools.pairwise(times)] == [delay] * (n - 1)


def test_a_request_slower_than_the_sub_second_sleep_costs_at_most_one_send_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The floor cannot know how long the request before will take: a task
    # that finds the host still spaced for more than a second goes round once.
    sends, _ = crawl(monkeypatch, 40, 5.0, 2.0)
    assert max(sends.values()) <= 2, sends


def test_host_free_floor() -> None:
    now = 1000.0
    idle = HostSlot(HOST, exists=True, next_slot=990.0, free_at=1003.0)
    assert host_free_floor(idle, now, 5.0) == 1003.0
    # One URL waits in the window: it goes when the host is free, the new one a delay later.
    assert host_free_floor(HostSlot(HOST, free_at=1003.0, window=frozenset({"c#1"})), now, 5.0) == 1008.0
    # In flight: free_at is a lease, the host is free no sooner than a delay from now.
    busy = HostSlot(HOST, free_at=now + 90.0, busy=True, window=frozenset({"c#1"}))
    assert host_free_floor(busy, now, 5.0) == 1005.0
    # A robots.txt request in flight holds no place in the window.
    assert host_free_floor(HostSlot(HOST, free_at=now + 90.0, busy=True), now, 5.0) == 1005.0
    # No delay: no spacing, no floor.
    assert host_free_floor(busy, now, 0.0) == 0.0


def test_a_remembered_busy_host_does_not_push_a_later_slot_back() -> None:
    # Dispatch remembers the state it last wrote; a request in flight then is
    # long over by the next URL, which must not wait a delay for it.
    clock = FakeClock()
    hosts = FakeHosts(clock)
    pol = Politeness(hosts, FakeParking(), clock)
    start = clock.now
    hosts.claim(HOST, start, start + 90.0)  # another request in flight
    [(_, a)] = pol.admit(task("a"))
    assert a.not_before == start + 2.0  # no sooner than a delay after now
    hosts.release(HOST, "x", start + 2.0)
    clock.advance(10.0)
    pol.release(a, clock.now)
    clock.advance(10.0)  # the host has been free for 8 s
    [(_, b)] = pol.admit(task("b"))
    assert b.not_before == clock.now
