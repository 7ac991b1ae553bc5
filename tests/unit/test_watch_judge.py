"""bench/watch_judge.py: detection latencies, the √rate oracle, adaptation and wasted deeper pages, by hand."""

from __future__ import annotations

import math

import benches
import pytest

judge = benches.load("watch_judge")
DAY = judge.DAY


def test_an_item_is_detected_by_the_first_response_that_shows_it_and_never_if_none_does() -> None:
    arrivals = {"a": [10.0, 20.0, 30.0]}
    shown = [(25.0, "a", 1, [1, 0]), (15.0, "a", 1, [0]), (40.0, "a", 2, [1])]
    assert judge.detections(shown, arrivals) == [5.0, 5.0, math.inf]
    assert judge.median([1.0, math.inf, math.inf]) == math.inf and judge.median([1.0, 3.0, math.inf]) == 3.0


def test_the_oracle_checks_each_source_by_the_square_root_of_its_rate_in_each_stretch() -> None:
    # Two sources, rates 1 and 4 a day, 3 checks a day: 1 and 2 checks a day, so every 24 h and every 12 h.
    arrivals = {"slow": [float(t) for t in range(0, int(4 * DAY), 997)], "fast": [1000.0]}
    rates = {"slow": [(0.0, 4 * DAY, 1.0)], "fast": [(0.0, 4 * DAY, 4.0)]}
    latencies = judge.oracle(arrivals, rates, checks_a_day=3.0, end=4 * DAY, seed=3)
    slow = latencies[: len(arrivals["slow"])]
    finite = [x for x in slow if x < math.inf]
    assert max(finite) <= DAY and sum(finite) / len(finite) == pytest.approx(DAY / 2, rel=0.1)
    assert latencies[-1] <= DAY / 2
    # A source that speeds up 9x halfway is checked 3x as often from then: the oracle knows.
    jumped = {"j": [(0.0, DAY, 1.0), (DAY, 2 * DAY, 9.0)], "k": [(0.0, DAY, 1.0), (DAY, 2 * DAY, 1.0)]}
    late = [DAY + 100.0 * i for i in range(500)]
    after = judge.oracle({"j": late, "k": late}, jumped, checks_a_day=8.0, end=2 * DAY, seed=1)
    j, k = after[:500], after[500:]
    assert sum(j) / len(j) == pytest.approx(sum(k) / len(k) / 3, rel=0.15)


def test_a_jump_is_reached_when_some_24_hours_within_3_days_hold_the_geometric_mean() -> None:
    jump, end = 4 * DAY, 10 * DAY
    before = [jump - 2 * DAY + i * DAY / 2 for i in range(4)]  # 2 a day
    last_days = [end - 2 * DAY + i * DAY / 8 for i in range(16)]  # 8 a day
    quick = before + [jump + DAY + i * DAY / 4 for i in range(4)] + last_days
    slow = before + [jump + 2.5 * DAY + i * DAY / 4 for i in range(4)] + last_days
    # Geometric mean of 2 and 8 a day: 4; quick holds 4 in a day by jump + 2 days, slow only after 3.
    assert judge.reached({"q": quick, "s": slow}, ["q", "s"], jump, end) == (1, 2)


def test_a_deeper_page_that_shows_nothing_new_is_waste() -> None:
    shown = [
        (1.0, "a", 1, [5, 4, 3]),
        (2.0, "a", 2, [2, 1]),  # new: not waste
        (3.0, "a", 1, [6, 5, 4]),
        (4.0, "a", 2, [3, 2]),  # seen before: waste
        (5.0, "a", 3, []),  # empty: waste
        (6.0, "b", 2, [1]),
    ]
    assert judge.deeper_waste(shown) == 2
