"""Judging a simulated watch week from the servers' log: detection, the √rate oracle, adaptation, wasted pages.

Pure functions over what bench/watch.py's servers logged (simulated
times) and the world it generated; their tests: tests/unit/test_watch_judge.py.

* ``detections``: each item's latency from its arrival to the first response
  that showed it; an item no response showed is never detected (``inf``).
* ``oracle``: the same number of checks a day, given source ``i`` in
  proportion to ``√r_i`` for the rates of each stretch of the week (the
  oracle knows when a source speeds up), evenly spaced from a random phase;
  an item is detected at the oracle's next check of its source, ``inf``
  when none comes before the week's end.
* ``reached``: of the sources whose rate jumped, those whose checks in some
  24 hours within 3 days of the jump reached the geometric mean of their
  check frequencies before it and at the week's end.
* ``deeper_waste``: deeper-page requests (``page=2`` and on) that showed no
  item the source had not shown before.
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
from collections.abc import Iterable, Sequence

DAY = 86_400.0
# (sim time, source key, page number, items shown by index)
Shown = tuple[float, str, int, Sequence[int]]


def detections(shown: Iterable[Shown], arrivals: dict[str, list[float]]) -> list[float]:
    """Each item's seconds from arrival to the first response that showed it; ``inf`` for one never shown."""
    first: dict[tuple[str, int], float] = {}
    for at, source, _, items in shown:
        for index in items:
            key = (source, index)
            if key not in first or at < first[key]:
                first[key] = at
    out = []
    for source, times in arrivals.items():
        for index, arrived in enumerate(times):
            seen = first.get((source, index))
            out.append(seen - arrived if seen is not None else math.inf)
    return out


def oracle(
    arrivals: dict[str, list[float]],
    rates: dict[str, list[tuple[float, float, float]]],
    checks_a_day: float,
    end: float,
    seed: int = 0,
) -> list[float]:
    """Latencies under the √rate oracle: ``rates[source]`` is its stretches ``(start, stop, items a day)``."""
    rng = random.Random(seed)
    bounds = sorted({(a, b) for stretches in rates.values() for a, b, _ in stretches})
    times: dict[str, list[float]] = {source: [] for source in arrivals}
    for a, b in bounds:
        here = {s: r for s, stretches in rates.items() for x, y, r in stretches if (x, y) == (a, b)}
        total = sum(math.sqrt(r) for r in here.values())
        for source, rate in here.items():
            period = DAY / (checks_a_day * math.sqrt(rate) / total)
            t = a + rng.random() * period
            while t < b:
                times[source].append(t)
                t += period
    out = []
    for source, arrived in arrivals.items():
        checks = sorted(times[source])
        for when in arrived:
            i = bisect.bisect_left(checks, when)
            out.append(checks[i] - when if i < len(checks) and checks[i] < end else math.inf)
    return out


def median(values: Sequence[float]) -> float:
    """The median, ``inf`` counting as the largest (undetected items are the latest)."""
    return statistics.median(values) if values else math.nan


def reached(checks: dict[str, list[float]], jumped: Iterable[str], jump: float, end: float) -> tuple[int, int]:
    """(sources that reached their geometric-mean frequency within 3 days of ``jump``, sources that jumped)."""
    hit = total = 0
    for source in jumped:
        times = sorted(checks.get(source, []))
        before = sum(1 for t in times if jump - 2 * DAY <= t < jump) / 2
        after = sum(1 for t in times if end - 2 * DAY <= t < end) / 2
        target = math.sqrt(before * after)
        window = [t for t in times if jump <= t < jump + 3 * DAY]
        # The busiest 24 hours that end within the 3 days: each starting at a check.
        best = max((sum(1 for u in window if t <= u < t + DAY) for t in window if t + DAY <= jump + 3 * DAY), default=0)
        total += 1
        hit += best >= target
    return hit, total


def deeper_waste(shown: Iterable[Shown]) -> int:
    """Requests for page 2 or later that showed nothing their source had not shown before (in time order)."""
    seen: dict[str, set[int]] = {}
    wasted = 0
    for _, source, page, items in sorted(shown, key=lambda s: s[0]):
        known = seen.setdefault(source, set())
        if page >= 2 and not set(items) - known:
            wasted += 1
        known.update(items)
    return wasted
