"""Sharing a day's budget of checks: priorities first, then the spare by √rate up to each ceiling; a source's rate."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from crawlstack.watch.grants import grants, rate_estimate
from crawlstack.watch.schedule import DAY, Check, SourceState, plan_day, priority_after
from crawlstack.watch.sources import Source

T0 = 1_767_225_600.0


def src(source_id: str, **kw: float) -> Source:
    return Source(source_id, f"http://h{source_id}.example/", "listing", **kw)  # type: ignore[arg-type]


def test_the_spare_goes_by_the_square_root_of_the_rate_and_adds_up_to_the_budget() -> None:
    sources = [src(name, priority_max=100.0) for name in "abc"]
    low = dict.fromkeys("abc", 0.1)
    given = grants(sources, low, {"a": 1.0, "b": 4.0, "c": 16.0}, budget=70)
    assert sum(given.values()) == pytest.approx(70)
    assert given["b"] / given["a"] == pytest.approx(2) and given["c"] / given["a"] == pytest.approx(4)


def test_a_ceiling_holds_and_what_it_leaves_goes_to_the_others() -> None:
    sources = [src("a", priority_max=100.0), src("busy", priority_max=5.0)]
    given = grants(sources, {"a": 0.1, "busy": 0.1}, {"a": 1.0, "busy": 10_000.0}, budget=50)
    assert given == {"a": pytest.approx(45), "busy": pytest.approx(5)}


def test_priorities_come_first_and_a_source_with_no_rate_keeps_its_priority() -> None:
    sources = [src("new", priority_max=24.0), src("a", priority_max=24.0), src("b", priority_max=24.0)]
    rates = {"new": None, "a": 1.0, "b": 9.0}
    given = grants(sources, {"new": 24.0, "a": 5.0, "b": 0.5}, rates, budget=40)
    assert given["new"] == 24.0 and given["a"] == 5.0  # a's priority is above its share of the spare
    assert given["b"] == pytest.approx(11.0)
    # Priorities asking for the whole budget or more are the grant: the day's plan shares it by tokens.
    assert grants(sources, {"new": 24.0, "a": 24.0, "b": 24.0}, rates, budget=40) == dict.fromkeys(rates, 24.0)
    # A budget over every ceiling: each source its ceiling.
    assert grants(sources, dict.fromkeys(rates, 0.1), rates, budget=1000) == dict.fromkeys(rates, 24.0)


def test_the_rate_is_items_over_the_time_checks_covered_recent_checks_weighing_more() -> None:
    assert rate_estimate([], T0) is None and rate_estimate([Check(T0, 20)], T0) is None
    # The first check's 20 items piled up for an unknown time: they count for neither items nor time.
    steady = [Check(T0, 20), Check(T0 + DAY / 2, 1), Check(T0 + DAY, 1)]
    assert rate_estimate(steady, T0 + DAY) == pytest.approx(2.0)
    jumped = [Check(T0 + d * DAY, 1) for d in range(10)] + [Check(T0 + 10 * DAY, 10)]
    assert rate_estimate(jumped, T0 + 10 * DAY) > 4  # a day at 10 outweighs nine at 1
    assert rate_estimate([Check(T0, 0), Check(T0, 3)], T0) is None  # no time covered


def _week(sources: list[Source], rate_of: dict[str, float], budget: int, days: int) -> list[Counter[str]]:
    """Days of plans, each check finding the items that arrived (evenly, at the source's rate) since the last."""
    states: dict[str, SourceState] = {}
    last: dict[str, float] = {}
    per_day = []
    by_id = {s.id: s for s in sources}
    for day in range(days):
        planned, states = plan_day(sources, states, T0 + day * DAY, budget)
        for check in planned:
            rate = rate_of[check.source_id] * (10 if check.source_id == "jump" and day >= 3 else 1)
            since = last.get(check.source_id, T0)
            found = math.floor((check.at - T0) * rate / DAY) - math.floor((since - T0) * rate / DAY)
            last[check.source_id] = check.at
            states[check.source_id] = priority_after(by_id[check.source_id], states[check.source_id],
                                                     Check(check.at, found))  # fmt: skip
        per_day.append(Counter(p.source_id for p in planned))
    return per_day


def test_the_budget_follows_where_items_appear_and_a_jump_is_followed_within_three_days() -> None:
    # Issue 28: the spare was spread evenly, so quiet and busy sources were checked about as often.
    rates = {f"q{i}": 2.0 for i in range(20)} | {f"b{i}": 32.0 for i in range(20)} | {"jump": 2.0}
    sources = [src(sid, priority_max=48.0) for sid in rates]
    per_day = _week(sources, rates, budget=300, days=7)
    day = per_day[2]
    quiet = sum(day[f"q{i}"] for i in range(20)) / 20
    busy = sum(day[f"b{i}"] for i in range(20)) / 20
    assert busy / quiet == pytest.approx(4, rel=0.25)  # √(32 / 2): not 1
    assert sum(per_day[2].values()) == pytest.approx(300, abs=3)
    # The jump (10x from day 3) is followed within three days: the geometric mean of its old and new checks.
    old = per_day[2]["jump"]
    new = sum(per_day[d]["jump"] for d in (5, 6)) / 2
    assert new > 2 * old and max(per_day[d]["jump"] for d in (3, 4, 5)) >= math.sqrt(old * new)


def test_without_a_budget_each_source_earns_its_priority() -> None:
    sources = [src("a", priority_max=24.0), src("b", priority_max=24.0)]
    states = {"a": SourceState(2.0, 0.0), "b": SourceState(8.0, 0.0)}
    planned, _ = plan_day(sources, states, T0, budget=None)
    assert Counter(p.source_id for p in planned) == {"a": 2, "b": 8}
