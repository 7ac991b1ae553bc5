"""The plan's clock: a stall re-spreads the rest of the day up to its end, no tighter than MIN_RATE."""

from __future__ import annotations

import itertools

import pytest

from crawlstack.watch.plan_clock import MIN_RATE, PlanClock

DAY = 86_400.0
T0 = 1_790_000_000.0


def test_the_identity_until_a_stall() -> None:
    clock = PlanClock()
    assert clock.real(T0 + 5) == T0 + 5 and clock.planned(T0 + 5) == T0 + 5


def test_a_stall_re_spreads_the_rest_of_the_day_up_to_its_end() -> None:
    # Down from 6 h to 9 h: what was planned from 6 h on now fits into the 15 h left, evenly.
    clock = PlanClock().respread(T0 + DAY / 4, T0 + 9 * 3600, T0 + DAY)
    assert clock.rate == pytest.approx(15 / 18)
    assert clock.real(T0 + DAY / 4) == T0 + 9 * 3600 and clock.real(T0 + DAY) == pytest.approx(T0 + DAY)
    gaps = [clock.real(T0 + DAY / 4 + k * 600) for k in range(4)]
    assert {round(b - a, 6) for a, b in itertools.pairwise(gaps)} == {500.0}  # even, a sixth tighter
    assert clock.planned(clock.real(T0 + 7000)) == pytest.approx(T0 + 7000)


def test_a_day_with_too_little_left_is_squeezed_to_min_rate_and_ends_later() -> None:
    clock = PlanClock().respread(T0, T0 + DAY - 60, T0 + DAY)
    assert clock.rate == MIN_RATE == 0.75 and clock.real(T0 + DAY) == T0 + DAY - 60 + DAY * 0.75
    # A watch down for days resumes where it left off, no tighter than MIN_RATE.
    assert PlanClock().respread(T0 + DAY / 2, T0 + 5 * DAY, T0 + DAY).rate == MIN_RATE


def test_the_next_day_starts_where_the_last_ended_at_full_spacing() -> None:
    squeezed = PlanClock().respread(T0, T0 + DAY - 60, T0 + DAY)
    day = squeezed.new_day(T0 + DAY)
    assert day.rate == 1.0 and day.real(T0 + DAY) == squeezed.real(T0 + DAY)
    assert day.real(T0 + DAY + 3600) == squeezed.real(T0 + DAY) + 3600
