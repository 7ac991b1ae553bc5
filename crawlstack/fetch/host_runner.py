"""Fetch as host runs: one invocation leases many hosts and works each through its backlog.

``HostRunner.run(messages, deadline)`` is one fetch invocation:

1. A holder token of its own; each ``RunMessage``'s host is leased with one
   conditional write (``Runs.lease``).  A refused lease (a stale or
   duplicate message, or another holder's live lease) is dropped, not an
   error; a host named twice in the batch is leased once, under whichever
   of its messages carries its current run.
2. Every leased host is worked at once, a thread each, each sequential
   (``crawlstack.fetch.host_loop``): requests spaced by max(delay, Crawl-delay,
   adaptive delay), the first one at ``first_start`` (exact across
   holders), so the sleeping is shared by all the hosts of the invocation.
3. Every ``settings.RUN_FLUSH_SECONDS`` (on one grid for all the hosts) or
   ``RUN_FLUSH_BYTES``, and whenever a host stops: a WARC, the crawl log,
   redirects, outcomes, retries, then the backlog (``crawlstack.fetch.flush``),
   so extraction and outlinks never wait for the invocation to end.  The
   hosts flushing at once share one WARC and crawl-log object
   (``crawlstack.fetch.flush_objects``); their outcomes, bundles and leases stay
   each host's own.
4. Each host's end:

   * backlog empty: ``release(next_run=None)``, then one more look at the
     backlog; a bundle added meanwhile gets a new run (``schedule``) and,
     if won, its message: the lost wake-up rule of ``crawlstack.runs.ports``;
   * a wait cheaper to be woken from (``should_sleep``), or the
     invocation's deadline near: the partly served bundle written back,
     ``release`` with a new run id, and a ``RunMessage`` of it delayed to the host's
     next start (at most ``settings.MAX_SQS_DELAY_SECONDS``);
   * the lease lost (a renew refused): what was fetched is flushed, the
     bundle in hand is not written back, nothing is released;
   * an exception: that host only fails (``RunResult.errors``): its lease is
     given back under the same run id, so the failed message, redelivered,
     takes it again (or, if that fails too, the lease expires and the next
     holder waits ``lease_until`` plus the delay); its bundles stay, so no
     URL is lost; pages fetched but not flushed are fetched again.

The lease is taken for ``RUN_LEASE_SECONDS`` and renewed before a request that
would start with less than ``LEASE_RENEW_BEFORE_SECONDS`` of it left (a
request's ``settings.TOTAL_DEADLINE_SECONDS`` and a flush fit in it).  A
host stops ``RUN_STOP_MARGIN_SECONDS`` before the deadline.  The invocation's
messages and redirects are returned (``RunResult``) for the caller to send;
``send_runs`` sends each run message as it is made, and ``send_frontier``
redirects at each flush, instead.  ``stop`` ends every host at its next
wait (as at the deadline): local mode's Ctrl-C.  ``on_request`` is told of
each page's try just before its request goes out: local mode journals them,
so a crawl resumed after a kill knows which pages it fetches a second time.
``wait_for_tasks(host, seconds)`` returns early when tasks are added to the
host's backlog (local mode's backlog can tell): a lingering host waits on
it between looks instead of napping.
``settled`` says when nothing but the container's own runs can bring new
work (local mode's pump knows): a host lingering then ends at once if every
host at work lingers too, rather than wait out ``RUN_LINGER_SECONDS`` at
the end of a crawl.

Settings: ``settings.RUN_LEASE_SECONDS``, ``RUN_LEASE_RENEW_BEFORE_SECONDS``,
``RUN_FLUSH_BYTES``, ``RUN_FLUSH_SECONDS``, ``RUN_FLUSH_GATHER_SECONDS``, ``RUN_FLUSH_MIN_GAP_SECONDS``
(the deployed ``pacing``, ``settings.RunPacing``; local mode passes its own),
``RUN_STOP_MARGIN_SECONDS``,
``RUN_PEEK_BUNDLES``, ``RUN_LINGER_SECONDS``, ``RUN_LINGER_POLL_SECONDS``; and
``settings.MAX_SQS_DELAY_SECONDS``, ``settings.ADAPTIVE_DELAY_*``,
``settings.RETRY_*``, the fetch function's memory (``should_sleep``).
"""

