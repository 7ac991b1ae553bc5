"""The S3 objects of a flush: one WARC and the crawl-log objects, shared by the hosts that flush together.

S3 bills a PUT per object, and extract one invocation per WARC, whatever
its size: a WARC per host per flush would cost several PUTs for every few
pages at a polite delay.  So the hosts of one fetch invocation flush on one
grid (every ``RUN_FLUSH_SECONDS`` from the invocation's start,
``Group.due``), and ``Group.write`` is a group commit: the first host to
write waits (at most ``RUN_FLUSH_GATHER_SECONDS``) for the others with
unflushed work, then writes one WARC and one crawl-log object per crawl for
all of them; each goes on with its own outcomes and backlog once the
objects are durable.  The first to write also waits for hosts whose next
request starts within that moment (``Group.expect``).  While a write
gathers (``Group.gathering``), a host with unflushed work joins it at its
next task rather than writing alone later; a host in a long request joins
the next write.  If the write fails,
it fails for every host in it (each host's run fails and its bundles stay,
as with a failure of its own).

Writes are about ``RUN_FLUSH_MIN_GAP_SECONDS`` apart (a host that saw a
write gathering may find it closed and write at once): a host whose
backlog ran dry must flush for its pages' links to come back, and at a
small delay hosts run dry one after another, each a flush of a page or two.
A host that would write sooner waits for the slot (``Group.slot``,
in the host's own wait), and the hosts that wait for one slot share it.

``write_objects`` is the same write for one host alone.

Settings: ``settings.RUN_FLUSH_SECONDS``, ``settings.RUN_FLUSH_GATHER_SECONDS``,
``settings.RUN_FLUSH_MIN_GAP_SECONDS``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from crawlstack.errors import failure
from crawlstack.fetch.crawllog import CONTENT_TYPE, crawl_log_objects
from crawlstack.fetch.outcomes import Fetched, logged_only, warc_key
from crawlstack.fetch.warc import write_warc

log = logging.getLogger(__name__)

Put = Callable[[str, bytes, str], None]
Count = Callable[[str, dict[str, int]], None]


def write_objects(put: Put, pending: list[Fetched], now: float, count: Count | None = None) -> str | None:
    """One WARC of ``pending``'s exchanges and its crawl-log objects; the WARC's key (None: no exchange).

    Then, once they are durable, ``count`` adds each crawl's outcomes that
    only the crawl log holds (``fetch_outcomes.logged_only``) to its counts;
    a count that fails is logged and left out, never failing the write.
    """
    key = None
    exchanges = [f.exchange for f in pending if f.exchange is not None]
    if exchanges:
        key = warc_key([f.task for f in pending], now)
        put(key, write_warc(exchanges), "application/warc")
    for log_key, data in crawl_log_objects(pending, now, key).items():
        put(log_key, data, CONTENT_TYPE)
    if count is not None:
        by_crawl: dict[str, Counter[str]] = {}
        for item in pending:
            if logged_only(item):
                by_crawl.setdefault(item.task.crawl_id, Counter())[item.outcome] += 1
        for crawl_id, counts in by_crawl.items():
            try:
                count(crawl_id, dict(counts))
            except Exception as exc:  # the counts are for status: they never fail the pages they count
                log.warning("crawl %s: outcome counts not added (status will be short): %s", crawl_id, failure(exc))
    return key


@dataclass
class _Write:
    pending: list[Fetched] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    done: bool = False
    key: str | None = None
    error: BaseException | None = None


class Group:
    """The hosts of one invocation: when their flushes are due, and the writes they share."""

    def __init__(
        self,
        put: Put,
        started: float,
        flush_seconds: float,
        gather_seconds: float,
        clock: Callable[[], float] = time.time,
        wait_clock: Callable[[], float] = time.monotonic,
        min_gap_seconds: float = 0.0,
        count: Count | None = None,
    ) -> None:
        self.put = put
        self.count = count
        self.started = started
        self.flush_seconds = flush_seconds
        self.gather_seconds = gather_seconds
        self.min_gap_seconds = min_gap_seconds
        self.clock = clock
        self.wait_clock = wait_clock
        self._cond = threading.Condition()
        self._dirty: set[str] = set()  # hosts with unflushed work
        self._soon: dict[str, float] = {}  # hosts waiting to start a request: when (``clock``)
        self._open: _Write | None = None
        self._next_slot = -math.inf  # when the next write may begin (``clock``)

    def due(self, since: float) -> float:
        """When work done at ``since`` is flushed: the next point of the invocation's flush grid after it."""
        steps = math.floor(max(0.0, since - self.started) / self.flush_seconds) + 1
        return self.started + steps * self.flush_seconds

    def dirty(self, host: str) -> None:
        """``host`` has unflushed work, or a request in flight: a write waits for it (a while)."""
        with self._cond:
            self._dirty.add(host)
            self._soon.pop(host, None)
            self._cond.notify_all()

    def expect(self, host: str, start: float | None) -> None:
        """``host``'s next request starts at ``start`` (``clock``; None: it no longer waits for one).

        A write gathering now waits for a host whose request starts within
        its gathering time, as for one with a request in flight: hosts
        that fetch their first pages together flush them together, rather
        than the first one alone and the rest a slot later.
        """
        with self._cond:
            if start is None:
                self._soon.pop(host, None)
            else:
                self._soon[host] = start
            self._cond.notify_all()

    def clean(self, host: str) -> None:
        """``host`` has nothing unflushed and no request coming (its flush wrote nothing, or its run ended)."""
        with self._cond:
            self._dirty.discard(host)
            self._soon.pop(host, None)
            self._cond.notify_all()

    def slot(self) -> float:
        """When a write may begin (``clock``): joining one that is gathering needs no slot."""
        with self._cond:
            return self._next_slot

    def _waited_for(self, joined: set[str], soon: float) -> bool:
        """Hosts not in the write with unflushed work, a request in flight, or one starting by ``soon``."""
        return bool(self._dirty - joined) or any(
            start <= soon for host, start in self._soon.items() if host not in joined
        )

    def gathering(self) -> bool:
        """A write is open: a host with unflushed work that joins it now shares its objects."""
        with self._cond:
            return self._open is not None

    def write(self, host: str, pending: list[Fetched], now: float) -> str | None:
        """Write ``pending`` with what other hosts flush now; the WARC's key if ``pending`` has an exchange."""
        with self._cond:
            self._dirty.discard(host)
            batch = self._open
            leader = batch is None
            if batch is None:
                batch = self._open = _Write()
            batch.pending += pending
            batch.hosts.add(host)
            self._cond.notify_all()
            if not leader:
                while not batch.done:
                    self._cond.wait()
            else:
                until = self.wait_clock() + self.gather_seconds
                soon = self.clock() + self.gather_seconds
                while self._waited_for(batch.hosts, soon) and (left := until - self.wait_clock()) > 0:
                    self._cond.wait(left)
                self._open = None
                self._next_slot = self.clock() + self.min_gap_seconds
        if leader:
            try:
                batch.key = write_objects(self.put, batch.pending, now, self.count)
            except BaseException as exc:
                batch.error = exc
            with self._cond:
                batch.done = True
                self._cond.notify_all()
        if batch.error is not None:
            raise batch.error
        return batch.key if any(f.exchange is not None for f in pending) else None
