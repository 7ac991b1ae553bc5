"""One tick of a watch's scheduler: plan the day when the last is over, send the checks that fell due, settle old ones.

The same tick runs locally (``crawlstack.local.watch``, on each turn of the
event pump) and deployed (``functions/schedule``, each minute from
EventBridge Scheduler), each on its own ``PlanStore``:

1. when the planned day is over (or none was planned), ``plan_day`` draws
   the next one from every source's state: the day's checks, and the tokens
   they spend, go to the store together (``PlanStore.plan``); a source added
   since gets its first check within ``FIRST_CHECKS_SPAN`` (``plan_first``);
2. the checks that are due are claimed (``claim_due``: a conditional write
   each where several schedulers could run), sent to the frontier as
   ``CheckRef`` messages with the source's last validators, then marked
   sent, a message batch at a time and at most ``max_sends`` a tick;
3. checks sent ``stale_seconds`` ago that no extract ended (robots.txt said
   no, the fetch failed) end with what their pages found (``settle``).

A due check found more than ``late_after`` late (the scheduler was down, a
resumed watch, a stall) re-spreads the rest of the day from now to the
day's end (``plan_clock.PlanClock.respread``): the plan's times are read
through a clock the store keeps, so a host's checks keep their order and
even spacing instead of going out back to back, and only that clock is
written, whatever the number of checks planned.

A claimed check whose send failed stays claimed; the store claims it again
once the claim is old, so a check is never lost; dispatch keys a check's
page by its slot, so one sent twice is fetched once.

Settings: ``budget`` (checks a day for all sources; None: no budget),
``stale_seconds``, ``late_after`` and ``max_sends``, passed in by the
caller; ``SEND_CHUNK`` (here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from crawlstack import settings
from crawlstack.fetch.crawllog import iso_time
from crawlstack.messages import CheckRef, FrontierMessage
from crawlstack.watch.check import Validators
from crawlstack.watch.pages import WATCH_CRAWL_ID
from crawlstack.watch.plan_clock import PlanClock
from crawlstack.watch.schedule import DAY, FIRST_CHECKS_SPAN, SourceState, check_ended, first_checks, plan_day
from crawlstack.watch.sources import Source

Planned = tuple[str, float]  # (source id, time)
# Checks claimed, sent and marked together: one SQS batch.
SEND_CHUNK = settings.SQS_BATCH_SIZE
# Checks one tick sends at most: a backlog (a scheduler that was down) goes out over several minutes.
MAX_SENDS_PER_TICK = 2000


class SourceList(Protocol):
    def list(self) -> list[Source]: ...

    def get(self, source_id: str) -> Source | None: ...


class PlanStore(Protocol):
    def day_end(self) -> float | None:
        """When the planned day ends (on the plan's clock); None before the first plan."""
        ...

    def plan_clock(self) -> PlanClock:
        """How the plan's times map to the watch's (``PlanClock()`` until a stall re-spread them)."""
        ...

    def move_plan_clock(self, old: PlanClock, new: PlanClock) -> bool:
        """Set the plan's clock to ``new``, unless it is no longer ``old`` (another scheduler moved it)."""
        ...

    def states(self) -> dict[str, tuple[SourceState, Validators | None]]: ...

    def validators(self, source_ids: Sequence[str]) -> dict[str, Validators]:
        """The last validators of those sources that have some."""
        ...

    def plan(
        self, checks: list[Planned], tokens: dict[str, float], first: dict[str, SourceState], day_end: float
    ) -> None:
        """Store a day's checks and apply each source's change of tokens, once, with the day's end."""
        ...

    def resume_plan(self) -> int | None:
        """Finish a plan whose planner died (its checks); 0 while another planner works; None when none is pending."""
        ...

    def unplanned(self) -> bool:
        """Whether a source may have been added since the day's plan (a cheap hint, read each tick)."""
        ...

    def plan_first(self, checks: list[Planned], states: dict[str, SourceState]) -> list[str]:
        """Each never-planned source's first checks and state (one planned meanwhile is left); the ones planned."""
        ...

    def claim_due(self, now: float, wall: float, limit: int | None = None) -> list[Planned]:
        """Claim up to ``limit`` checks due by ``now``, neither sent nor claimed lately, oldest first."""
        ...

    def mark_sent(self, checks: list[Planned], wall: float) -> None: ...

    def oldest_unsent(self, now: float, claimable_at: float | None = None) -> float | None:
        """The time of the oldest check due by ``now`` and still unsent (after this tick's sends).

        With ``claimable_at`` (wall time), only one that is not claimed by a
        sender that may still be sending it (``settings.WATCH_CLAIM_SECONDS``).
        """
        ...

    def settle(self, sent_before: float, slot: Callable[[float], str], end: Callable[[str, str], object]) -> int:
        """``end(source, slot)`` for each check sent (wall time) before ``sent_before`` and not settled yet."""
        ...

    def finish_check(
        self, source_id: str, slot: str, update: Callable[[SourceState, int], SourceState], first: SourceState
    ) -> bool: ...


@dataclass(frozen=True)
class Tick:
    """What one tick did."""

    planned: int = 0
    sent: int = 0
    settled: int = 0
    # Seconds the oldest due check had waited unsent, before this tick re-spread the plan or sent (0: none waited).
    oldest_due_age: float = 0.0
    # Seconds late the checks this tick re-spread were (0: none).
    moved: float = 0.0


def tick(
    sources: SourceList,
    store: PlanStore,
    send: Callable[[list[str]], object],
    now: float,
    wall: float,
    budget: int | None,
    stale_seconds: float,
    end: float | None = None,
    max_sends: int = MAX_SENDS_PER_TICK,
    late_after: float | None = None,
) -> Tick:
    """One turn of the scheduler at watch time ``now`` (wall time ``wall``); ``end``: a simulation's end.

    ``late_after``: a due check this late re-spreads the rest of the day (None: never).
    """
    clock = store.plan_clock()
    at = clock.planned(now)
    waited = moved = 0.0
    day_end = store.day_end()
    # A check held by a sender that died is not lateness to re-spread: the plan would wait for its claim.
    if late_after is not None and day_end is not None and (oldest := store.oldest_unsent(at, wall)) is not None:
        waited = max(0.0, now - clock.real(oldest))
        respread = clock.respread(oldest, now, day_end)
        if waited > late_after and store.move_plan_clock(clock, respread):
            moved, clock = waited, respread
            at = clock.planned(now)
    resumed = store.resume_plan()
    planned = resumed or 0
    if resumed is not None:  # a plan finished just now set the day's end
        day_end = store.day_end()
    running = end is None or now < end
    if resumed is None and running and (day_end is None or at >= day_end):
        # A scheduler down for over a day with nothing left to send starts afresh from now, not a day behind.
        start = at if day_end is None or at - day_end > DAY else day_end
        every = sources.list()
        if every:  # no empty day: a first source added later is planned at the next tick, not tomorrow
            planned = _plan(every, store, start, budget)
            if clock.rate != 1.0 and store.move_plan_clock(clock, clock.new_day(start)):
                clock = clock.new_day(start)
    elif resumed is None and day_end is not None and running and store.unplanned():
        planned = _plan_first(sources, store, at, day_end)
    last = None if end is None else clock.planned(end)  # a simulation's end, on the plan's clock
    due_by = at if last is None else min(at, last)
    sent = claimed = 0
    # A message batch at a time, each marked sent once it went: a failed send leaves only its own checks
    # claimed (sent again once the claim is old), and a backlog goes out over several ticks.
    while claimed < max_sends:
        due = store.claim_due(due_by, wall, SEND_CHUNK)
        if not due:
            break
        # Only the due sources are read: a tick's reads follow its checks, not the number of sources.
        ids = sorted({source_id for source_id, _ in due})
        found = {sid: source for sid in ids if (source := sources.get(sid)) is not None}
        bodies = check_messages(due, found, store.validators(ids))
        if bodies:
            send(bodies)
        store.mark_sent(due, wall)
        claimed += len(due)
        sent += len(bodies)  # a source removed since the plan has its check claimed, and none sent

    def end_check(source_id: str, slot: str) -> None:
        source = sources.get(source_id)
        if source is not None:
            done = clock.real(datetime.fromisoformat(slot).timestamp())
            store.finish_check(source_id, slot, check_ended(source, done), SourceState.first(source))

    settled = store.settle(wall - stale_seconds, iso_time, end_check)
    still = store.oldest_unsent(due_by)
    return Tick(planned, sent, settled, max(waited, now - clock.real(still) if still is not None else 0.0), moved)


def _plan(every: Sequence[Source], store: PlanStore, start: float, budget: int | None) -> int:
    states = {sid: st for sid, (st, _) in store.states().items()}
    first = {s.id: SourceState.first(s) for s in every}
    planned, spent = plan_day(every, states, start, budget)
    change = {sid: st.tokens - (states.get(sid) or first[sid]).tokens for sid, st in spent.items()}
    store.plan([(p.source_id, p.at) for p in planned], change, first, start + DAY)
    return len(planned)


def _plan_first(sources: SourceList, store: PlanStore, now: float, day_end: float) -> int:
    known = store.states()
    new = [s for s in sources.list() if s.id not in known]
    checks, states = first_checks(new, now, max(60.0, min(FIRST_CHECKS_SPAN, day_end - now)))
    store.plan_first([(p.source_id, p.at) for p in checks], states)
    return len(checks)


def check_messages(due: Sequence[Planned], sources: dict[str, Source], validators: dict[str, Validators]) -> list[str]:
    """The frontier messages of checks due: each source's first page, with its last validators."""
    bodies = []
    for source_id, at in due:
        source = sources.get(source_id)
        if source is None:
            continue  # removed since the plan
        known = validators.get(source_id) or Validators()
        check = CheckRef(source.id, iso_time(at), 1, known.etag, known.last_modified, known.highest_id)
        bodies.append(FrontierMessage(source.url, 0, WATCH_CRAWL_ID, check=check).to_json())
    return bodies
