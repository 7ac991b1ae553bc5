"""One host's work in a run since its last flush, and the flush that makes it durable.

A ``Ledger`` follows the bundles a holder took from the host's backlog
(which of their tasks are served) and what the served tasks left to write:
outcomes with their exchanges, redirects for the frontier, next tries.
``flush`` writes them in the one order that never loses a URL:

1. one WARC of the exchanges and the crawl-log objects of the outcomes
   (``write``: shared with the other hosts flushing at once,
   ``crawlstack.fetch.flush_objects``);
2. the redirects, to the frontier (``send_frontier``, or kept for the caller);
3. each URL's outcome that the urls table needs (``fetch_outcomes.record_outcome``:
   a retry's state ``retrying``, a retried URL's end, a failure; a page
   fetched or skipped on its first try is the crawl log's alone,
   ``fetch_outcomes.logged_only``), then each retry's next try into the
   backlog (its ``next_try`` needs ``retrying``);
4. the bundles: deleted once every task is served, a partly served one
   written back with what is left (not after the lease is lost: the next
   holder may be serving it).

A crash anywhere before 4 leaves the bundle in the backlog: its URLs are
fetched again by the next holder (allowed), never lost.  Flushes are due
every ``RUN_FLUSH_SECONDS`` or ``RUN_FLUSH_BYTES`` of exchanges
(``crawlstack.fetch.host_runner``), so extraction and outlinks go on while the
run does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from crawlstack.fetch.outcomes import Fetched, OutcomeUrls, logged_only, record_outcome
from crawlstack.messages import FetchTask
from crawlstack.runs.ports import Backlog, Bundle


@dataclass
class Flushed:
    """What one flush wrote."""

    fetched: list[Fetched]
    warc_key: str | None
    frontier: list[tuple[str, int]]


@dataclass
class _Progress:
    bundle: Bundle
    served: set[int] = field(default_factory=set)
    changed: bool = False  # served more since last written back


class Ledger:
    """One host's bundles in hand and its unflushed work (one thread: the host's)."""

    def __init__(
        self,
        host: str,
        backlog: Backlog,
        urls: OutcomeUrls,
        write: Callable[[list[Fetched], float], str | None],
        send_frontier: Callable[[list[tuple[str, int]]], object] | None = None,
        on_dirty: Callable[[], None] | None = None,
        on_clean: Callable[[], None] | None = None,
    ) -> None:
        self.host = host
        self.backlog = backlog
        self.urls = urls
        self.write = write
        self.on_dirty = on_dirty  # called when work is first left unflushed
        self.on_clean = on_clean  # called by a flush with nothing to write (``write`` was not)
        self.send_frontier = send_frontier
        self._bundles: dict[str, _Progress] = {}
        self.pending: list[Fetched] = []
        self.frontier: list[tuple[str, int]] = []
        self.retries: list[FetchTask] = []
        self.bytes = 0
        self.since: float | None = None  # when the oldest unflushed work was done

    # -- bundles -----------------------------------------------------------
    def take(self, bundles: list[Bundle]) -> None:
        """Bundles peeked from the backlog; one already in hand keeps what was served of it."""
        for bundle in bundles:
            if bundle.key not in self._bundles:
                self._bundles[bundle.key] = _Progress(bundle)

    def newest(self) -> str | None:
        """The key of the last bundle in hand (None: none), past which the backlog is read on."""
        return max(self._bundles, default=None)

    def unserved(self) -> list[tuple[str, int, FetchTask]]:
        """The tasks in hand not yet served, shallowest bundle first, in order."""
        return [
            (key, i, task)
            for key, progress in sorted(self._bundles.items())
            for i, task in enumerate(progress.bundle.tasks)
            if i not in progress.served
        ]

    def served(
        self,
        key: str,
        index: int,
        now: float,
        fetched: Fetched | None = None,
        frontier: list[tuple[str, int]] | None = None,
        retry: FetchTask | None = None,
    ) -> None:
        """Task ``index`` of bundle ``key`` needs nothing more but what is given here to write."""
        progress = self._bundles[key]
        progress.served.add(index)
        progress.changed = True
        if self.since is None:
            self.since = now
            if self.on_dirty is not None:
                self.on_dirty()
        if fetched is not None:
            self.pending.append(fetched)
            if fetched.exchange is not None:
                self.bytes += len(fetched.exchange.body)
            if fetched.retry is not None:
                self.retries.append(fetched.retry)
        if frontier:
            self.frontier.extend(frontier)
        if retry is not None:
            self.retries.append(retry)

    def dirty(self) -> bool:
        return self.since is not None or any(p.changed for p in self._bundles.values())

    # -- the flush ---------------------------------------------------------
    def flush(self, now: float, write_back: bool = True) -> Flushed:
        """WARC and crawl log, redirects, outcomes, retries, then the bundles; see the module's docstring."""
        pending, frontier, retries = self.pending, self.frontier, self.retries
        if pending:
            key = self.write(pending, now)
        else:
            key = None
            if self.on_clean is not None:
                self.on_clean()
        sent: list[tuple[str, int]] = []
        if frontier and self.send_frontier is not None:
            self.send_frontier(list(frontier))
        else:
            sent = list(frontier)
        for item in pending:
            if not item.recorded and not logged_only(item):
                record_outcome(self.urls, item, key)
        by_depth: dict[int, list[FetchTask]] = {}
        for retry in retries:
            by_depth.setdefault(retry.depth, []).append(retry)
        for depth, tasks in sorted(by_depth.items()):
            self.backlog.add(self.host, depth, tasks)
        # Written: nothing of it is written again, whatever the bundles' fate.
        self.pending, self.frontier, self.retries, self.bytes, self.since = [], [], [], 0, None
        for bkey, progress in list(self._bundles.items()):
            in_hand = progress.bundle.tasks
            if len(progress.served) == len(in_hand):
                self.backlog.delete(self.host, bkey)
                del self._bundles[bkey]
            elif progress.changed and write_back:
                left = tuple(t for i, t in enumerate(in_hand) if i not in progress.served)
                self.backlog.replace(self.host, bkey, left)
                # Indexes stay those of the bundle as peeked: the host may hold one between pick and serve.
                progress.changed = False
        return Flushed(pending, key, sent)

    def forget(self) -> None:
        """Let go of the bundles in hand (the run goes on elsewhere: they are read again from the backlog)."""
        self._bundles.clear()
