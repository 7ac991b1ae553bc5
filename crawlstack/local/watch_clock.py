"""A watch's clock, kept with its state so that running the watch again resumes it as it was.

The state's ``crawl_meta`` holds it under ``watch_clock``: the anchors
(``sim_start``, ``wall_start``, ``speed``; the watch's time is ``sim_start +
speed * (wall time - wall_start)``), whether it is a simulation
(``simulated``), and a simulation's ``start``, ``days`` and ``end``.
``OUT/clock.json`` holds the anchors, for servers under test.

``resume_clock`` decides the clock of a watch run on a state:

* a state no watch has run on yet takes its clock from the flags: a
  simulation with ``--simulate-days`` (``--speed`` 1 and ``--sim-start`` now
  unless given), else real time;
* run again with no clock flag, a watch goes on as it was: a simulation on
  its own clock, as if it had run on while stopped, at its speed, to its
  end; a real-time watch in real time;
* ``--speed`` on a simulation changes its rate from the time reached: it
  says how fast to play the same simulation, not another one;
* ``--simulate-days`` or ``--sim-start`` other than the simulation's, and any
  of the three on a real-time watch, ask for another watch than the one the
  state holds (its plan and items are on its clock): refused with
  ``StateError`` before anything is written;
* a saved simulation that cannot be read, or lies outside
  ``limits.SIM_START_YEARS`` (an older version let year 9999 through), is
  set aside, with a note, when ``--simulate-days`` starts a new one, and
  refused without it.

Settings: ``limits.SIM_START_YEARS``, ``limits.SIMULATE_DAYS``, ``limits.SIMULATION_SPEED``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from crawlstack import limits
from crawlstack.fetch.crawllog import iso_time
from crawlstack.local.outdir import StateError
from crawlstack.watch.schedule import DAY


@dataclass(frozen=True)
class WatchClock:
    """The watch's time: ``sim_start + speed * (wall time since wall_start)``; wall time at speed 1 from now."""

    sim_start: float
    wall_start: float
    speed: float = 1.0

    def now(self) -> float:
        return self.of(time.time())

    def of(self, wall: float) -> float:
        return self.sim_start + self.speed * (wall - self.wall_start)


@dataclass(frozen=True)
class ResumedClock:
    clock: WatchClock
    end: float | None  # a simulation's end; None: the watch runs until stopped
    saved: dict[str, Any]  # what the state keeps under watch_clock
    note: str | None = None  # one line for stderr


def resume_clock(
    out: str, saved: Any, simulate_days: float | None, speed: float | None, sim_start: float | None, wall: float
) -> ResumedClock:
    """The clock of a watch run at ``wall`` on ``out``, whose state saved ``saved`` (None: none yet), and its flags."""
    flags = {"--simulate-days": simulate_days, "--speed": speed, "--sim-start": sim_start}
    given = [flag for flag, value in flags.items() if value is not None]
    if _saved_real_time(saved):
        if given:
            raise StateError(
                f"{out} holds a watch in real time: {', '.join(given)} would make it a simulation, "
                "which needs a folder of its own (nothing was changed)"
            )
        return _real_time(wall)
    note = None
    if saved is not None and not _readable_simulation(saved):
        first, last = limits.SIM_START_YEARS
        if simulate_days is None:
            raise StateError(
                f"{out}: the saved simulation's clock is unreadable or lies outside the years {first} to {last}: "
                "give --simulate-days N to start a new simulation (nothing was changed)"
            )
        note = f"the saved simulation's clock lies outside the years {first} to {last}; starting a new simulation"
        saved = None
    if saved is None:
        if simulate_days is None:
            if given:
                raise StateError("--speed and --sim-start set a simulation: give --simulate-days N")
            return _real_time(wall)
        start = sim_start if sim_start is not None else wall
        clock = WatchClock(start, wall, speed if speed is not None else 1.0)
        return _simulation(clock, start, simulate_days, start + simulate_days * DAY, note)
    return _resumed(out, saved, simulate_days, speed, sim_start, wall)


