"""Per-host politeness: slots, windows, claims and parking.

Every host has one state item, updated only with conditional writes, so
every dispatcher and fetcher in every Lambda sees the same schedule:

* ``next_slot``: when the next request may start.  Dispatch reserves a slot
  per URL (start = max(now, next_slot, ``host_free_floor``), next_slot =
  start + delay) and the fetch message waits in SQS for the whole seconds
  (``DelaySeconds``); the fetcher sleeps the sub-second remainder.
* ``window``: the ``crawl_id#fingerprint`` of the host's URLs currently in the
  fetch queue (``window_key``: crawls share hosts, not URLs).
  It holds at most ``delayed_window(delay)`` when the delay is above 0
  (``DELAYED_HOST_WINDOW``, fewer where that many slots would reach past
  SQS's delay limit) or ``host_concurrency`` when it is 0.  A URL that finds the window full is
  parked in the parked table; each fetch that leaves the window unparks the
  next.  The fetch queue therefore never holds more than a few URLs per
  host, whatever the backlog: SQS's 15-minute delay limit is never reached
  and queue operations per URL stay constant.
* ``free_at``: a fetcher claims the host (free_at <= now) before each
  request and sets free_at = max(start + delay, end) after it, so requests
  to a host with a delay never overlap and never start closer than the
  delay (start to start, as Scrapy's download delay), even when a slot was
  reached late.  After a 429 or 503 the slowed delay counts from the end.
  ``free_at`` only ever moves later, so a container remembers the last one
  it wrote or was refused with, and waits for it without a claim the state
  would refuse (a failed condition costs a write unit like a success).
* ``parked_at``: set when a URL is parked, and only while the window is
  full, so a release still to come will see it and look in the parked
  table; removed (conditionally on its value) when that finds nothing.
  A flag rather than a count: nothing to drift under redelivery.

* ``adaptive_delay``: the host's slowed-down delay, absent while it is not
  slowed.  A 429 or 503 response (``release(slow_down=True)``) sets it to
  ``ADAPTIVE_DELAY_FACTOR`` times the effective delay, once per burst (not
  again for a request whose slot was reserved before the last slowdown: it
  was sent at the old pace), (at least
  ``ADAPTIVE_DELAY_FLOOR_SECONDS``, so a host crawled with no delay gets one;
  at most ``MAX_CRAWL_DELAY_SECONDS``), before the host is released, so the
  next claim already waits the new delay.  Every success
  (``release(succeeded=True)``) multiplies it by ``ADAPTIVE_DELAY_RECOVERY``;
  once that reaches the crawl's own delay or falls below
  ``ADAPTIVE_DELAY_MIN_SECONDS`` it is removed.  The effective delay of a task is max(its crawl's delay,
  ``adaptive_delay``): slots are spaced by it (a reservation's condition
  includes the adaptive delay it was computed with, so no container reserves
  with a stale one), claims and releases use it, and a slowed host's window
  shrinks to the delayed window of its effective delay.  One number per host, shared by every
  crawl on it.  Updates are conditional on the value read, so a slowdown is
  never lost to a concurrent recovery (a recovery that loses is skipped).

A task's ``not_before`` is a floor on its slot: a retry (``crawlstack.fetcher``)
is admitted with its backoff's end there and takes the first slot at or after
it, so the host's later URLs queue behind it and the delay still holds.

Settings: ``settings.DELAYED_HOST_WINDOW``, ``DEFAULT_HOST_CONCURRENCY``,
``MAX_SQS_DELAY_SECONDS``, ``TOTAL_DEADLINE_SECONDS``, ``MAX_CRAWL_DELAY_SECONDS``,
``ADAPTIVE_DELAY_FACTOR``, ``ADAPTIVE_DELAY_FLOOR_SECONDS``, ``ADAPTIVE_DELAY_RECOVERY``,
``ADAPTIVE_DELAY_MIN_SECONDS``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from crawlstack import settings
from crawlstack.messages import FetchTask

SUB_SECOND = 1.0
# How long a claim holds a host if its fetcher dies before releasing it.
CLAIM_LEASE_SECONDS = settings.TOTAL_DEADLINE_SECONDS + 30
IN_FLIGHT_POLL_SECONDS = 0.05
# A parked row taken this long ago by an unparker that never deleted it
# (it died before sending) may be taken again.
UNPARK_STALE_SECONDS = 120.0
UNPARK_ROUNDS = 4
# Rows a release's unpark looks at first: the one place it freed, and one to see whether more wait.
FIRST_PEEK = 2
UNPARK_LOCK_STRIPES = 64
# Parked rows one read fetches, and how long a container uses the ones it has
# not tried yet: a release unparks one or two, and a query costs what it reads
# (in the emulator, moto reads the host's whole partition for each).
PEEK_AHEAD = 16
PEEK_CACHE_SECONDS = 2.0
# Hosts whose last written state a container remembers.
KNOWN_HOSTS_LIMIT = 50_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostSlot:
    host: str
    exists: bool = False
    next_slot: float = 0.0
    free_at: float = 0.0
    busy: bool = False
    window: frozenset[str] = field(default_factory=frozenset)
    parked_at: float | None = None
    # The host's slowed-down delay (0: not slowed).
    adaptive_delay: float = 0.0


@dataclass(frozen=True)
class Blocked:
    """Why a claim failed: the host is spaced until ``free_at``, or a request is in flight."""

    free_at: float
    in_flight: bool


class HostSlots(Protocol):
    def read_slot(self, host: str) -> HostSlot: ...
    def reserve(
        self, host: str, fp: str, expected: HostSlot, new_next: float | None, window: int
    ) -> HostSlot | None: ...
    def mark_parked(self, host: str, window: int, stamp: float) -> bool: ...
    def clear_parked(self, host: str, stamp: float) -> None: ...
    def claim(self, host: str, now: float, lease_until: float) -> Blocked | None: ...
    def release(self, host: str, fp: str, free_at: float | None) -> HostSlot: ...
    def set_adaptive(self, host: str, expected: float, adaptive: float | None) -> HostSlot | None: ...


class Parking(Protocol):
    def put(self, host: str, order: str, body: str) -> None: ...
    def peek(self, host: str, limit: int, untaken_since: float | None = None) -> list[tuple[str, str]]: ...
    def take(self, host: str, order: str, stamp: float, stale_before: float) -> bool: ...
    def exists(self, host: str, order: str) -> bool: ...
    def untake(self, host: str, order: str, stamp: float) -> None: ...
    def delete(self, host: str, order: str) -> None: ...


def delayed_window(delay: float) -> int:
    """A delayed host's window: ``DELAYED_HOST_WINDOW``, or fewer (never under 2) when that many slots
    would reach past SQS's delay limit (a long Crawl-delay, or a host slowed down)."""
    fits = int(settings.MAX_SQS_DELAY_SECONDS // delay) if delay > 0 else settings.DELAYED_HOST_WINDOW
    return max(2, min(settings.DELAYED_HOST_WINDOW, fits))


def window_size(delay: float, host_concurrency: int) -> int:
    return delayed_window(delay) if delay > 0 else max(1, host_concurrency)


def effective_delay(task: FetchTask, state: HostSlot) -> float:
    """The task's crawl delay, or the host's adaptive delay when that is longer."""
    return max(task.delay, state.adaptive_delay)


def effective_window(task: FetchTask, state: HostSlot) -> int:
    """The task's window, shrunk to the delayed window of the host's effective delay while it is slowed down."""
    delay = effective_delay(task, state)
    if delay > 0:
        return min(task.window, delayed_window(delay))
    return task.window


def slowed_delay(task: FetchTask, state: HostSlot) -> float:
    """The adaptive delay after a 429 or 503: the effective delay times the factor, within floor and cap."""
    grown = effective_delay(task, state) * settings.ADAPTIVE_DELAY_FACTOR
    return min(settings.MAX_CRAWL_DELAY_SECONDS, max(settings.ADAPTIVE_DELAY_FLOOR_SECONDS, grown))


def recovered_delay(task: FetchTask, state: HostSlot) -> float | None:
    """The adaptive delay after a success; None once it is back at the crawl's delay (or below the minimum).

    Not stopped at the floor: from the floor, one success would end the
    slowdown of a host crawled with no delay, and the next burst overload it.
    """
    shrunk = state.adaptive_delay * settings.ADAPTIVE_DELAY_RECOVERY
    if shrunk <= task.delay or shrunk < settings.ADAPTIVE_DELAY_MIN_SECONDS:
        return None
    return shrunk


def sqs_delay(not_before: float, now: float) -> int:
    """Whole seconds a message should wait in SQS; the fetcher sleeps the rest."""
    return max(0, min(settings.MAX_SQS_DELAY_SECONDS, math.floor(not_before - now)))


def host_free_floor(state: HostSlot, now: float, delay: float) -> float:
    """The earliest a new slot can find the host free: spaced requests take their time, slots do not.

    Slots are spaced by the delay alone, but a request frees the host only a
    delay after it started and not before it ended, so with a slow host (or a
    backlog unparked late) the
    next slot would come before the host is free and the task would go round
    the fetch queue again, two or three times per URL at 5 s and 0.5 s a
    request.  Each URL already in the window takes at least a delay more; a
    request in flight (``busy``: ``free_at`` is only its lease) frees the host
    no sooner than a delay from now.  A stale state gives an earlier floor,
    never a later one; the claim still decides.
    """
    if delay <= 0:
        return 0.0
    if state.busy:
        return now + delay * max(1, len(state.window))
    return state.free_at + delay * len(state.window)


def window_key(task: FetchTask) -> str:
    """The task's entry in its host's window: per crawl, since crawls share hosts but not URLs.

    Two crawls may reach the same URL (the same fingerprint) on one host; each
    fetches it once, so each holds its own place in the window.
    """
    return f"{task.crawl_id}#{task.fp}"


def park_order(task: FetchTask) -> str:
    # Shallow URLs first (breadth-first per host, across crawls); deterministic,
    # so a redelivered message parks onto the same item instead of a second one;
    # with the crawl id, so two crawls parking one URL keep a row each.
    return f"{task.depth:04d}#{task.crawl_id}#{task.fp}"


class Contention(RuntimeError):
    """The host's state kept changing under us; try the message again later."""


@dataclass
class Politeness:
    hosts: HostSlots
    parking: Parking
    clock: Callable[[], float] = time.time
    _known: dict[str, HostSlot] = field(default_factory=dict, repr=False)
    # Per host: when this container read parked rows ahead, and those it has not tried yet.
    _peeked: dict[str, tuple[float, list[tuple[str, str]]]] = field(default_factory=dict, repr=False)
    _unpark_locks: tuple[threading.Lock, ...] = field(
        default_factory=lambda: tuple(threading.Lock() for _ in range(UNPARK_LOCK_STRIPES)), repr=False
    )
    # Per host: the earliest a claim can succeed, as this container last saw it
    # (its own release, or a failed claim's reply).  ``free_at`` only moves
    # later while a host is crawled, so this is a floor, never too late.
    _free_floor: dict[str, float] = field(default_factory=dict, repr=False)
    # Hosts this container holds a claim on (when it was taken): its other
    # tasks of the host wait for the release instead of a claim bound to fail.
    _held_here: dict[str, float] = field(default_factory=dict, repr=False)
    _held_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def admit(
        self,
        task: FetchTask,
        hold: Callable[[FetchTask], bool] | None = None,
        stopped: Callable[[FetchTask], bool] | None = None,
    ) -> list[tuple[str | None, FetchTask]]:
        """Give the task a slot in the host's window, or park it.

        Returns (parked order or None, task) pairs to send to the fetch queue
        now: the task itself with ``not_before`` set, or nothing when it was
        parked, or (rarely) tasks unparked because the window emptied while
        parking.  Send them, then call ``unparked`` with the orders.
        ``hold`` and ``stopped`` go to that ``unpark``.
        """
        # The state this container last wrote is a good guess at the current
        # one: the conditional write checks it, and a stale guess costs only
        # the retry that a fresh read would have cost up front.
        known = self._known.get(task.host)
        state = known if known is not None else self.hosts.read_slot(task.host)
        fresh = known is None
        key = window_key(task)
        for _ in range(16):
            if key in state.window and not fresh:
                state, fresh = self.hosts.read_slot(task.host), True
                continue
            if key in state.window:
                # Admitted by an earlier delivery of this message that may have
                # died before sending it: send it again.  The fetcher's claim
                # keeps the spacing and its outcome check drops a duplicate.
                again = max(self.clock(), state.free_at, task.not_before)
                return [(None, replace(task, not_before=again, adaptive_delay=state.adaptive_delay))]
            window = effective_window(task, state)
            if len(state.window) >= window:
                # URLs this container parked wait already: the new one queues
                # behind them without a read.  Parking on a stale guess is
                # safe: the flag is only set while the window is full, and
                # otherwise the URL is unparked at once.
                if not fresh and state.parked_at is None:
                    state, fresh = self.hosts.read_slot(task.host), True
                    continue
                self._known.pop(task.host, None)
                self.parking.put(task.host, park_order(task), task.to_json())
                stamp = self.clock()
                if self.hosts.mark_parked(task.host, window, stamp):
                    self._remember(replace(state, parked_at=stamp, busy=False, free_at=0.0))
                    return []
                return list(self.unpark(task.host, hold, stopped=stopped))
            reserved, state = self._reserve(task, state, window)
            if reserved is not None:
                return [(None, reserved)]
            fresh = True
        raise Contention(f"host {task.host}: politeness state kept changing")

    def _remember(self, state: HostSlot) -> None:
        if len(self._known) >= KNOWN_HOSTS_LIMIT:
            self._known.clear()
        self._known[state.host] = state

    def unpark(
        self,
        host: str,
        hold: Callable[[FetchTask], bool] | None = None,
        state: HostSlot | None = None,
        stopped: Callable[[FetchTask], bool] | None = None,
    ) -> list[tuple[str | None, FetchTask]]:
        # One unparker per host at a time in this container: a fetch batch's
        # requests end together, and their unparkers would all try the same
        # first rows (a failed take is a write unit like any other).
        with self._unpark_locks[hash(host) % len(self._unpark_locks)]:
            return self._unpark(host, hold, state, stopped)

    def _unpark(
        self,
        host: str,
        hold: Callable[[FetchTask], bool] | None,
        state: HostSlot | None,
        stopped: Callable[[FetchTask], bool] | None,
    ) -> list[tuple[str | None, FetchTask]]:
        """Move parked URLs of ``host`` into its window, oldest first.

        Returns (order, task) pairs.  The caller sends the tasks, then calls
        ``unparked`` so a crash in between leaves them parked, never lost.
        Each row's place in the window is reserved first and the row then
        taken with a conditional write, so concurrent unparkers never send one
        URL twice: a row whose place is reserved already is sent by whoever
        takes it, and a place reserved for a row that another unparker sent
        and deleted meanwhile is given back.  A row taken by an unparker that
        died is taken again once the take is ``UNPARK_STALE_SECONDS`` old, and
        sent again even though its URL already holds a place in the window.
        Whenever URLs stay parked behind a full window, the ``parked_at`` flag
        is left set, so a later release comes back for them.

        ``hold``: called with each taken row's task before it gets a slot; when
        it returns True (its crawl is stopped and the task is held,
        ``crawlstack.jobs``) the row is deleted and the place goes to the next
        row, so a stopped crawl's backlog spends none of the host's slots.
        ``stopped``: whether a task's crawl is stopped (a cached read), so
        that the rows of running crawls reserve their place before they are
        taken; without it every row is taken first, for ``hold`` to see.

        ``state``: the host's state as a write just returned it (a release):
        the first round then reads no state and tries no more rows than the
        place a release frees (``FIRST_PEEK``; rows come from the container's
        read-ahead, ``_peek``), and a later round is only needed when more
        places were free.
        """
        out: list[tuple[str | None, FetchTask]] = []
        limit = FIRST_PEEK if state is not None else settings.DEFAULT_HOST_CONCURRENCY
        for _ in range(UNPARK_ROUNDS):
            if state is None:
                state = self.hosts.read_slot(host)
            rows = self._peek(host, limit)
            if not rows:
                # Rows other unparkers hold keep the flag: one that cannot
                # place its row gives it back and flags the host again.
                if state.parked_at is not None and not self.parking.peek(host, limit=1):
                    self.hosts.clear_parked(host, state.parked_at)
                return out
            left_behind: FetchTask | None = None
            for order, body in rows:
                task = FetchTask.from_json(body)
                key = window_key(task)
                now = self.clock()
                in_window = key in state.window
                # A task that may be held is taken first: a slot reserved for
                # it would spend the host's time on a stopped crawl.
                may_hold = hold is not None and (stopped is None or stopped(task))
                reserved: FetchTask | None = None
                if not in_window and not may_hold:
                    # The place first, then the row: a window found full (by a
                    # state gone stale while this waited for the lock) costs a
                    # refused reservation, not a take given back as well.
                    reserved, state = self._reserve_parked(host, task, state)
                    if reserved is None:
                        if key not in state.window:
                            left_behind = task
                            break
                        in_window = True
                elif not in_window and len(state.window) >= effective_window(task, state):
                    left_behind = task
                    break
                self._forget_row(host, order)
                if not self.parking.take(host, order, now, now - UNPARK_STALE_SECONDS):
                    if reserved is not None and not self.parking.exists(host, order):
                        # Sent and deleted by another unparker since this one
                        # read it: nobody will send it into the place reserved.
                        state = self.leave(task)
                        continue
                    # Another unparker holds the row and sends it (a place
                    # reserved for it here is its place in the window).
                    left_behind = left_behind or task
                    continue
                if reserved is None and not in_window:
                    if hold is not None and hold(task):
                        self.parking.delete(host, order)
                        continue
                    reserved, state = self._reserve_parked(host, task, state)
                    if reserved is None and key not in state.window:
                        self.parking.untake(host, order, now)
                        left_behind = task
                        break
                    in_window = reserved is None
                if in_window:
                    # An unparker that reserved its place died before sending
                    # it, or is about to lose the take to this one.
                    again = max(now, state.free_at, task.not_before)
                    out.append((order, replace(task, not_before=again, adaptive_delay=state.adaptive_delay)))
                    continue
                assert reserved is not None
                out.append((order, reserved))
            if left_behind is None and len(rows) < limit:
                return out
            # URLs remain parked: flag it while the window is full, so that
            # some release still to come looks again; if the window has room
            # after all, go round once more.  A flag that the state (returned
            # by our own last write) shows set stands: only an unparker that
            # finds no rows clears it, and the rows left behind are there.
            cap = effective_window(left_behind or FetchTask.from_json(rows[-1][1]), state)
            if state.parked_at is not None and len(state.window) >= cap:
                return out
            if self.hosts.mark_parked(host, cap, self.clock()):
                return out
            state, limit = None, settings.DEFAULT_HOST_CONCURRENCY
        return out

    def _peek(self, host: str, limit: int) -> list[tuple[str, str]]:
        """The host's first ``limit`` untaken rows: from the rows this container read ahead, else a read.

        A read fetches ``PEEK_AHEAD`` rows and keeps the rest for the next
        unparks of the host here (for ``PEEK_CACHE_SECONDS``): a row another
        container took meanwhile only fails its take, as it would have
        anyway.  A read is what decides that no rows are left.
        """
        now = self.clock()
        cached = self._peeked.get(host)
        if cached is not None and now - cached[0] < PEEK_CACHE_SECONDS and len(cached[1]) >= limit:
            return cached[1][:limit]
        rows = self.parking.peek(host, limit=max(limit, PEEK_AHEAD), untaken_since=now - UNPARK_STALE_SECONDS)
        if len(self._peeked) >= KNOWN_HOSTS_LIMIT:
            self._peeked.clear()
        self._peeked[host] = (now, list(rows))
        return rows[:limit]

    def _forget_row(self, host: str, order: str) -> None:
        cached = self._peeked.get(host)
        if cached is not None:
            cached[1][:] = [row for row in cached[1] if row[0] != order]

    def _reserve_parked(self, host: str, task: FetchTask, state: HostSlot) -> tuple[FetchTask | None, HostSlot]:
        """Reserve a slot for a parked task; (None, state) when the window is full or holds the task already."""
        for _ in range(16):
            window = effective_window(task, state)
            if len(state.window) >= window or window_key(task) in state.window:
                return None, state
            reserved, state = self._reserve(task, state, window)
            if reserved is not None:
                return reserved, state
        raise Contention(f"host {host}: politeness state kept changing")

    def _reserve(self, task: FetchTask, state: HostSlot, window: int) -> tuple[FetchTask | None, HostSlot]:
        """One try at the first slot at or after ``task.not_before``, spaced by the effective delay.

        (the task with its slot, the new state), or (None, the current state)
        when next_slot or the adaptive delay were no longer what ``state`` says.
        """
        now = self.clock()
        delay = effective_delay(task, state)
        start = max(now, state.next_slot, task.not_before, host_free_floor(state, now, delay))
        # No delay, no schedule to keep: only the window bounds the host's requests.
        nxt = start + delay if delay > 0 else None
        key = window_key(task)
        conflict = self.hosts.reserve(task.host, key, state, nxt, window)
        if conflict is not None:
            return None, conflict
        kept = state.next_slot if nxt is None else nxt
        new = replace(state, exists=True, next_slot=kept, window=state.window | {key})
        # Remembered without the claim fields, which change without this
        # container: from memory the floor is never later than it should be.
        self._remember(replace(new, busy=False, free_at=0.0))
        return replace(task, not_before=start, adaptive_delay=state.adaptive_delay), new

    def unparked(self, host: str, orders: list[str | None]) -> None:
        """Delete parked items once their tasks are in the fetch queue."""
        for order in orders:
            if order is not None:
                self.parking.delete(host, order)

    def claim(self, task: FetchTask, at: float | None = None) -> float:
        """Claim the host for a request that starts at ``at`` (now if None): 0 when claimed, else seconds to wait.

        A claim a little ahead of the request (``fetcher.CLAIM_LEAD_SECONDS``)
        takes its write off the request's path; the caller then holds the
        host and must not start before ``at``, which the host's ``free_at``
        does not pass (the condition).  While another request to the host is
        in flight its end is unknown (the stored free_at is only a lease
        against a crashed fetcher), so the wait is one delay: the least it
        can take before the host is free again; a request this container
        has in flight is waited for a poll at a time, without a write (its
        release gives the floor).
        """
        delay = task.effective_delay
        if delay <= 0:
            return 0.0
        now = self.clock()
        start = now if at is None else max(now, at)
        # A claim the host's state is known to refuse would cost a write
        # unit for nothing: wait for the floor first.
        floor = self._free_floor.get(task.host, 0.0)
        if floor > start:
            return floor - now
        # Marked as held before the write goes out, so this container's other
        # tasks of the host wait for it instead of claiming at the same moment
        # (one of the two writes would be refused: a write unit for nothing).
        with self._held_lock:
            if now - self._held_here.get(task.host, -CLAIM_LEASE_SECONDS) < CLAIM_LEASE_SECONDS:
                return IN_FLIGHT_POLL_SECONDS
            if len(self._held_here) >= KNOWN_HOSTS_LIMIT:
                self._held_here.clear()
            self._held_here[task.host] = now
        try:
            blocked = self.hosts.claim(task.host, start, start + CLAIM_LEASE_SECONDS)
        except BaseException:
            self._unmark_held(task.host, now)
            raise
        if blocked is None:
            return 0.0
        self._unmark_held(task.host, now)
        if blocked.in_flight:
            return max(IN_FLIGHT_POLL_SECONDS, min(delay, blocked.free_at - now))
        self._note_free_at(task.host, blocked.free_at)
        return max(0.001, blocked.free_at - now)

    def _unmark_held(self, host: str, since: float) -> None:
        with self._held_lock:
            if self._held_here.get(host) == since:
                del self._held_here[host]

    def _note_free_at(self, host: str, free_at: float) -> None:
        if len(self._free_floor) >= KNOWN_HOSTS_LIMIT:
            self._free_floor.clear()
        self._free_floor[host] = free_at

    def release(
        self,
        task: FetchTask,
        finished_at: float,
        *,
        slow_down: bool = False,
        succeeded: bool = False,
        pause_until: float | None = None,
        responded_at: float | None = None,
    ) -> HostSlot:
        """Leave the window; with a delay, free the host ``delay`` after the request started.

        Requests start at least the delay apart, as slots are spaced (and as
        Scrapy's download delay counts), and never overlap: the host is not
        free before the request ended.  ``responded_at``: when the response
        began (the server had the request by then, so the next one reaches it
        at least the delay later).  Without it (no answer came), and after a
        429 or 503, the delay counts from the end.

        ``slow_down`` (a 429 or 503): first raise the host's adaptive delay, so
        the host is freed after the new, longer delay.  ``pause_until`` (a
        Retry-After): the host is not freed before then either.  ``succeeded``:
        one step of recovery of a slowed host's delay.  The window place is
        given back whatever happens to the adaptive delay, and a failure to
        change that is logged, not raised: raising would lose the response
        just fetched and cost the host the same request again later.
        """
        delay = task.effective_delay
        if slow_down:
            try:
                delay = max(delay, self._slow_down(task))
            except Exception as exc:
                log.warning("host %s: adaptive delay not raised: %s", task.host, exc)
        free_at = None
        if delay > 0:
            base = responded_at if responded_at and not slow_down else finished_at
            free_at = max(base + delay, finished_at, pause_until or 0.0)
        state = self.hosts.release(task.host, window_key(task), free_at)
        with self._held_lock:
            self._held_here.pop(task.host, None)
        if free_at is not None:
            self._note_free_at(task.host, free_at)
        if succeeded and state.adaptive_delay > 0:
            # A recovery that loses a race is skipped: the winner was another
            # recovery, or a slowdown that must stand.
            try:
                self.hosts.set_adaptive(task.host, state.adaptive_delay, recovered_delay(task, state))
            except Exception as exc:
                log.warning("host %s: adaptive delay not lowered: %s", task.host, exc)
        return state

    def _slow_down(self, task: FetchTask) -> float:
        """Raise the host's adaptive delay (conditionally on the value read); the new delay.

        Once per burst: if the host was slowed since this task's slot was
        reserved (``task.adaptive_delay`` is what it was then), the request
        was already under way at the old pace and its 429 or 503 says nothing
        new.  Otherwise every response of one overload (up to a window of 8
        requests in flight) would double the delay again.
        """
        state = self.hosts.read_slot(task.host)
        for _ in range(16):
            if state.adaptive_delay > task.adaptive_delay:
                return state.adaptive_delay
            slowed = slowed_delay(task, state)
            if slowed <= state.adaptive_delay:
                return state.adaptive_delay  # at the cap already
            conflict = self.hosts.set_adaptive(task.host, state.adaptive_delay, slowed)
            if conflict is None:
                self._known.pop(task.host, None)
                return slowed
            state = conflict
        raise Contention(f"host {task.host}: adaptive delay kept changing")

    def leave(self, task: FetchTask) -> HostSlot:
        """Leave the window without having claimed the host (no request was made).

        The host's ``free_at`` and ``busy`` are left as they are: they may
        belong to another fetcher's request in flight.  The slot the task
        reserved is not given back; later slots were reserved after it.
        """
        return self.hosts.release(task.host, window_key(task), None)
