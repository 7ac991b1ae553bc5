"""When each source is checked: seed 003's token bucket, seed 004's velocity, and even spacing per host.

Every source has a **priority**, in checks a day, between its floor and
ceiling (``Source.priority_min``/``priority_max``), and a bucket of
**tokens**.  Each day (``plan_day``):

1. every source gains its priority in tokens (``accrue``), so a quiet
   source still earns a check now and then; with a budget of checks a day,
   its grant instead (``budget.grants``: the priorities, and what they leave
   of the budget by √rate);  a new source starts with no tokens, and its
   first day holds at least one check;
2. each whole token is a check due today, up to the source's ceiling
   (``priority_max``, rounded up: ``most_checks``); when the sources ask
   for more than the day's budget, the ones holding more tokens go first,
   one check at a time, so the budget is shared rather than spent on the
   richest;
3. what a source did not spend is banked for the next day, at most a day
   of its ceiling (``bank_cap``): checks a budget held back for a month
   are not all made up at once;
4. each host's checks are spread evenly over the next 24 hours
   (``spread``), and one source's repeated checks are spaced as far apart
   as the host's other checks allow.

After a check (``priority_after``) the priority follows yield:

* ``tokens``: the new items per check over the last ``HISTORY`` checks,
  each weighted by recency (half-life ``HALF_LIFE_DAYS``), so a source that
  starts posting rises and one that stops sinks by a matching amount;
* ``velocity``: the items per day the last checks saw (items ÷ timespan),
  over ``ITEMS_PER_CHECK``: the rate of checks that would each find about
  that many.

Both are clamped to the source's bounds.  Nothing here reads a clock or a
store: time is passed in (simulated time in a simulation).

A source added after the day was planned gets one check soon
(``first_checks``), and joins the daily plan from the next day.

Settings: ``HISTORY``, ``HALF_LIFE_DAYS``, ``ITEMS_PER_CHECK``, ``DAY``,
``FIRST_CHECKS_SPAN`` (here).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from crawlstack.urls import host_of
from crawlstack.watch.grants import Check, grants, rate_estimate
from crawlstack.watch.sources import Source

DAY = 86_400.0
# New sources' first checks are spread over at most this long (the rest of the day, if less).
FIRST_CHECKS_SPAN = 3600.0
HISTORY = 30
# When the priorities ask for the whole budget they are the grants, so they must follow a jump in yield
# too: in a model of the watch bench's week whose budget binds in its second half (rates 0.5-50 a day),
# 2 days cut the median detection latency by 2% against 7, and 1 day little more, with noisier priorities.
HALF_LIFE_DAYS = 2.0
ITEMS_PER_CHECK = 1.0


@dataclass(frozen=True)
class SourceState:
    """What scheduling knows of a source between checks."""

    priority: float
    tokens: float
    history: tuple[Check, ...] = ()

    @classmethod
    def first(cls, source: Source) -> SourceState:
        """A new source starts at its ceiling, with no tokens: its first day's grant is its ceiling, once."""
        return cls(source.priority_max, 0.0)


@dataclass(frozen=True, order=True)
class PlannedCheck:
    at: float
    source_id: str = field(compare=True)
    host: str = field(compare=False)


def accrue(state: SourceState, grant: float | None = None) -> SourceState:
    """A day's tokens: its grant (without a budget, the priority), added whether or not the source was checked."""
    return replace(state, tokens=state.tokens + (state.priority if grant is None else grant))


def most_checks(source: Source) -> int:
    """The most checks of ``source`` a day plans: its ceiling, rounded up (a ceiling of 1.75 averages 1.75 a day)."""
    return math.ceil(source.priority_max)


def bank_cap(source: Source) -> float:
    """The most tokens ``source`` carries to the next day: a day of its ceiling (one, for a ceiling under one).

    A source that earns its ceiling carries less than a token from day to
    day, so the cap only trims what a budget held back.
    """
    return max(source.priority_max, 1.0)


def due_checks(
    states: dict[str, SourceState], budget: int | None, most: dict[str, int] | None = None
) -> dict[str, int]:
    """Checks per source for the day: a whole token each, up to ``most``; the budget goes to the most tokens first."""
    heap = [(-state.tokens, source_id) for source_id, state in states.items() if state.tokens >= 1.0]
    heapq.heapify(heap)
    due: dict[str, int] = {}
    given = 0
    while heap and (budget is None or given < budget):
        negative, source_id = heapq.heappop(heap)
        due[source_id] = due.get(source_id, 0) + 1
        given += 1
        if -negative - 1.0 >= 1.0 and (most is None or due[source_id] < most[source_id]):
            heapq.heappush(heap, (negative + 1.0, source_id))
    return due


