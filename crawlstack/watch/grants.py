"""How a day's budget of checks is shared: each source's priority first, the spare where items appear.

With ``--checks-per-day C``, a day grants each source some checks
(``grants``):

1. every source is granted its priority (``SourceState.priority``, its
   strategy's wish within its bounds); when those ask for ``C`` or more, that
   is the grant, and the day's plan shares ``C`` among them by tokens;
2. otherwise the spare is poured over the sources in proportion to the
   square root of their expected yield, items a day (``rate_estimate``), each
   up to its ``priority_max`` (water-filling: one level ``λ`` with
   ``grant = clamp(λ·√rate, priority, priority_max)`` and the grants adding
   up to ``C``).  Checks in proportion to √rate minimise the mean time from
   an item's arrival to its check, for Poisson arrivals and evenly spaced
   checks; an even share would spend most of the spare on quiet sources.

A source's rate is its recent new items over the time its checks covered,
each check weighted by recency (half-life ``RATE_HALF_LIFE_DAYS``), so a
source whose yield jumps is granted its new share within a day or two.  A
check's items arrived since the check before it: the first check in the
history, whose items piled up for an unknown time, counts for neither.  A
source with fewer than two checks has no rate yet; its priority (a new
source's ceiling) stands.

Settings: ``RATE_HALF_LIFE_DAYS`` (here).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from crawlstack.watch.sources import Source

DAY = 86_400.0
# Short enough that a source posting 10x faster is granted most of its new share at the next day's plan;
# a longer one (1 day) followed a jump more slowly and gained nothing in a simulated week's latency.
RATE_HALF_LIFE_DAYS = 0.5
# Bisection steps for the water level: 2^-40 of the range, far below a hundredth of a check.
_STEPS = 40


@dataclass(frozen=True)
class Check:
    """One check's result: when it ran and how many items it found that were new."""

    at: float
    new_items: int


def rate_estimate(history: Sequence[Check], now: float) -> float | None:
    """Items a day the checks in ``history`` (time order) saw arrive, recent ones weighing more; None under two."""
    if len(history) < 2:
        return None
    items = span = 0.0
    for before, check in itertools.pairwise(history):
        weight = 0.5 ** (max(0.0, now - check.at) / (RATE_HALF_LIFE_DAYS * DAY))
        items += weight * check.new_items
        span += weight * max(0.0, check.at - before.at)
    return items / span * DAY if span > 0 else None


def grants(
    sources: Sequence[Source], priorities: dict[str, float], rates: dict[str, float | None], budget: float
) -> dict[str, float]:
    """Checks for the day per source: its priority, and a share of the spare by √rate up to its ceiling."""
    floors = {s.id: min(priorities[s.id], s.priority_max) for s in sources}
    if sum(floors.values()) >= budget:
        return floors
    ceilings = {s.id: s.priority_max for s in sources}
    if sum(ceilings.values()) <= budget:
        return ceilings
    ids = list(floors)
    low_of = [floors[sid] for sid in ids]
    high_of = [ceilings[sid] for sid in ids]
    weight_of = [math.sqrt(rate) if (rate := rates.get(sid)) else 0.0 for sid in ids]

    def total(level: float) -> float:
        return sum(min(h, max(lo, level * w)) for lo, h, w in zip(low_of, high_of, weight_of, strict=True))

    positive = [w for w in weight_of if w > 0]
    if not positive:
        return floors
    low, high = 0.0, max(high_of) / min(positive)
    if total(high) < budget:
        level = high  # the sources with a rate are all at their ceilings: the rest keep their priority
    else:
        for _ in range(_STEPS):
            middle = (low + high) / 2
            low, high = (middle, high) if total(middle) < budget else (low, middle)
        level = low
    return {sid: min(h, max(lo, level * w)) for sid, lo, h, w in zip(ids, low_of, high_of, weight_of, strict=True)}