from __future__ import annotations

import copy
import logging
import math
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from crawlstack import settings
from crawlstack.errors import failure
from crawlstack.fetch import http
from crawlstack.fetch.flush import Flushed
from crawlstack.fetch.flush_objects import Group
from crawlstack.fetch.host_loop import DEADLINE, DONE, LOST, RESCHEDULED, HostEnd, HostLoop
from crawlstack.fetch.outcomes import Fetched
from crawlstack.fetch.robots_txt import RobotsPolicy
from crawlstack.jobs import Held
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.ports import Blobs, Crawls, Hosts, Urls
from crawlstack.records.resolution import CompletedRecords, ResolvedRecords
from crawlstack.runs.admission import new_run_id, run_expires
from crawlstack.runs.ports import Backlog, Runs

REFUSED, FAILED = "refused", "failed"

log = logging.getLogger(__name__)


def sqs_delay(start: float, now: float) -> int:
    """Whole seconds a run message waits in SQS to wake its host no sooner than ``start``."""
    return max(0, min(settings.MAX_SQS_DELAY_SECONDS, math.ceil(start - now)))


@dataclass
class RunResult:
    """What one invocation did: each host's end, what it flushed, and the messages to send."""

    # host -> done | rescheduled | deadline | lost | refused | failed
    ends: dict[str, str] = field(default_factory=dict)
    fetched: list[Fetched] = field(default_factory=list)  # each outcome flushed, its exchange dropped
    warc_keys: list[str] = field(default_factory=list)
    runs: list[tuple[str, int]] = field(default_factory=list)  # RunMessage bodies, SQS delay (sent if send_runs)
    frontier: list[tuple[str, int]] = field(default_factory=list)  # redirects, unless sent at each flush
    errors: dict[str, Exception] = field(default_factory=dict)  # host -> why its run failed
    holder: str = ""  # the invocation's holder token
    # Waits for a host's next start that should_sleep chose to sleep (a rescheduled one ends its run instead).
    waits_slept: int = 0
    seconds_slept: float = 0.0