def _resumed(
    out: str,
    saved: dict[str, Any],
    simulate_days: float | None,
    speed: float | None,
    sim_start: float | None,
    wall: float,
) -> ResumedClock:
    clock = WatchClock(float(saved["sim_start"]), float(saved["wall_start"]), float(saved["speed"]))
    end = float(saved["end"])
    # One saved before its start and days were kept: they are not known, so not checked.
    start, days = (None if saved.get(key) is None else float(saved[key]) for key in ("start", "days"))
    contradicting = []
    if simulate_days is not None and days is not None and simulate_days != days:
        contradicting.append(f"--simulate-days {simulate_days:g}")
    if sim_start is not None and start is not None and sim_start != start:
        contradicting.append(f"--sim-start {iso_time(sim_start)[:19]}Z")
    span = f"from {iso_time(start)[:19]}Z " if start is not None else ""
    if contradicting:
        raise StateError(
            f"{out} holds a simulation {span}to {iso_time(end)[:19]}Z: {' and '.join(contradicting)} "
            "would make another; run it again without them to go on (nothing was changed)"
        )
    if speed is not None and speed != clock.speed:
        clock = WatchClock(clock.of(wall), wall, speed)  # the same simulation, played at another rate from here
    reached, until = iso_time(clock.of(wall))[:19], iso_time(end)[:19]
    note = f"resuming the simulation at {reached}Z, to {until}Z, at speed {clock.speed:g}"
    if clock.of(wall) >= end:
        note = f"the simulation reached its end, {until}Z: nothing is left to run (a new one needs a new folder)"
    return _simulation(clock, start, days, end, note)


def _real_time(wall: float) -> ResumedClock:
    clock = WatchClock(wall, wall)
    return ResumedClock(clock, None, {**anchors(clock), "end": None, "simulated": False})


def _simulation(
    clock: WatchClock, start: float | None, days: float | None, end: float, note: str | None
) -> ResumedClock:
    saved = {**anchors(clock), "end": end, "simulated": True, "start": start, "days": days}
    return ResumedClock(clock, end, {key: value for key, value in saved.items() if value is not None}, note)


def _saved_real_time(saved: Any) -> bool:
    """A real-time watch's clock; one saved before ``simulated`` was kept had no end."""
    if not isinstance(saved, dict):
        return False
    return saved.get("simulated") is False or ("simulated" not in saved and saved.get("end", 0) is None)


def anchors(clock: WatchClock) -> dict[str, float]:
    """What ``OUT/clock.json`` holds."""
    return {"sim_start": clock.sim_start, "wall_start": clock.wall_start, "speed": clock.speed}


def _readable_simulation(saved: Any) -> bool:
    """Whether a saved simulation's anchors are numbers, its speed one ``--speed`` allows, and its start
    and end lie where ``--sim-start`` and ``--simulate-days`` can put them.

    One saved by an older version from a far ``--sim-start`` (year 9999)
    would crash on every run again; it is set aside rather than trap OUT/.
    """
    if not isinstance(saved, dict):
        return False
    first, last = limits.SIM_START_YEARS
    low = datetime(first, 1, 1, tzinfo=UTC).timestamp()
    high = datetime(last + 1, 1, 1, tzinfo=UTC).timestamp() + limits.SIMULATE_DAYS[1] * DAY
    try:
        times = [float(saved["sim_start"]), float(saved["end"])]
        if saved.get("start") is not None:
            times.append(float(saved["start"]))
        wall_start, speed = float(saved["wall_start"]), float(saved["speed"])
        if saved.get("days") is not None:
            float(saved["days"])
    except (KeyError, TypeError, ValueError):
        return False
    slowest, fastest = limits.SIMULATION_SPEED
    return all(low <= t <= high for t in times) and math.isfinite(wall_start) and slowest <= speed <= fastest
