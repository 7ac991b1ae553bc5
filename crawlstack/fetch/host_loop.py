"""One host's run in one fetch invocation: sequential requests, spaced, until its backlog ends or it must stop.

``HostLoop.run`` works through the bundles of the host's backlog
(``Backlog.peek``), each task in turn:

* a task of a stopped crawl is held (``crawlstack.jobs.hold_task``), no request;
* a task of a complete record is given up, "record complete", no request
  (``crawlstack.records.resolution``; one read per peek of bundles);
* the origin's robots.txt, if the cache has none (or an expired one), is
  fetched as the host's next request (spaced like any other) and cached; a
  task it disallows is skipped with its reason ("robots: disallowed by
  robots.txt");
* otherwise the task waits for its start: ``first_start`` over the host's
  state (last start, pause, adaptive delay; a dead holder's lease) with the
  task's delay, max(crawl delay, robots.txt Crawl-delay), and its own
  ``not_before`` (a retry's backoff).  The wait is slept
  (``should_sleep``, priced against the hosts working in the invocation) or
  the host is rescheduled; then the request (unless the URL's state, read
  once per peek for a retry, says this try is done: ``next_try``), its outcome
  (``crawlstack.fetch.outcomes``).  A 429 or 503 doubles the adaptive delay
  (each in a row again, up to the cap: the host's requests are sequential,
  so each went at the pace the one before set), a success lets it decay; a
  Retry-After sets the host's pause.

It ends in one of: ``done`` (backlog empty), ``rescheduled`` (a wait cheaper
to be woken from), ``deadline`` (the invocation's end is near), ``lost``
(the lease could not be renewed).  What each writes is the runner's
(``crawlstack.fetch.host_runner``); flushing is the ledger's (``crawlstack.fetch.flush``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.errors import failure
from crawlstack.fetch import http
from crawlstack.fetch.flush import Ledger
from crawlstack.fetch.headers import parse_retry_after
from crawlstack.fetch.outcomes import URL_STATES, Fetched, classify, guarded_fetch, pause_after
from crawlstack.fetch.pacing import first_start, should_sleep
from crawlstack.fetch.robots_txt import RobotsPolicy, redirect_refusal, remember
from crawlstack.fetch.tries import next_try
from crawlstack.jobs import hold_task
from crawlstack.messages import FetchTask
from crawlstack.ports import RobotsRecord, UrlState
from crawlstack.records.resolution import RECORD_COMPLETE, read_complete
from crawlstack.runs.ports import Bundle, HostRun
from crawlstack.urls import origin_of

if TYPE_CHECKING:
    from crawlstack.fetch.host_runner import HostRunner

DONE, RESCHEDULED, DEADLINE, LOST = "done", "rescheduled", "deadline", "lost"

log = logging.getLogger(__name__)


class _Stop(Exception):
    """The loop stops: ``end`` says why; ``start`` is when the host's next request may go."""

    def __init__(self, end: str, start: float) -> None:
        super().__init__(end)
        self.end = end
        self.start = start


@dataclass
class HostEnd:
    end: str  # DONE | RESCHEDULED | DEADLINE | LOST
    next_start: float  # when the host's next request may start (RESCHEDULED, DEADLINE)


def slowed(delay: float, adaptive: float | None) -> float:
    """The adaptive delay after a 429 or 503: the effective delay times the factor, within floor and cap."""
    grown = max(delay, adaptive or 0.0) * settings.ADAPTIVE_DELAY_FACTOR
    return min(settings.MAX_CRAWL_DELAY_SECONDS, max(settings.ADAPTIVE_DELAY_FLOOR_SECONDS, grown))


def recovered(delay: float, adaptive: float | None) -> float | None:
    """The adaptive delay after a success; None once back at the crawl's delay (or below the minimum)."""
    if adaptive is None:
        return None
    shrunk = adaptive * settings.ADAPTIVE_DELAY_RECOVERY
    if shrunk <= delay or shrunk < settings.ADAPTIVE_DELAY_MIN_SECONDS:
        return None
    return shrunk


