"""Scheduling a watch's checks: tokens, the budget, even spacing per host, priority that follows yield."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import pytest

from crawlstack.watch.schedule import (
    DAY,
    Check,
    SourceState,
    due_checks,
    first_checks,
    plan_day,
    priority_after,
    spread,
)
from crawlstack.watch.sources import Source

T0 = 1_767_225_600.0


def src(source_id: str, host: str = "a.example", **kw: Any) -> Source:
    return Source(source_id, f"http://{host}/{source_id}", "listing", **kw)


def test_a_new_source_starts_at_its_ceiling_and_earns_its_priority_daily() -> None:
    source = src("s", priority_max=1.5)
    planned, states = plan_day([source], {}, T0, budget=None)
    # Issue 28: no tokens to start, so the first day's grant is not banked on top of the ceiling:
    # 1.5 earned, 1 check, half a token left for tomorrow.
    assert [p.source_id for p in planned] == ["s"] and states["s"].tokens == pytest.approx(0.5)
    planned, states = plan_day([source], states, T0 + DAY, budget=None)
    assert [p.source_id for p in planned] == ["s"] * 2 and states["s"].tokens == pytest.approx(0.0)
    quiet = SourceState(priority=0.07, tokens=0.0)
    _, after = plan_day([src("q")], {"q": quiet}, T0, budget=None)
    assert after["q"].tokens == pytest.approx(0.07)  # no check yet: the tokens pile up until one is due


def test_the_budget_goes_to_the_most_tokens_first_one_check_at_a_time() -> None:
    states = {"a": SourceState(1.0, 2.2), "b": SourceState(1.0, 2.0), "c": SourceState(1.0, 0.9)}
    assert due_checks(states, budget=2) == {"a": 1, "b": 1}
    assert due_checks(states, budget=None) == {"a": 2, "b": 2}
    assert due_checks({"a": SourceState(1.0, 3.5), "b": SourceState(1.0, 1.2)}, budget=3) == {"a": 3}


def _days(
    sources: list[Source], states: dict[str, SourceState], days: int, budget: int | None
) -> tuple[list[Counter[str]], dict[str, SourceState]]:
    """``days`` days planned one after another: each day's checks per source, and the states after."""
    per_day = []
    for day in range(days):
        planned, states = plan_day(sources, states, T0 + day * DAY, budget)
        per_day.append(Counter(p.source_id for p in planned))
    return per_day, states


def test_a_budget_held_back_for_30_days_never_plans_more_than_the_ceiling_in_a_day() -> None:
    # Issue 27: 30 days at a budget of 1 banked 280 tokens, and the next day planned 290 checks.
    busy = src("busy", priority_max=10.0)
    _, states = _days([busy], {}, 30, budget=1)
    assert states["busy"].tokens == 10.0  # a day of its ceiling banked, not 280
    next_day, _ = _days([busy], states, 1, budget=None)
    assert next_day[0]["busy"] <= 10


@pytest.mark.parametrize("ceiling", [1.75, 0.07, 10.0, 2.5])
def test_the_cap_keeps_a_sources_rate_and_at_most_its_ceiling_rounded_up_a_day(ceiling: float) -> None:
    source = src("s", priority_max=ceiling)
    state = SourceState(priority=ceiling, tokens=0.0)
    per_day, _ = _days([source], {"s": state}, 200, budget=None)
    assert max(day["s"] for day in per_day) <= math.ceil(ceiling)
    assert sum(day["s"] for day in per_day) == math.floor(200 * ceiling + 1e-6)  # no part of a token lost


def test_a_hosts_checks_are_evenly_spaced_and_a_sources_repeats_far_apart() -> None:
    due = {"x": 2, "y": 2, "z": 1}
    hosts = {"x": "h", "y": "h", "z": "other"}
    planned = spread(due, hosts, T0)
    on_h = [p for p in planned if p.host == "h"]
    gaps = {round(b.at - a.at, 6) for a, b in itertools.pairwise(on_h)}
    assert gaps == {DAY / 4}  # four checks, a quarter day apart
    assert [p.source_id for p in on_h] == ["x", "y", "x", "y"]  # repeats half a day apart, not back to back
    assert [p.at for p in planned if p.host == "other"] == [T0 + DAY / 2]
    assert all(T0 <= p.at < T0 + DAY for p in planned)


