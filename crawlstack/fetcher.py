"""Fetch: a batch of fetch tasks -> HTTP requests -> one gzipped WARC in S3.

Each task waits for its slot (the sub-second remainder of it, and up to
``SLOT_GRACE_SECONDS`` for a request before it that runs late; longer waits go
back to the queue with ``DelaySeconds``), claims its host and starts its URL's
try up to ``CLAIM_LEAD_SECONDS`` before the slot, is fetched with the
crawl's User-Agent, and leaves the host's window, which unparks the next URL
of the host.  The batch's exchanges become ONE WARC object under ``pages/``
and then each URL's outcome is written to the urls table, so an outcome is
only ever recorded for a page that is stored.

Redirects are not followed here: the target goes back to the frontier (one
hop more, at most ``MAX_REDIRECT_HOPS``) and passes every check again.  A
Location over ``MAX_URL_LENGTH`` or with control characters fails the URL.

A task of a record that is already complete (``crawlstack.resolution``; one
batched read per batch for the tasks that carry ``record_id`` and ``want``,
complete records remembered by the container) is not fetched: without
claiming the host it leaves the window, and its URL is recorded as skipped,
reason "record complete", in a state a later claim by another record may
take over, since the page was never fetched.

A task of a stopped crawl (``crawlstack.jobs``) is held for ``resume``
before any wait or request: it leaves the window without claiming the host,
and its URL stays queued.

Retries.  A 5xx, 429 or 408 response, a network timeout or a failed
connection is tried again, without waiting in the Lambda: the exchange (if
there was a response) goes into the batch's WARC like any other, the URL is
set ``retrying`` (status, reason, ``retry_at``; outcome ``retry`` in the
crawl log), and then the same task with ``attempt`` + 1 and ``not_before`` =
``retry_at`` is admitted through politeness (a slot at or after ``retry_at``
in the host's window, or parked), so the host's delay holds for retries too.
The wait is full-jitter exponential backoff, or the ``Retry-After`` (seconds
or an HTTP date) when longer; a ``Retry-After`` also keeps the host unclaimed
until then; a malformed one is ignored (``crawlstack.headers``).  A
``Retry-After`` beyond ``RETRY_AFTER_MAX_SECONDS`` fails the URL at once: it
is never tried sooner than the server asked.  The last
allowed try fails the URL with a reason like "503 Service Unavailable after
3 attempts".  A 429 or 503 also slows the host down and a success lets it
recover (``crawlstack.politeness``, adaptive delay).

Each try is its own step in the urls table: ``start_fetch`` lets try n start
only from ``queued`` (n = 1) or ``retrying`` after try n - 1, so a
redelivered copy of an earlier try never fetches again.  Such a copy that
finds the URL ``retrying`` after its own try sends that retry again (its
sender may have died after writing the state): a duplicate retry is dropped
by the same condition.

A response's outcome, its redirect and its next try are worked out in
``crawlstack.fetch_outcomes``, shared with the host runner (issue 14).

Settings: ``settings.MAX_BODY_BYTES`` and the timeouts in ``crawlstack.http``;
``SLOT_GRACE_SECONDS`` and ``CLAIM_LEAD_SECONDS`` (here);
``RETRY_MAX_ATTEMPTS``, ``RETRY_BASE_SECONDS``, ``RETRY_MAX_BACKOFF_SECONDS``,
``RETRY_AFTER_MAX_SECONDS``, ``RETRY_STATUSES``, ``SLOWDOWN_STATUSES``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from crawlstack import http, settings
from crawlstack.dispatch import Outbox
from crawlstack.errors import failure
from crawlstack.fetch_outcomes import (
    FAILURE_CLASSES,
    MAX_REDIRECT_HOPS,
    REDIRECT_STATUSES,
    UNUSABLE_LOCATION,
    URL_STATES,
    Blobs,
    Crawls,
    Fetched,
    Urls,
    backoff_ceiling,
    classify,
    describe,
    failure_class,
    guarded_fetch,
    pause_after,
    record_outcome,
    retry_after_seconds,
    retryable,
    warc_key,
)
from crawlstack.jobs import Held, hold_task
from crawlstack.messages import FetchTask
from crawlstack.politeness import CLAIM_LEASE_SECONDS, IN_FLIGHT_POLL_SECONDS, SUB_SECOND, HostSlot, Politeness
from crawlstack.resolution import RECORD_COMPLETE, CompletedRecords, ResolvedRecords, read_complete
from crawlstack.warc import write_warc

# Shared with the host runner (crawlstack.fetch_outcomes), and imported from here by callers of old.
__all__ = [
    "FAILURE_CLASSES",
    "MAX_REDIRECT_HOPS",
    "REDIRECT_STATUSES",
    "UNUSABLE_LOCATION",
    "URL_STATES",
    "BatchResult",
    "Fetched",
    "Fetcher",
    "backoff_ceiling",
    "describe",
    "failure_class",
    "retry_after_seconds",
    "retryable",
    "warc_key",
]

SLOT_GRACE_SECONDS = 0.25
# How far ahead of its slot a task claims the host and starts its URL's try
# (at most half the delay): two writes off the request's path.
CLAIM_LEAD_SECONDS = 0.1


log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    fetched: list[Fetched]
    warc_key: str | None
    errors: dict[int, Exception]  # index in the batch -> why that task failed
    # Why record completion could not be read; the batch was fetched as if no record were complete.
    completion_error: Exception | None = None


class Fetcher:
    def __init__(
        self,
        urls: Urls,
        crawls: Crawls,
        politeness: Politeness,
        blobs: Blobs,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        max_workers: int = settings.SQS_BATCH_SIZE,
        resolved: ResolvedRecords | None = None,
        completed: CompletedRecords | None = None,
        held: Held | None = None,
        jitter: Callable[[], float] = random.random,
        send_now: Callable[[Outbox], None] | None = None,
    ) -> None:
        self.urls = urls
        # Sends URLs unparked mid-batch at once (wiring: the queues), so the
        # next URL of a host reaches its slot on time instead of waiting for
        # the slowest request of the batch; without it they go with the batch.
        self.send_now = send_now
        # A uniform draw in [0, 1): the "full jitter" of a retry's backoff.
        self.jitter = jitter
        self.held = held
        self.crawls = crawls
        self.politeness = politeness
        self.blobs = blobs
        self.clock = clock
        self.sleep = sleep
        self.max_workers = max_workers
        self.resolved = resolved
        self.completed = completed if completed is not None else CompletedRecords()

    def fetch_batch(self, tasks: list[FetchTask], outbox: Outbox) -> BatchResult:
        errors: dict[int, Exception] = {}
        results: list[Fetched | None] = [None] * len(tasks)
        complete, completion_error = self._complete_records(tasks)

        def run(i: int) -> None:
            try:
                task = tasks[i]
                if self._held(task, outbox):
                    return
                if task.record_id and task.want and (task.crawl_id, task.record_id) in complete:
                    results[i] = self._skip_for_record(task, task.record_id, outbox)
                else:
                    results[i] = self._fetch_one(task, outbox)
            except Exception as exc:  # reported per record, the rest of the batch goes on
                errors[i] = exc

        if len(tasks) == 1:
            run(0)
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(tasks))) as pool:
                list(pool.map(run, range(len(tasks))))

        done = [r for r in results if r is not None]
        exchanges = [r.exchange for r in done if r.exchange is not None]
        key = None
        if exchanges:
            key = warc_key([r.task for r in done], self.clock())
            self.blobs.put(key, write_warc(exchanges), "application/warc")
        for i, r in enumerate(results):
            if r is None or i in errors or r.recorded:
                continue
            try:
                record_outcome(self.urls, r, key)
                if r.retry is not None:
                    # Only once the URL is ``retrying``: the next try's start_fetch needs it.
                    self._send_retry(r.retry, outbox)
            except Exception as exc:
                errors[i] = exc
        return BatchResult(done, key, errors, completion_error)

    def _complete_records(self, tasks: list[FetchTask]) -> tuple[set[tuple[str, str]], Exception | None]:
        """The complete records among the tasks': one batched read, none for tasks without record_id and want."""
        keys = {(t.crawl_id, t.record_id) for t in tasks if t.record_id and t.want}
        if self.resolved is None or not keys:
            return set(), None
        try:
            return read_complete(self.resolved, self.completed, keys), None
        except Exception as exc:
            # The check only saves requests: a failed read must not stop the
            # batch (nor leave its tasks holding places in their windows).
            return {key for key in keys if key in self.completed}, exc

    def _stopped(self, task: FetchTask) -> bool:
        """Whether the task's crawl is stopped and its tasks are held (a cached read)."""
        return self.held is not None and self.crawls.get(task.crawl_id).stopped

    def _hold_if_stopped(self, task: FetchTask) -> bool:
        """Hold the task if its crawl is stopped; False if it runs (a stale cached state included)."""
        if self.held is None or not self._stopped(task):
            return False
        return hold_task(self.held, task)

    def _held(self, task: FetchTask, outbox: Outbox) -> bool:
        """Hold a task of a stopped crawl: no request, no wait; its window place goes to the next parked URL."""
        if not self._hold_if_stopped(task):
            return False
        # Held first, then out of the window: a crash in between leaves the
        # task to be redelivered and held again, never lost.
        self._unpark_after(task.host, self.politeness.leave(task), outbox)
        return True

    def _skip_for_record(self, task: FetchTask, record_id: str, outbox: Outbox) -> Fetched | None:
        """Give up a task of a complete record: no request, no wait for its slot, the URL's claim given back."""
        try:
            stale_before = self.clock() - CLAIM_LEASE_SECONDS
            # Conditional, like start_fetch: a copy that already fetched or
            # skipped the page, or another record's claim since, is left alone.
            given_back = self.urls.unclaim(task.crawl_id, task.fp, record_id, RECORD_COMPLETE, stale_before)
        finally:
            # The host was never claimed: only the window place is given back
            # (the next parked URL moves up); its spacing and any request in
            # flight are left alone.
            self._unpark_after(task.host, self.politeness.leave(task), outbox)
        if not given_back:
            return None
        return Fetched(task, "skipped", reason=RECORD_COMPLETE, recorded=True)

    def _fetch_one(self, task: FetchTask, outbox: Outbox) -> Fetched | None:
        start = self._wait_for_host(task, outbox)
        if start is None:
            return None
        result: http.FetchResult | None = None
        started = False
        try:
            now = self.clock()
            # A redelivered or duplicated task whose page is stored, or being
            # fetched by another copy, or whose try is over: a conditional
            # write, under the host claim, so two copies never both fetch.
            started = self.urls.start_fetch(task.crawl_id, task.fp, now, now - CLAIM_LEASE_SECONDS, task.attempt)
            if started:
                config = self.crawls.get(task.crawl_id)
                self._sleep_until(start)
                result = guarded_fetch(task.url, config.user_agent, http.AddressGuard(config.allow_private))
        finally:
            # Whatever happened, the host and the window are given back, and
            # the next parked URL of the host moves up.
            self._release(task, result, outbox)
        if not started:
            self._resend_retry(task, outbox)
            return None
        assert result is not None
        try:
            return self._classify(task, result, outbox)
        except Exception as exc:  # a response nothing expected costs its own task, not the batch
            log.warning("task %s: response not classified: %s", task.fp, failure(exc))
            return Fetched(task, "failed", result.status, f"response could not be processed: {failure(exc)}")

    def _release(self, task: FetchTask, result: http.FetchResult | None, outbox: Outbox) -> None:
        finished_at = (result.finished_at if result is not None else 0.0) or self.clock()
        status = result.status if result is not None else None
        # The server asked for time: the host is not claimed again before
        # then (capped like the retry's own wait).
        pause_until = pause_after(result, finished_at) if result is not None else None
        slot = self.politeness.release(
            task,
            finished_at,
            slow_down=status in settings.SLOWDOWN_STATUSES,
            succeeded=status is not None and 200 <= status < 400,
            pause_until=pause_until,
            # The server had the request by the time it answered: counting from
            # then, the next request cannot reach it sooner than the delay.
            responded_at=(result.responded_at or None) if result is not None else None,
        )
        self._unpark_after(task.host, slot, outbox)

    def _send_retry(self, task: FetchTask, outbox: Outbox) -> None:
        """Admit a retry like a new URL: a slot at or after its ``not_before`` in its host's window, or parked."""
        now = self.clock()
        for order, ready in self.politeness.admit(task, hold=self._hold_if_stopped, stopped=self._stopped):
            outbox.add_fetch(ready, now, order)

    def _resend_retry(self, task: FetchTask, outbox: Outbox) -> None:
        """After a refused start: if the URL waits for the retry of this very try, send that retry (again).

        The fetcher that wrote ``retrying`` may have died before sending it;
        if it did send it, the duplicate is dropped by ``start_fetch``.
        """
        waiting = self.urls.retrying(task.crawl_id, task.fp)
        if waiting is not None and waiting[0] == task.attempt:
            self._send_retry(replace(task, attempt=task.attempt + 1, not_before=waiting[1]), outbox)

    def _unpark_after(self, host: str, slot: HostSlot, outbox: Outbox) -> None:
        if slot.parked_at is None:
            return
        now = self.clock()
        unparked = self.politeness.unpark(host, hold=self._hold_if_stopped, state=slot, stopped=self._stopped)
        if unparked and self.send_now is not None:
            early = Outbox()
            for order, ready in unparked:
                early.add_fetch(ready, now, order)
            try:
                self.send_now(early)
                return
            except Exception as exc:  # sent with the batch instead (a duplicate is dropped by start_fetch)
                log.warning("host %s: unparked URLs not sent at once: %s", host, exc)
        for order, ready in unparked:
            outbox.add_fetch(ready, now, order)

    def _wait_for_host(self, task: FetchTask, outbox: Outbox) -> float | None:
        """Claim the host for the task's slot: when to start the request, or None if the task went back to the queue.

        It sleeps at most SUB_SECOND + SLOT_GRACE_SECONDS in all before the
        claim; a longer wait goes back to the queue with DelaySeconds, never
        a longer sleep in the Lambda.  The grace is for a task that slept out
        most of a second to its slot and then finds the request before it a
        little late: sent back, it would come round at least a second later
        and lose its place to the host's next slots, one after another.
        The claim is made up to ``CLAIM_LEAD_SECONDS`` before the start (at
        most half the delay, so slots keep their order).
        """
        lead = min(CLAIM_LEAD_SECONDS, task.effective_delay / 2)
        wait = task.not_before - self.clock()
        slept = 0.0
        refused = False
        while True:
            if wait > 0 and slept + wait > SUB_SECOND + SLOT_GRACE_SECONDS:
                later = replace(task, not_before=self.clock() + max(wait, SUB_SECOND))
                outbox.add_fetch(later, self.clock(), admitted=False)
                return None
            # To within ``lead`` of the start; after a refusal at least a
            # moment, so a host with a request in flight is not asked at once again.
            nap = wait - lead
            if refused:
                nap = max(nap, min(wait, IN_FLIGHT_POLL_SECONDS))
            if nap > 0:
                self.sleep(nap)
                slept += nap
                wait -= nap
            start = self.clock() + max(0.0, wait)
            wait = self.politeness.claim(task, at=start)
            if wait == 0:
                return start
            refused = True

    def _sleep_until(self, start: float) -> None:
        wait = start - self.clock()
        if wait > 0:
            self.sleep(wait)

    def _classify(self, task: FetchTask, result: http.FetchResult, outbox: Outbox) -> Fetched:
        return classify(task, result, outbox.frontier, self.clock, self.jitter)
