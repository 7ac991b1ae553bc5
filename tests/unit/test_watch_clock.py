"""``resume_clock``: a watch run again goes on on its own clock; flags that contradict it are refused."""

from __future__ import annotations

from typing import Any

import pytest

from crawlstack.local.outdir import StateError
from crawlstack.local.watch_clock import ResumedClock, resume_clock

DAY = 86_400.0
START = 1_800_000_000.0  # 2027-01-15
WALL = 1_900_000_000.0


def first(simulate_days: float | None = None, speed: float | None = None, sim_start: float | None = None) -> Any:
    """What the state keeps after a first run with these flags, at WALL."""
    return resume_clock("OUT", None, simulate_days, speed, sim_start, WALL).saved


def again(
    saved: Any,
    after: float,
    simulate_days: float | None = None,
    speed: float | None = None,
    sim_start: float | None = None,
) -> ResumedClock:
    return resume_clock("OUT", saved, simulate_days, speed, sim_start, WALL + after)


def test_a_first_run_takes_its_clock_from_the_flags() -> None:
    simulation = resume_clock("OUT", None, 2.0, 100.0, START, WALL)
    assert (simulation.clock.of(WALL + 10), simulation.end) == (START + 1000, START + 2 * DAY)
    assert simulation.saved == {
        "sim_start": START, "wall_start": WALL, "speed": 100.0, "end": START + 2 * DAY, "simulated": True,
        "start": START, "days": 2.0,
    }  # fmt: skip
    assert resume_clock("OUT", None, 1.0, None, None, WALL).clock.speed == 1.0  # default speed, start now
    real = resume_clock("OUT", None, None, None, None, WALL)
    assert (real.end, real.clock.of(WALL + 10), real.saved["simulated"]) == (None, WALL + 10, False)


@pytest.mark.parametrize("flags", [{}, {"simulate_days": 2.0}, {"simulate_days": 2.0, "sim_start": START}])
def test_a_simulation_run_again_goes_on_as_it_was(flags: dict[str, float]) -> None:
    # Issue 28: run again alone, or with --simulate-days and no --speed, it became real time or speed 1.
    saved = first(2.0, 100.0, START)
    resumed = again(saved, 60.0, **flags)
    assert resumed.clock.of(WALL + 60) == START + 6000  # as if it had run on while stopped
    assert (resumed.end, resumed.clock.speed, resumed.saved) == (START + 2 * DAY, 100.0, saved)
    assert resumed.note == "resuming the simulation at 2027-01-15T09:40:00Z, to 2027-01-17T08:00:00Z, at speed 100"


def test_a_new_speed_plays_the_same_simulation_faster_from_the_time_reached() -> None:
    resumed = again(first(2.0, 100.0, START), 60.0, speed=1000.0)
    assert resumed.clock.of(WALL + 60) == START + 6000 and resumed.clock.of(WALL + 61) == START + 7000
    assert (resumed.end, resumed.saved["start"], resumed.saved["days"]) == (START + 2 * DAY, START, 2.0)


@pytest.mark.parametrize(
    ("saved", "flags", "problem"),
    [
        (first(2.0, 100.0, START), {"simulate_days": 3.0}, "OUT holds a simulation from 2027-01-15T08:00:00Z to "
         "2027-01-17T08:00:00Z: --simulate-days 3 would make another; run it again without them to go on"),
        (first(2.0, 100.0, START), {"sim_start": START + 1, "speed": 5.0}, "--sim-start 2027-01-15T08:00:01Z would"),
        (first(), {"simulate_days": 1.0}, "OUT holds a watch in real time: --simulate-days would make it a simulation"),
        (first(), {"speed": 10.0, "sim_start": START}, "real time: --speed, --sim-start would make it a simulation"),
        (None, {"speed": 10.0}, "--speed and --sim-start set a simulation: give --simulate-days N"),
        ({**first(2.0, 100.0, START), "sim_start": 1e12}, {}, "give --simulate-days N to start a new simulation"),
        ({"simulated": True, "end": START}, {"speed": 10.0}, "clock is unreadable or lies outside the years 2000"),
    ],
)  # fmt: skip
def test_flags_that_contradict_the_stored_clock_are_refused(saved: Any, flags: dict[str, float], problem: str) -> None:
    with pytest.raises(StateError, match=problem.replace("(", r"\(")) as refused:
        again(saved, 60.0, **flags)
    assert "\n" not in str(refused.value)


def test_an_unreadable_simulation_is_set_aside_for_a_new_one() -> None:
    resumed = again({"simulated": True, "sim_start": "soon"}, 60.0, simulate_days=1.0)
    assert resumed.end == WALL + 60 + DAY and resumed.note is not None and "starting a new simulation" in resumed.note


def test_clocks_saved_by_older_versions_resume() -> None:
    # Before start and days were kept: not checked, the end kept.
    older = {"sim_start": START, "wall_start": WALL, "speed": 100.0, "end": START + DAY, "simulated": True}
    resumed = again(older, 60.0, simulate_days=5.0)
    assert (resumed.end, resumed.saved) == (START + DAY, older)
    # Before "simulated" was kept, a real-time watch had no end.
    assert again({"speed": 1.0, "reached": WALL, "end": None}, 60.0).end is None


def test_a_simulation_past_its_end_says_so() -> None:
    resumed = again(first(1.0, 100.0, START), DAY)  # a wall day on: a hundred simulated days
    assert resumed.end == START + DAY and resumed.note == (
        "the simulation reached its end, 2027-01-16T08:00:00Z: nothing is left to run (a new one needs a new folder)"
    )


def test_a_simulation_ticks_often_enough_that_a_tick_is_seconds_of_its_time_not_minutes() -> None:
    from crawlstack.local.watch import tick_seconds

    # Issue 28: at --speed 1200 the pump's quarter second was five simulated minutes, and every check that late.
    assert tick_seconds(1.0) == 0.25 and tick_seconds(1200.0) == pytest.approx(0.025)
    assert tick_seconds(1e6) == 0.01  # the pump's own turn: no busier than that