def test_the_busiest_hour_holds_at_most_an_even_share_plus_one() -> None:
    sources = [src(f"s{i}", priority_max=1.75) for i in range(40)]
    planned, _ = plan_day(sources, {}, T0, budget=None)
    hours = Counter(int((p.at - T0) // 3600) for p in planned)
    assert max(hours.values()) <= math.ceil(len(planned) / 24) + 1


def test_priority_follows_yield_and_stays_in_bounds() -> None:
    source = src("s", priority_min=0.1, priority_max=5.0)
    state = SourceState(priority=0.1, tokens=0.0)
    rising = [state := priority_after(source, state, Check(T0 + d * DAY, 4)) for d in range(5)]
    assert rising[-1].priority == pytest.approx(4.0)
    for d in range(5, 40):  # it stops posting: a matching fall, down to the floor
        state = priority_after(source, state, Check(T0 + d * DAY, 0))
    assert state.priority == 0.1 and len(state.history) == 30
    greedy = priority_after(source, SourceState(1.0, 0.0), Check(T0, 1000))
    assert greedy.priority == 5.0


def test_recent_checks_weigh_more() -> None:
    source = src("s", priority_max=100.0)
    old_busy = SourceState(1.0, 0.0, (Check(T0, 10), Check(T0 + 1, 10)))
    now = T0 + 30 * DAY
    assert priority_after(source, old_busy, Check(now, 0)).priority < 10 / 3


def test_velocity_sets_checks_from_items_over_timespan() -> None:
    source = src("v", strategy="velocity", priority_min=0.5, priority_max=10.0)
    state = SourceState(1.0, 0.0)
    state = priority_after(source, state, Check(T0, 3))
    state = priority_after(source, state, Check(T0 + 2 * DAY, 6))  # 6 items in 2 days: 3 a day
    assert state.priority == pytest.approx(3.0)
    quiet = priority_after(source, state, Check(T0 + 30 * DAY, 0))
    assert quiet.priority == pytest.approx(0.5)  # 6 items over 30 days is 0.2 a day: the floor


def test_a_simulations_host_delay_is_simulated_time() -> None:
    from crawlstack.config import CrawlConfig

    config = CrawlConfig(crawl_id="watch", delay=2.0, time_scale=100.0)
    assert config.host_delay(None) == 0.02 and config.host_delay(3.0) == 0.03
    assert CrawlConfig.from_item(config.to_item(), CrawlConfig()) == config
    assert "time_scale" not in CrawlConfig(delay=2.0).to_item() and CrawlConfig(delay=2.0).host_delay(None) == 2.0


def test_sources_added_after_the_plan_get_one_first_check_each_spread_over_the_span() -> None:
    added = [Source(f"n{i}", f"http://one.example/{i}", "listing") for i in range(4)]
    added.append(Source("o", "http://other.example/", "listing", priority_max=0.5))
    checks, states = first_checks(added, 1000.0, 3600.0)
    one = sorted(c.at for c in checks if c.host == "one.example")
    assert one == [1000.0 + (i + 0.5) * 900.0 for i in range(4)]  # a host's new sources evenly over the hour
    assert [c.at for c in checks if c.host == "other.example"] == [1000.0 + 1800.0]
    # A first check is outside the budget: it spends no token.
    assert states["n0"] == SourceState(1.75, 0.0) and states["o"] == SourceState(0.5, 0.0)


def test_without_a_budget_a_source_posting_ten_times_faster_is_followed_within_three_days() -> None:
    # Issue 28: priority follows yield; a 10x jump must reach the geometric mean of old and new checks a day.
    source = src("s", priority_min=0.5, priority_max=48.0)
    states = {"s": SourceState(priority=1.5, tokens=0.0)}
    posted = seen = 0.0
    last, per_day = T0, []
    for day in range(16):
        rate = 4.0 * (10 if day >= 8 else 1)  # items a day, evenly
        planned, states = plan_day([source], states, T0 + day * DAY, budget=None)
        for check in planned:
            posted += (check.at - last) / DAY * rate
            last, found = check.at, math.floor(posted) - seen
            seen += found
            states["s"] = priority_after(source, states["s"], Check(check.at, int(found)))
        per_day.append(len(planned))
    old, new = per_day[7], sum(per_day[14:]) / 2
    assert new >= 2 * old  # it did rise: about √10 times, as checks that each find the same few items
    assert max(per_day[8:11]) >= math.sqrt(old * new)
