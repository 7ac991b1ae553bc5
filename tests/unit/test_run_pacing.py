"""A host's pace in its runs: slowed down on 429 and 503, recovering on success, paused by Retry-After.

Sleeping or being woken later is ``crawlstack.fetch.pacing``'s choice of
cost; here every wait within the invocation is slept (``always_sleep``), so
the request log shows the pace itself.
"""

from __future__ import annotations

import itertools

import pytest
from hostruns import HOST, Env, fetched_of

from crawlstack import settings
from crawlstack.fetch import host_loop as host_module
from crawlstack.fetch.host_loop import recovered, slowed

BUSY = [("Content-Type", "text/html"), ("Retry-After", "30")]


@pytest.fixture
def always_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_module, "should_sleep", lambda wait, hosts, left, **_: wait < left)


def gaps(starts: list[float]) -> list[float]:
    return [round(b - a, 6) for a, b in itertools.pairwise(starts)]


def test_slowed_doubles_the_effective_delay_within_floor_and_cap() -> None:
    assert slowed(2.0, None) == 4.0
    assert slowed(2.0, 4.0) == 8.0
    assert slowed(2.0, 1.0) == 4.0  # the effective delay is the larger
    assert slowed(0.0, None) == settings.ADAPTIVE_DELAY_FLOOR_SECONDS == 1.0
    assert slowed(2.0, settings.MAX_CRAWL_DELAY_SECONDS * 0.9) == settings.MAX_CRAWL_DELAY_SECONDS


def test_recovered_shrinks_slowly_and_never_below_the_crawls_delay() -> None:
    assert recovered(2.0, 4.0) == pytest.approx(3.6)
    assert recovered(2.0, 2.1) is None  # 1.89 would be under the crawl's own delay
    assert recovered(0.0, 0.11) is None  # under the minimum: back to no delay at all
    assert recovered(0.0, 0.2) == pytest.approx(0.18)
    assert recovered(2.0, None) is None


@pytest.mark.usefixtures("always_sleep")
def test_a_429_slows_the_host_and_successes_bring_it_back_to_the_crawls_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=0.25)
    msg = env.admit([f"p{i}" for i in range(20)])
    env.web.answers(env.url("p0"), 429, 200, reason="Too Many Requests")
    results = env.settle(msg)
    assert results[-1].ends == {HOST: "done"}
    starts = env.starts()
    assert len(starts) == 21  # p0's retry too
    # 1.0 s after the 429 (the floor), then 0.9 of the last gap after each success, down to the crawl's 0.25 s.
    expected, pace = [], 1.0
    while pace > 0.25:
        expected.append(pace)
        pace = round(pace * 0.9, 12)
    expected += [0.25] * (20 - len(expected))
    assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx(expected, abs=1e-6)
    assert env.runs.get(HOST).adaptive_delay is None  # back at the crawl's delay: nothing recorded
    assert [f.outcome for f in fetched_of(results)].count("retry") == 1


@pytest.mark.usefixtures("always_sleep")
def test_each_503_in_a_row_doubles_the_delay_again(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=0.25)
    msg = env.add([env.task(p, page=False, attempt=3) for p in "abc"])
    for p in "abc":
        env.web.page(env.url(p), status=503, reason="Service Unavailable")
        env.urls.items[("c", env.fp(p))].update(state="retrying", attempt=2)  # their last tries: no retries
    result = env.run(msg)
    assert [f.outcome for f in result.fetched] == ["failed"] * 3
    assert gaps(env.starts()) == [1.0, 2.0]
    assert env.runs.get(HOST).adaptive_delay == 4.0  # recorded for the host's next holder


@pytest.mark.usefixtures("always_sleep")
def test_the_slowdown_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=2.0)
    t = env.task("a", attempt=3)
    env.web.page(t.url, status=429, reason="Too Many Requests")
    env.urls.items[("c", t.fp)].update(state="retrying", attempt=2)
    msg = env.add([t])
    env.runs.items[HOST]["adaptive_delay"] = settings.MAX_CRAWL_DELAY_SECONDS * 0.9  # an earlier holder's
    env.run(msg)
    assert env.runs.get(HOST).adaptive_delay == settings.MAX_CRAWL_DELAY_SECONDS


def test_the_next_holder_keeps_the_slowed_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=0.25)
    t = env.task("a", attempt=3)
    env.web.page(t.url, status=429, reason="Too Many Requests")
    env.urls.items[("c", t.fp)].update(state="retrying", attempt=2)
    t0 = env.clock.now
    assert env.run(env.add([t])).ends == {HOST: "done"}
    assert env.runs.get(HOST).adaptive_delay == 1.0
    env.clock.advance(0.1)
    results = env.settle(env.admit(["b"]))
    # Not a quarter second after the 429 (a wait of 0.15 s, slept), but its slowed-down second:
    # a lone host is woken rather than sleep 0.9 s, at the next whole second.
    assert results[0].ends == {HOST: "rescheduled"} and results[0].runs[0][1] == 1
    assert env.starts() == [t0, t0 + 1.1]
    assert env.runs.get(HOST).adaptive_delay == pytest.approx(0.9)


def test_a_retry_after_pauses_the_whole_host_across_holders(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=0.25)
    t = env.task("a", attempt=3)
    env.web.page(t.url, status=503, headers=BUSY, reason="Service Unavailable")
    env.urls.items[("c", t.fp)].update(state="retrying", attempt=2)
    t0 = env.clock.now
    [failed] = env.run(env.add([t])).fetched
    assert failed.outcome == "failed"  # out of tries, yet the server's word holds for the host
    assert env.runs.get(HOST).pause_until == t0 + 30
    env.clock.advance(1)
    results = env.settle(env.admit(["b", "c"]))
    assert results[0].ends == {HOST: "rescheduled"} and results[0].runs[0][1] == 29
    starts = env.starts()
    assert starts[1] == t0 + 30 and starts[2] - starts[1] >= 0.25


@pytest.mark.usefixtures("always_sleep")
def test_a_retry_after_on_a_success_is_no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=0.25)
    msg = env.admit(["a", "b"])
    env.web.page(env.url("a"), headers=BUSY)
    t0 = env.clock.now
    env.run(msg)
    assert env.starts() == [t0, t0 + 0.25] and env.runs.get(HOST).pause_until == 0.0