class HostCount:
    """The container's hosts at work, how many of them linger for links (``HostLoop._linger``), and its outcomes.

    ``outcomes`` counts each outcome flushed, by name: a container's own
    tally (local mode's progress display reads it), not the crawl's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.working = 0
        self.lingering = 0
        self.outcomes: Counter[str] = Counter()

    def flushed(self, outcomes: Iterable[str]) -> None:
        with self._lock:
            self.outcomes.update(outcomes)

    def add(self, working: int = 0, lingering: int = 0) -> None:
        with self._lock:
            self.working += working
            self.lingering += lingering

    def all_linger(self) -> bool:
        with self._lock:
            return self.lingering >= self.working


# Why a robots.txt redirect to a URL is not followed, or None (``crawlstack.fetch.robots_txt.redirect_refusal``).
RedirectCheck = Callable[[str], str | None]


class HostRunner:
    def __init__(
        self,
        runs: Runs,
        backlog: Backlog,
        urls: Urls,
        crawls: Crawls,
        blobs: Blobs,
        robots: Hosts,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        resolved: ResolvedRecords | None = None,
        completed: CompletedRecords | None = None,
        held: Held | None = None,
        jitter: Callable[[], float] = random.random,
        send_frontier: Callable[[list[tuple[str, int]]], object] | None = None,
        send_runs: Callable[[list[tuple[str, int]]], object] | None = None,
        fetch_robots: Callable[[str, str, http.AddressGuard, RedirectCheck], http.FetchResult] | None = None,
        on_request: Callable[[FetchTask], object] | None = None,
        settled: Callable[[], bool] | None = None,
        pacing: settings.RunPacing = settings.DEPLOYED_PACING,
        wait_for_tasks: Callable[[str, float], object] | None = None,
    ) -> None:
        self.runs = runs
        self.backlog = backlog
        self.urls = urls
        self.crawls = crawls
        self.blobs = blobs
        self.robots = robots
        self.clock = clock
        # Without a sleep of its own, the runner naps on ``stopping``, so ``stop`` cuts every wait short.
        self.sleep = sleep
        self.stopping = threading.Event()  # shared by every invocation's copy
        # Shared too: the container's hosts at work and those of them lingering (``settled``).
        self.hosts = HostCount()
        self.settled = settled
        self.resolved = resolved
        self.completed = completed if completed is not None else CompletedRecords()
        self.held = held
        self.jitter = jitter
        self.send_frontier = send_frontier
        self.send_runs = send_runs
        self._fetch_robots = fetch_robots
        self.on_request = on_request
        self.policies: dict[str, RobotsPolicy] = {}  # origin -> policy, for the container's life
        self.lease_seconds = settings.RUN_LEASE_SECONDS
        self.renew_before = settings.RUN_LEASE_RENEW_BEFORE_SECONDS
        self.flush_seconds = pacing.flush_seconds
        self.flush_bytes = settings.RUN_FLUSH_BYTES
        self.flush_gather_seconds = pacing.flush_gather_seconds
        self.flush_min_gap_seconds = pacing.flush_min_gap_seconds
        self.linger_seconds = settings.RUN_LINGER_SECONDS
        self.linger_poll_seconds = pacing.linger_poll_seconds
        self.wait_for_tasks = wait_for_tasks
        self.stop_margin = settings.RUN_STOP_MARGIN_SECONDS
        self.peek_bundles = settings.RUN_PEEK_BUNDLES
        # Per invocation (set by run).
        self.memory_mb: int | None = None
        self.holder = ""
        self.deadline = 0.0
        self._active = 0
        self._lock = threading.Lock()
        self._result = RunResult()

    def fetch_robots(
        self, origin: str, user_agent: str, guard: http.AddressGuard, may_follow: RedirectCheck
    ) -> http.FetchResult:
        fetch = self._fetch_robots or http.fetch_robots
        return fetch(origin, user_agent, guard, may_follow)

    def active(self) -> int:
        """Hosts still working in this invocation: they share its sleep."""
        with self._lock:
            return self._active

    def slept(self, seconds: float) -> None:
        """A host sleeps ``seconds`` until its next start, rather than being woken later (``should_sleep``)."""
        with self._lock:
            self._result.waits_slept += 1
            self._result.seconds_slept += seconds

    def flushed(self, flushed: Flushed) -> None:
        with self._lock:
            # Without its exchange: the WARC holds the body now, and an invocation may run for many pages.
            self._result.fetched.extend(replace(item, exchange=None) for item in flushed.fetched)
            if flushed.warc_key is not None:
                self._result.warc_keys.append(flushed.warc_key)
            self._result.frontier.extend(flushed.frontier)
        self.hosts.flushed(item.outcome for item in flushed.fetched)

    def run(self, messages: Iterable[RunMessage], deadline: float, memory_mb: int | None = None) -> RunResult:
        """One invocation's run messages, worked until their backlogs end or ``deadline`` (a clock time) nears.

        ``memory_mb``: the function's memory (the Lambda context's), which
        prices its sleep (``crawlstack.fetch.pacing``); None: the settings'.

        Each invocation works on a copy of the runner: it shares the
        container's memory (robots.txt policies, records seen complete) and
        holds its own holder token, deadline and result, since local mode
        runs several invocations of one container's runner at once.
        """
        invocation = copy.copy(self)
        invocation.memory_mb = memory_mb
        return invocation._run(messages, deadline)

    def _run(self, messages: Iterable[RunMessage], deadline: float) -> RunResult:
        self._lock = threading.Lock()
        self.group = Group(
            self.blobs.put,
            self.clock(),
            self.flush_seconds,
            self.flush_gather_seconds,
            clock=self.clock,
            min_gap_seconds=self.flush_min_gap_seconds,
            count=self.crawls.count_logged,
        )
        self.holder = uuid.uuid4().hex
        self.deadline = deadline
        self._result = result = RunResult(holder=self.holder)
        loops: list[HostLoop] = []
        for msg in messages:
            if result.ends.get(msg.host) == "leased":
                continue  # leased once per invocation; a second lease by this holder would succeed
            # A host refused under one message may be leased under another: a stale run id, then the current one.
            now = self.clock()
            try:
                before = self.runs.lease(msg.host, msg.run_id, self.holder, now, now + self.lease_seconds)
            except Exception as exc:
                result.ends[msg.host], result.errors[msg.host] = FAILED, exc
                continue
            if before is None:
                result.ends[msg.host] = REFUSED
                continue
            result.ends[msg.host] = "leased"
            loops.append(HostLoop(self, msg.host, msg.run_id, before, now))
        self._active = len(loops)
        threads = [threading.Thread(target=self._work, args=(loop,), name=f"run-{loop.host}") for loop in loops]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return result

    def _work(self, loop: HostLoop) -> None:
        self.hosts.add(working=1)
        try:
            end = loop.run()
            self._end(loop, end)
            ended = end.end
        except Exception as exc:  # this host only: its lease expires, its bundles stay
            log.warning("host %s: run failed: %s", loop.host, failure(exc))
            self._give_back(loop)
            ended = FAILED
            with self._lock:
                self._result.errors[loop.host] = exc
        finally:
            loop.stop_lingering()
            self.hosts.add(working=-1)
            self.group.clean(loop.host)  # a write need not wait for a host that has ended
            with self._lock:
                self._active -= 1
        with self._lock:
            self._result.ends[loop.host] = ended

    def _end(self, loop: HostLoop, end: HostEnd) -> None:
        if end.end == LOST:
            loop.flush(write_back=False)
            return
        loop.flush()
        now = self.clock()
        goes_on = end.end in (RESCHEDULED, DEADLINE)
        # The wake-up gets a run id of its own: this run's earlier messages, redelivered, find theirs stale.
        wake = RunMessage(loop.host, new_run_id()) if goes_on else None
        delay = sqs_delay(end.next_start, now)
        released = self.runs.release(
            loop.host,
            self.holder,
            loop.last_start,
            loop.pause_until,
            loop.adaptive,
            next_run=wake.run_id if wake else None,
            expires=run_expires(now + delay),
        )
        if not released:
            end.end = LOST
            return
        if wake is not None:
            self._emit(wake, delay)
            return
        # Ended, then one more look: a bundle added while the run ended must not wait for a wake-up nobody sends.
        if self.backlog.peek(loop.host, 1):
            run_id = new_run_id()
            if self.runs.schedule(loop.host, run_id, now, run_expires(now)):
                self._emit(RunMessage(loop.host, run_id), sqs_delay(end.next_start, now))

    def _give_back(self, loop: HostLoop) -> None:
        """After a failure: the lease given back under the same run id, if the store lets us.

        The failed message is redelivered and leases again at once, rather
        than after the lease's expiry; a failure that repeats sends the
        message to the DLQ.  If this too fails, the lease expires.
        """
        try:
            now = self.clock()
            self.runs.release(
                loop.host,
                self.holder,
                loop.last_start,
                loop.pause_until,
                loop.adaptive,
                next_run=loop.run_id,
                expires=run_expires(now),
            )
        except Exception as exc:
            log.warning("host %s: lease not given back: %s", loop.host, failure(exc))

    def _emit(self, msg: RunMessage, delay: int) -> None:
        """A run message, sent at once (``send_runs``), not when the invocation ends.

        A host released for a wake-up must not wait for the invocation's
        slowest host; and the wake-up carries the run's new id, so the
        moment between the release and the send is the one where a crash
        leaves the host's backlog with no message (until an admission finds
        the run expired): kept as short as it can be.
        """
        entry = (msg.to_json(), delay)
        if self.send_runs is not None:
            self.send_runs([entry])
        with self._lock:
            self._result.runs.append(entry)

    def nap(self, seconds: float) -> None:
        """Sleep ``seconds``, or until ``stop``."""
        if self.sleep is not None:
            self.sleep(seconds)
        else:
            self.stopping.wait(max(0.0, seconds))

    def stop(self) -> None:
        """Stop every host of every invocation at its next wait: flushed, released, woken later (local Ctrl-C)."""
        self.stopping.set()


__all__ = ["DEADLINE", "DONE", "FAILED", "LOST", "REFUSED", "RESCHEDULED", "HostRunner", "RunResult"]
