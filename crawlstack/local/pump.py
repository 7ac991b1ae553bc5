"""The local event pump: delivers queue batches to the handlers the way Lambda does.

Each source's queue is a ``crawlstack.queueing.MessageQueue`` with SQS's
semantics: SQS itself (``aws.Queue``, the default) or another that keeps
them.  Like an SQS event source mapping, it receives up to ``batch_size`` messages
(which makes them invisible for the visibility timeout), invokes the handler
with a Lambda-shaped SQS event, deletes the messages the handler did not
report in ``batchItemFailures``, and leaves failed ones to come back after
the visibility timeout, up to ``maxReceiveCount`` before SQS moves them to
the dead-letter queue.  Message delays are SQS's own.  Each queue has a
number of concurrent "instances" (threads); fetch gets several.

A queue found empty is polled again after 10 ms, then 20, up to
``MAX_IDLE_POLL_SECONDS``, until some handler finishes: handlers send the
messages, so a finished one is when new work appears.  Empty receives cost
as much emulated work as full ones, and the CPU they took came out of the
handlers' share.

Messages a handler reported failed (or all of a batch whose handler
raised) come back after ``retry_after`` seconds when a source sets it: the
invocation is over, so nothing else holds them, and local mode need not
wait out a visibility timeout sized for the longest invocation.

The pump's own queue calls may fail too (throttling, 5xx, retries spent):
like an event source mapping, it counts the error (``QueueStats.aws_errors``)
and carries on, unless ``MAX_FAILED_RECEIVES`` receives in a row fail (each
already retried by botocore): then the endpoint is gone, and it raises
``EndpointUnavailable`` rather than poll a dead endpoint for ever.  A batch it could not delete comes back after its
visibility timeout and is delivered again, which the handlers absorb
(delivery is at least once).

The crawl is done when no handler is running and every queue reports
nothing visible, in flight or delayed.  Ctrl-C (KeyboardInterrupt) stops
handing out batches; the running ones finish (``finished`` then says so)
before it goes on to the caller, unless a second Ctrl-C cuts that short.

Every queue stays short by design (see ARCHITECTURE.md, "Local mode"),
so moto's per-call cost, linear in queue length, stays flat.  One
part of that is backpressure: a source with ``backpressure_from`` is not
served while that queue is deep.  Extract turns one message into hundreds
of outlinks, so it waits while the frontier is deep; fetch waits while the
extract queue is deep.  The pipeline then runs at the pace of its slowest
stage with every queue bounded, and the backlog waits in the parked table.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from crawlstack import aws, settings
from crawlstack.local.sqlite.db import is_storage_full
from crawlstack.queueing import MessageQueue, Received

Handler = Callable[[dict[str, Any], Any], Any]

IDLE_SLEEP_SECONDS = 0.01
# A queue found empty is polled again after a wait that doubles up to this,
# until a handler finishes (its sends are the usual source of new messages).
MAX_IDLE_POLL_SECONDS = 0.05
# What the pump's own queue calls may raise: AWS's errors, or the state database's.
_AWS_ERRORS = (ClientError, BotoCoreError, sqlite3.Error)
MAX_FAILED_RECEIVES = 30


class EndpointUnavailable(RuntimeError):
    """The pump's receives kept failing: the AWS endpoint is down or refusing us."""


DEPTH_CACHE_SECONDS = 0.2