class HostLoop:
    def __init__(self, runner: HostRunner, host: str, run_id: str, before: HostRun, leased_at: float) -> None:
        self.r = runner
        self.host = host
        self.run_id = run_id
        self.before = before  # the item as the lease found it: its holder counts until our first request
        self.leased_at = leased_at
        self.lease_until = leased_at + runner.lease_seconds
        self.last_start = before.last_start
        self.pause_until = before.pause_until
        self.adaptive = before.adaptive_delay
        self.gap = 0.0  # the delay used for the last request
        group = runner.group
        self.ledger = Ledger(
            host,
            runner.backlog,
            runner.urls,
            lambda pending, now: group.write(host, pending, now),
            runner.send_frontier,
            on_dirty=lambda: group.dirty(host),
            on_clean=lambda: group.clean(host),
        )
        self.states: dict[tuple[str, str], UrlState] = {}  # (crawl, fp) -> its state when peeked
        self.read: set[tuple[str, str]] = set()
        self.tried: set[tuple[str, str, int]] = set()  # (crawl, fp, attempt) requested in this run
        self.fetched_pages = False  # since the backlog last ran dry: their links may be on their way
        self.linger_until: float | None = None

    # -- the loop ----------------------------------------------------------
    def run(self) -> HostEnd:
        try:
            while True:
                if self._flush_due(self.r.clock()):
                    self.flush()
                # Bundles served but not yet flushed are still stored: read on past them (a
                # shallower bundle added meanwhile sorts before them, and waits for the flush).
                # A lingering run's polls read eventually consistent: its end's look is consistent.
                bundles = self.r.backlog.peek(
                    self.host, self.r.peek_bundles, after=self.ledger.newest(), consistent=self.linger_until is None
                )
                if not bundles:
                    if self.ledger.dirty():
                        # Dry: the pages are flushed now, so their links can come back.
                        self.flush()
                        continue
                    if self._linger():
                        continue
                    return HostEnd(DONE, self._state_start(self.gap))
                self.stop_lingering()
                self.ledger.take(bundles)
                complete = self._complete(bundles)
                self._read_states(bundles)
                while (picked := self._pick()) is not None:
                    self._serve(*picked, complete)
                    if self._flush_due(self.r.clock()):
                        self.flush()
        except _Stop as stop:
            return HostEnd(stop.end, stop.start)

    def _linger(self) -> bool:
        """The backlog ran dry: wait a while for the links of the pages just flushed (True: look again).

        A page's links come back through extract and dispatch into this
        backlog a second or two after its flush; a run that ended at once
        would be started again by them, a batching window and a lease later.
        So a host that fetched pages above the crawl's depth limit (a watch's
        checks, at depth 0 of a crawl of depth 0, have no links to wait for)
        since its backlog last ran dry waits
        ``RUN_LINGER_SECONDS`` (or until its next start, if later), looking
        again every ``RUN_LINGER_POLL_SECONDS``, when that wait is cheaper
        slept than rescheduled (``should_sleep``) and fits the invocation.
        Its run stays the host's meanwhile, so dispatch's new bundles are
        its to find (the lost wake-up rule holds: the run ends only after).
        """
        now = self.r.clock()
        if self.r.stopping.is_set():
            return False
        if self.linger_until is None:
            if not self.fetched_pages:
                return False
            self.fetched_pages = False
            until = max(self._state_start(self.gap), now + self.r.linger_seconds)
            time_left = self.r.deadline - self.r.stop_margin - now
            if until - now >= time_left or not should_sleep(
                until - now, self.r.active(), time_left, memory_mb=self.r.memory_mb
            ):
                return False
            self.linger_until = until
            self.r.hosts.add(lingering=1)
            self.r.slept(until - now)
        if now >= self.linger_until or (self.r.settled is not None and self.r.hosts.all_linger() and self.r.settled()):
            # Over, or nothing can bring it links any more: every host at work lingers, and upstream is idle.
            self.stop_lingering()
            return False
        if self.lease_until < self.linger_until + self.r.renew_before:
            self.renew(now)
        wait = min(self.r.linger_poll_seconds, self.linger_until - now)
        if self.r.wait_for_tasks is not None:
            self.r.wait_for_tasks(self.host, wait)  # woken as tasks are added
        else:
            self.r.nap(wait)
        return True

    def stop_lingering(self) -> None:
        if self.linger_until is not None:
            self.linger_until = None
            self.r.hosts.add(lingering=-1)

    def flush(self, write_back: bool = True) -> None:
        """Make the work since the last flush durable, in the invocation's next write (``Group``).

        A host joins a write that is gathering at once; otherwise it waits
        for the next write's slot (``RUN_FLUSH_MIN_GAP_SECONDS`` after the
        last), so hosts running dry one after another share one write.
        """
        if not self.ledger.dirty():
            return
        group = self.r.group
        if not group.gathering() and (wait := group.slot() - self.r.clock()) > 0:
            self.r.nap(wait)
        self.r.flushed(self.ledger.flush(self.r.clock(), write_back))

    def _pick(self) -> tuple[str, int, FetchTask] | None:
        """The first task in order that is due by the host's next start; else the one due soonest."""
        left = self.ledger.unserved()
        if not left:
            return None
        soon = self._state_start(0.0)
        for entry in left:
            if entry[2].not_before <= soon:
                return entry
        return min(left, key=lambda e: e[2].not_before)

    def _serve(self, key: str, index: int, task: FetchTask, complete: set[tuple[str, str]]) -> None:
        config = self.r.crawls.get(task.crawl_id)
        now = self.r.clock()
        if self.r.held is not None and config.stopped and hold_task(self.r.held, task):
            self.ledger.served(key, index, now)
            return
        if task.record_id and task.want and (task.crawl_id, task.record_id) in complete:
            # Conditional: a copy that fetched or skipped it, or another record's claim since, is left alone.
            given_back = self.r.urls.unclaim(task.crawl_id, task.fp, task.record_id, RECORD_COMPLETE, self.leased_at)
            done = Fetched(task, "skipped", reason=RECORD_COMPLETE, recorded=True) if given_back else None
            self.ledger.served(key, index, now, done)
            return
        # A refetch after a crash is allowed; a URL whose try is over, or fetched, is not fetched again.
        go, lost_retry = next_try(task, self.states.get((task.crawl_id, task.fp)))
        if not go or (task.crawl_id, task.fp, task.attempt) in self.tried:
            self.ledger.served(key, index, now, retry=lost_retry)
            return
        policy = self._robots(task, config)
        if not policy.allows(task.url, config.user_agent):
            self.ledger.served(key, index, now, Fetched(task, "skipped", reason=policy.disallow_reason()))
            return
        delay = config.host_delay(policy.crawl_delay(config.user_agent))
        start = self._wait(max(self._state_start(delay), task.not_before))
        self.tried.add((task.crawl_id, task.fp, task.attempt))
        self._started(start, delay)
        self.r.group.dirty(self.host)  # a write now waits a moment for this page too
        if self.r.on_request is not None:
            self.r.on_request(task)
        check = task.check_ref  # a watch's check asks conditionally: a 304 is "nothing new"
        headers = check.request_headers() if check is not None else []
        result = guarded_fetch(task.url, config.user_agent, http.AddressGuard(config.allow_private), headers)
        self._responded(result, delay)
        frontier: list[tuple[str, int]] = []
        try:
            done = classify(task, result, frontier, self.r.clock, self.r.jitter)
        except Exception as exc:  # a response nothing expected costs its own task, not the run
            done = Fetched(task, "failed", result.status, f"response could not be processed: {failure(exc)}")
        done.started_at, done.finished_at = result.started_at or None, result.finished_at or None
        if done.outcome == "fetched" and task.depth < config.max_depth:
            self.fetched_pages = True  # links at the crawl's depth limit are dropped: none come back for it
        # What the flush will write, known now: a copy of the task, or its next try, reads it.
        retry_at = done.retry.not_before if done.retry is not None else 0.0
        self.states[(task.crawl_id, task.fp)] = UrlState(
            URL_STATES.get(done.outcome, done.outcome), task.attempt, retry_at
        )
        self.ledger.served(key, index, self.r.clock(), done, frontier)

    # -- spacing -----------------------------------------------------------
    def _state(self) -> HostRun:
        return HostRun(
            self.host,
            holder=self.before.holder,
            lease_until=self.before.lease_until,
            last_start=self.last_start,
            pause_until=self.pause_until,
            adaptive_delay=self.adaptive,
        )

    def _state_start(self, delay: float) -> float:
        return first_start(self._state(), self.r.holder, delay, self.r.clock())

    def _wait(self, start: float) -> float:
        """Sleep until ``start`` (renewing the lease first if it would run short), or stop the loop."""
        now = self.r.clock()
        if start + self.r.stop_margin > self.r.deadline or self.r.stopping.is_set():
            raise _Stop(DEADLINE, start)
        wait = start - now
        time_left = self.r.deadline - self.r.stop_margin - now
        if not should_sleep(
            wait, self.r.active(), time_left, memory_mb=self.r.memory_mb, unflushed=self.ledger.dirty()
        ):
            raise _Stop(RESCHEDULED, start)
        if self.lease_until < max(start, now) + self.r.renew_before:
            self.renew(max(start, now))
        if wait > 0:
            self.r.slept(wait)
            if self.ledger.dirty() and self._flush_due(start, join=False):
                # At the grid point, not before: the invocation's other hosts flush then too.
                since = self.ledger.since
                if since is not None and self.ledger.bytes < self.r.flush_bytes:
                    self.r.nap(max(0.0, min(start, self.r.group.due(since)) - self.r.clock()))
                self.flush()
            # Until the request starts (``Group.dirty``; robots.txt's: ``_fetch_robots``), or the loop stops.
            self.r.group.expect(self.host, start)
            try:
                self.r.nap(max(0.0, start - self.r.clock()))
                if self.r.stopping.is_set():
                    raise _Stop(DEADLINE, start)
            except BaseException:
                self.r.group.expect(self.host, None)
                raise
        return max(start, self.r.clock())

    def renew(self, at: float) -> None:
        until = at + self.r.lease_seconds
        if not self.r.runs.renew(self.host, self.r.holder, until, self.last_start):
            raise _Stop(LOST, at)
        self.lease_until = until

    def _flush_due(self, at: float, join: bool = True) -> bool:
        """Whether to flush by ``at``: RUN_FLUSH_BYTES unflushed, the grid's point, or (``join``) a write gathering."""
        if not self.ledger.dirty():
            return False
        since = self.ledger.since
        return (
            self.ledger.bytes >= self.r.flush_bytes
            or (since is not None and at >= self.r.group.due(since))
            or (join and self.r.group.gathering())
        )

    def _started(self, start: float, delay: float) -> None:
        self.last_start = start
        self.gap = delay
        # Our own request follows any the item's earlier holder may have sent (first_start waited for
        # them): from now on only our last start counts, not a lease (ours read back, or one taken over).
        self.before = replace(self.before, holder=None, lease_until=0.0)

    def _arrived(self, result: http.FetchResult) -> None:
        """Count the host's delay from when the response began (``responded_at``): the server had the request then.

        Counted from the planned start, a request held up before it went
        out (a busy process) or slowed by its connect lets the next one
        reach the server less than the delay after it; counted from the
        response's end, every gap would also take the body's download.
        A request that got no response counts from when it began.
        """
        self.last_start = max(self.last_start, result.responded_at or result.started_at)

    def _responded(self, result: http.FetchResult, delay: float) -> None:
        self._arrived(result)
        status = result.status
        if status in settings.SLOWDOWN_STATUSES:
            self.adaptive = slowed(delay, self.adaptive)
        elif status is not None and 200 <= status < 400:
            self.adaptive = recovered(delay, self.adaptive)
        pause = pause_after(result, result.finished_at or self.r.clock())
        if pause is not None:
            self.pause_until = max(self.pause_until, pause)

    # -- per peek ----------------------------------------------------------
    def _read_states(self, bundles: list[Bundle]) -> None:
        """The urls table's state of each retry peeked and not read before: one batched read, no write.

        A retry (try 2 or later) needs the state its try before left
        (``next_try``): read here, not claimed by a write per request.  A
        first try needs nothing read: the lease makes this holder the host's
        only requester, and a bundle leaves the backlog only once its pages
        are flushed, so on the normal path no page is fetched twice.  What
        a failure leaves is fetched again (allowed): a page a dead holder
        fetched and never flushed, or a second copy of a task that a
        redelivered dispatch admitted after the first was flushed (a first
        try's outcome is the crawl log's alone, ``fetch_outcomes.logged_only``).
        ``tried`` catches a copy served in the same run.
        """
        keys = {(t.crawl_id, t.fp) for b in bundles for t in b.tasks if t.attempt > 1} - self.read
        if keys:
            self.states.update(self.r.urls.fetch_states(keys))
            self.read |= keys

    def _complete(self, bundles: list[Bundle]) -> set[tuple[str, str]]:
        keys = {(t.crawl_id, t.record_id) for b in bundles for t in b.tasks if t.record_id and t.want}
        if self.r.resolved is None or not keys:
            return set()
        try:
            return read_complete(self.r.resolved, self.r.completed, keys)
        except Exception as exc:  # the check only saves requests: fetch as if none were complete
            log.warning("host %s: record completion not read: %s", self.host, failure(exc))
            return {key for key in keys if key in self.r.completed}

    def _robots(self, task: FetchTask, config: CrawlConfig) -> RobotsPolicy:
        """The origin's policy: remembered, cached, or fetched now as the host's next request."""
        origin = origin_of(task.url)
        now = self.r.clock()
        policy = self.r.policies.get(origin)
        if policy is not None and not policy.record.expired(now):
            return policy
        record = self.r.robots.get_robots(origin)
        if record is None:
            record = self._fetch_robots(origin, config)
        policy = RobotsPolicy(record)
        remember(self.r.policies, origin, policy, settings.ROBOTS_MEMORY_ORIGINS)
        return policy

    def _fetch_robots(self, origin: str, config: CrawlConfig) -> RobotsRecord:
        # The lease makes this holder the host's one requester: no lock on the origin is needed.
        start = self._wait(self._state_start(config.delay))
        self.r.group.expect(self.host, None)  # no page of its own to flush
        self._started(start, config.delay)
        guard = http.AddressGuard(config.allow_private)
        result = self.r.fetch_robots(origin, config.user_agent, guard, lambda url: redirect_refusal(url, config))
        self._arrived(result)
        finished = result.finished_at or self.r.clock()
        retry_after = parse_retry_after(result.header("retry-after"), finished)
        record = RobotsRecord.from_fetch(origin, result.status, result.body, result.error, retry_after)
        self.r.robots.put_robots(record)
        return record