def spread(due: dict[str, int], hosts: dict[str, str], start: float, span: float = DAY) -> list[PlannedCheck]:
    """Each host's checks at even intervals over ``[start, start + span)``, a source's repeats far apart.

    A check of a source with ``k`` checks takes its ``j``-th place at the
    fraction ``(j + 0.5) / k`` of the day; the host's checks are ordered by
    that place and given the host's even slots in order, so a source's
    repeats sit about ``span / k`` apart and the host's checks ``span / n``.
    """
    by_host: dict[str, list[tuple[float, str]]] = {}
    for source_id, count in due.items():
        for j in range(count):
            by_host.setdefault(hosts[source_id], []).append(((j + 0.5) / count, source_id))
    planned: list[PlannedCheck] = []
    for host, checks in by_host.items():
        checks.sort()
        step = span / len(checks)
        planned.extend(PlannedCheck(start + (i + 0.5) * step, sid, host) for i, (_, sid) in enumerate(checks))
    planned.sort()
    return planned


def plan_day(
    sources: Sequence[Source], states: dict[str, SourceState], start: float, budget: int | None
) -> tuple[list[PlannedCheck], dict[str, SourceState]]:
    """The day's checks from ``start`` and the sources' states after accrual and spending.

    Without a budget each source earns its priority; with one, its grant
    (``budget.grants``: the priorities, and the spare by √rate).
    """
    current = {s.id: states.get(s.id) or SourceState.first(s) for s in sources}
    granted: dict[str, float | None] = dict.fromkeys(current)
    if budget is not None:
        rates = {sid: rate_estimate(state.history, start) for sid, state in current.items()}
        priorities = {sid: state.priority for sid, state in current.items()}
        granted = {**granted, **grants(sources, priorities, rates, budget)}
    accrued = {sid: accrue(state, granted[sid]) for sid, state in current.items()}
    for source in sources:  # a source's first day holds its first check, whatever its ceiling
        if source.id not in states:
            accrued[source.id] = replace(accrued[source.id], tokens=max(1.0, accrued[source.id].tokens))
    due = due_checks(accrued, budget, {s.id: most_checks(s) for s in sources})
    caps = {s.id: bank_cap(s) for s in sources}
    spent = {
        sid: replace(state, tokens=min(state.tokens - due.get(sid, 0), caps[sid])) for sid, state in accrued.items()
    }
    hosts = {s.id: host_of(s.url) for s in sources}
    return spread(due, hosts, start), spent


def first_checks(
    sources: Sequence[Source], start: float, span: float = FIRST_CHECKS_SPAN
) -> tuple[list[PlannedCheck], dict[str, SourceState]]:
    """Sources added since the day was planned: a first check each, soon, rather than at the next day's plan.

    A host's new sources are spread evenly over ``[start, start + span)``;
    each starts from its first state and joins the daily plan from the next
    day.  These checks are outside the day's budget, and spend no token.
    """
    hosts = {s.id: host_of(s.url) for s in sources}
    states = {s.id: SourceState.first(s) for s in sources}
    return spread({s.id: 1 for s in sources}, hosts, start, span), states


def priority_after(source: Source, state: SourceState, check: Check) -> SourceState:
    """The state once ``check`` is known: its history, and its priority by the source's strategy."""
    # Checks may end out of order (a slow page): the history is kept in time order.
    history = tuple(sorted((*state.history, check), key=lambda c: c.at))[-HISTORY:]
    wanted = _velocity(history) if source.strategy == "velocity" else _weighted_yield(history, check.at)
    return replace(state, history=history, priority=_clamp(wanted, source.priority_min, source.priority_max))


def check_ended(source: Source, at: float) -> Callable[[SourceState, int], SourceState]:
    """The change a check of ``source`` that ended at ``at`` makes, given its new items (``priority_after``)."""
    return lambda state, found: priority_after(source, state, Check(at, found))


def _weighted_yield(history: Iterable[Check], now: float) -> float:
    """New items per check, each check weighted by 2^(-age / half-life)."""
    weights = [(0.5 ** (max(0.0, now - c.at) / (HALF_LIFE_DAYS * DAY)), c.new_items) for c in history]
    total = sum(w for w, _ in weights)
    return sum(w * n for w, n in weights) / total if total else 0.0


def _velocity(history: Sequence[Check]) -> float:
    """Checks a day that would each find about ``ITEMS_PER_CHECK``: items ÷ timespan of the history."""
    if len(history) < 2:
        return math.inf if history and history[-1].new_items else 0.0
    span = history[-1].at - history[0].at
    items = sum(c.new_items for c in history[1:])  # the first check's items came before the span
    return math.inf if span <= 0 else items / (span / DAY) / ITEMS_PER_CHECK


def _clamp(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))