@dataclass
class LambdaContext:
    """The parts of the Lambda context object that Powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 512
    timeout_seconds: int = 60
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = ""
    log_group_name: str = "local"
    log_stream_name: str = "local"
    function_version: str = "$LATEST"
    _started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout_seconds - (time.monotonic() - self._started)) * 1000))


@dataclass
class QueueStats:
    received: int = 0
    deleted: int = 0
    failed: int = 0
    invocations: int = 0
    errors: int = 0
    # The pump's own SQS calls that failed (receive, delete, queue depth).
    aws_errors: int = 0
    # Wall time spent inside the handler, over every invocation: what Lambda bills.
    handler_seconds: float = 0.0


@dataclass
class Source:
    """One event source mapping: a queue, its handler and its concurrency."""

    key: str
    queue_url: str
    queue_arn: str
    handler: Handler
    concurrency: int
    batch_size: int = settings.SQS_BATCH_SIZE
    # Longer than one invocation can take, or a batch is handed out twice.
    visibility_timeout: int = 30
    # Deliver only while this queue holds fewer messages than ``high_water``
    # (backpressure: see ``EventPump``).
    backpressure_from: str | None = None
    high_water: int = 0
    # Failed messages come back after this many seconds instead of the visibility timeout.
    retry_after: int | None = None
    # Seconds a batch may wait for more messages (MaximumBatchingWindowInSeconds); 0: none.
    batching_window: float = 0.0
    # Skip the window while no invocation of this source runs: a batch then goes at once.
    # Local mode's idle instances cost nothing, so the window only pays to gather work while
    # others are busy; deployed (and --emulate-aws) keep the mapping's own behaviour.
    eager_when_idle: bool = False
    # The queue itself (``crawlstack.queueing``); None: SQS's at ``queue_url``.
    queue: MessageQueue | None = None
    stats: QueueStats = field(default_factory=QueueStats)
    running: int = 0

    def __post_init__(self) -> None:
        if self.queue is None:
            self.queue = aws.Queue(self.queue_url, self.key)

    @property
    def messages(self) -> MessageQueue:
        assert self.queue is not None
        return self.queue


class EventPump:
    def __init__(self, sources: list[Source]) -> None:
        self.sources = sources
        self._lock = threading.Lock()
        self._pools = {s.key: ThreadPoolExecutor(max_workers=s.concurrency, thread_name_prefix=s.key) for s in sources}
        self.handler_errors: list[str] = []
        self._failed_receives = 0
        self._depths: dict[str, tuple[float, int]] = {}
        # Per source with a batching window: when its batch goes, and what it holds so far.
        self._gathering: dict[str, tuple[float, list[Received]]] = {}
        # Per source: when to receive again after an empty receive, and the wait after the next one.
        self._next_poll: dict[str, float] = {}
        self._idle_wait: dict[str, float] = {}
        self._handler_done = threading.Event()
        self._completions = 0  # handler invocations finished (``settled``)
        # True once run() has returned or raised with no handler running any more.
        self.finished = False

    def run(
        self,
        on_tick: Callable[[EventPump], None] | None = None,
        tick_seconds: float = 0.25,
        on_interrupt: Callable[[], None] | None = None,
        fault: Callable[[], BaseException | None] | None = None,
        stay: Callable[[], bool] | None = None,
    ) -> None:
        """Deliver until every queue is empty and no handler runs (and ``stay``, if given, says False).

        ``stay`` keeps a watch's pump serving while its ``on_tick`` sends checks as they fall due.

        ``fault`` is asked before each round: an exception it returns (the
        local backend's full disk) stops the crawl as Ctrl-C does, the running
        batches cut short, and is raised once they have finished.
        """
        last_tick = 0.0
        next_empty_check = 0.0
        try:
            while True:
                failure = fault() if fault is not None else None
                if failure is not None:
                    if on_interrupt is not None:
                        on_interrupt()
                    raise failure
                delivered = False
                if self._handler_done.is_set():
                    self._handler_done.clear()
                    self._next_poll.clear()
                    self._idle_wait.clear()
                for source in self.sources:
                    if source.backpressure_from and self._depth(source.backpressure_from) >= source.high_water:
                        continue
                    if time.monotonic() < self._next_poll.get(source.key, 0.0):
                        continue
                    while self._free(source):
                        try:
                            batch = self._gather(source)
                        except _AWS_ERRORS as exc:
                            self._aws_error(source, "receive", exc)
                            self._failed_receives += 1
                            if self._failed_receives >= MAX_FAILED_RECEIVES:
                                raise EndpointUnavailable(
                                    f"{self._failed_receives} receives in a row failed, the last: {exc}"
                                ) from exc
                            break
                        self._failed_receives = 0
                        if not batch:
                            wait = self._idle_wait.get(source.key, IDLE_SLEEP_SECONDS)
                            until = time.monotonic() + wait
                            # A batch being gathered goes when its window closes, idle or not.
                            self._next_poll[source.key] = min(until, self._gathering.get(source.key, (until, []))[0])
                            self._idle_wait[source.key] = min(MAX_IDLE_POLL_SECONDS, wait * 2)
                            break
                        self._idle_wait.pop(source.key, None)
                        delivered = True
                        self._invoke(source, batch)
                if on_tick and time.monotonic() - last_tick >= tick_seconds:
                    on_tick(self)
                    last_tick = time.monotonic()
                if delivered:
                    continue
                if not self._busy() and not self._gathered() and time.monotonic() >= next_empty_check:
                    if self._all_queues_empty() and not (stay is not None and stay()):
                        return
                    next_empty_check = time.monotonic() + MAX_IDLE_POLL_SECONDS
                self._handler_done.wait(IDLE_SLEEP_SECONDS)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt()  # cut the running batches short: they stop at their next wait
            with self._lock:
                running = sum(s.running for s in self.sources)
            if running:
                print(
                    f"crawlstack: interrupted: letting {running} running batches finish (Ctrl-C again to stop now)",
                    file=sys.stderr,
                )
            raise
        finally:
            for pool in self._pools.values():
                pool.shutdown(wait=True)
            self.finished = True
            if on_tick:
                on_tick(self)

    def _gather(self, source: Source) -> list[Received]:
        """The batch to invoke now, or [] (nothing, or a batch still within its batching window).

        As an event source mapping with ``MaximumBatchingWindowInSeconds``
        does, a batch is invoked once it holds ``batch_size`` messages or its
        window, from its first message, has passed.
        """
        if not source.batching_window:
            return self._receive(source)
        until, held = self._gathering.pop(source.key, (0.0, []))
        got = self._receive(source, source.batch_size - len(held))
        if got and not held:
            until = time.monotonic() + source.batching_window
        held += got
        idle = source.eager_when_idle and source.running == 0
        if held and (len(held) >= source.batch_size or time.monotonic() >= until or idle):
            return held
        if held:
            self._gathering[source.key] = (until, held)
        return []

    def _gathered(self) -> bool:
        return bool(self._gathering)

    @staticmethod
    def _receive(source: Source, most: int | None = None) -> list[Received]:
        """Up to ``batch_size`` messages (or ``most``), as many as are visible now.

        An event source mapping with a batching window would wait up to the
        window to fill the batch; locally what is there now goes at once.
        """
        return source.messages.receive(source.batch_size if most is None else most, source.visibility_timeout)

    def depths(self) -> dict[str, int]:
        out = {}
        for source in self.sources:
            depth = source.messages.depth()
            out[source.key] = depth.visible + depth.in_flight + depth.delayed
        return out

    def _depth(self, key: str) -> int:
        """Messages visible or in flight on a queue, read at most every DEPTH_CACHE_SECONDS."""
        now = time.monotonic()
        cached = self._depths.get(key)
        if cached is not None and now - cached[0] < DEPTH_CACHE_SECONDS:
            return cached[1]
        source = next(s for s in self.sources if s.key == key)
        try:
            found = source.messages.depth()
        except _AWS_ERRORS as exc:
            self._aws_error(source, "queue depth", exc)
            return cached[1] if cached is not None else 0
        depth = found.visible + found.in_flight
        self._depths[key] = (now, depth)
        return depth

    def _free(self, source: Source) -> bool:
        with self._lock:
            return source.running < source.concurrency

    def _busy(self) -> bool:
        with self._lock:
            return any(s.running for s in self.sources)

    def _all_queues_empty(self) -> bool:
        try:
            return not any(self.depths().values())
        except _AWS_ERRORS as exc:
            self._aws_error(self.sources[0], "queue depths", exc)
            return False  # unknown: look again

    def _invoke(self, source: Source, messages: list[Received]) -> None:
        with self._lock:
            source.running += 1
            source.stats.received += len(messages)
            source.stats.invocations += 1
        future = self._pools[source.key].submit(self._call, source, messages)
        future.add_done_callback(lambda f, s=source: self._done(s, f))  # type: ignore[misc]

    def _done(self, source: Source, future: Future[None]) -> None:
        with self._lock:
            source.running -= 1
            self._completions += 1
        self._handler_done.set()

    def settled(self, working: str = "fetch") -> bool:
        """Whether only ``working``'s running invocations are left: nothing else runs, waits or is gathered.

        No other handler runs, no queue holds a message visible or delayed,
        and none but ``working``'s holds one in flight: no new work can come
        but from ``working``'s own invocations.  The handlers' completions
        are read before and after the queues, so one that finished between
        the looks (its sends not yet seen) makes the answer False.
        """

        def others_idle() -> bool:
            return not self._gathering and not any(s.running for s in self.sources if s.key != working)

        with self._lock:
            before, idle = self._completions, others_idle()
        if not idle:
            return False
        for source in self.sources:
            depth = source.messages.depth()
            if depth.visible or depth.delayed or (source.key != working and depth.in_flight):
                return False
        with self._lock:
            return self._completions == before and others_idle()

    def _call(self, source: Source, messages: list[Received]) -> None:
        event = {"Records": [self._record(source, m) for m in messages]}
        queue = settings.QUEUES.get(source.key)
        spec = settings.FUNCTIONS.get(queue.consumer) if queue else None
        context = (
            LambdaContext(
                function_name=f"crawlstack-{spec.key}",
                memory_limit_in_mb=spec.memory_mb,
                timeout_seconds=spec.timeout_seconds,
            )
            if spec
            else LambdaContext(function_name=f"local-{source.key}")
        )
        started = time.perf_counter()
        try:
            try:
                response = source.handler(event, context) or {}
            finally:
                elapsed = time.perf_counter() - started
                with self._lock:
                    source.stats.handler_seconds += elapsed
        except Exception as exc:  # the whole batch failed: all of it comes back
            line = f"{source.key}: {_first_line(exc)}"
            children = getattr(exc, "child_exceptions", None) or []
            if children and isinstance(children[0], tuple) and isinstance(children[0][1], BaseException):
                line += f"; first: {_first_line(children[0][1])}"
            with self._lock:
                source.stats.errors += 1
                self.handler_errors.append(line)
            # A full disk stops the crawl (StateDb.fault) with one line of its own.
            causes = [exc, *(c[1] for c in children if isinstance(c, tuple) and len(c) > 1)]
            if not any(isinstance(c, BaseException) and is_storage_full(c) for c in causes):
                print(f"crawlstack: warning: {line} (the batch will be retried)", file=sys.stderr)
            self._retry_soon(source, messages)
            return
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        done = [m for m in messages if m.message_id not in failed]
        if done:
            try:
                source.messages.delete([m.receipt for m in done])
            except _AWS_ERRORS as exc:
                # They come back after the visibility timeout, and the handler absorbs the redelivery.
                self._aws_error(source, "delete", exc)
        self._retry_soon(source, [m for m in messages if m.message_id in failed])
        with self._lock:
            source.stats.deleted += len(done)
            source.stats.failed += len(failed)

    def _retry_soon(self, source: Source, messages: list[Received]) -> None:
        """Make failed messages visible again after ``source.retry_after`` seconds."""
        if source.retry_after is None or not messages:
            return
        try:
            source.messages.change_visibility([m.receipt for m in messages], source.retry_after)
        except _AWS_ERRORS as exc:
            self._aws_error(source, "change visibility", exc)  # they come back after the visibility timeout

    def _aws_error(self, source: Source, what: str, exc: Exception) -> None:
        with self._lock:
            source.stats.aws_errors += 1
        if not is_storage_full(exc):
            print(f"crawlstack: warning: {source.key} queue: {what} failed: {exc}", file=sys.stderr)

    @staticmethod
    def _record(source: Source, message: Received) -> dict[str, Any]:
        """The message as an SQS event record, as Lambda hands it to the handler."""
        return {
            "messageId": message.message_id,
            "receiptHandle": message.receipt,
            "body": message.body,
            "attributes": {
                "ApproximateReceiveCount": str(message.receive_count),
                "SentTimestamp": str(int(message.sent_at * 1000)),
            },
            "messageAttributes": {},
            "md5OfBody": hashlib.md5(message.body.encode(), usedforsecurity=False).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": source.queue_arn,
            "awsRegion": "us-east-1",
        }


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
