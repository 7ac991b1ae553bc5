"""Host runs: what the frontier and fetch need from storage, and the shapes they exchange.

The unit of fetch work is a host's **run** (issue 14): every URL of a host
waits in the host's **backlog**, shallowest first, and one fetch invocation
at a time holds the host's **lease** and works through it, spacing requests
by the host's delay.  Two ports hold the state:

* ``Runs``, one item per host name: whether the host has a run (``run_id``)
  and until when it may be replaced if its messages are lost
  (``run_expires``); who holds its lease and until when (``holder``,
  ``lease_until``); when its last request started (``last_start``), and its
  ``pause_until`` (a server's Retry-After) and ``adaptive_delay``.  Every
  change is one conditional write.
* ``Backlog``: the host's waiting fetch tasks in **bundles**, one item per
  bundle of tasks of one depth, so one write admits many URLs; served
  shallowest first.

The races they are built for, and how each is closed:

* **A duplicate or redelivered run message** must not start a second chain:
  a lease is taken only for the host's current ``run_id`` and only while no
  unexpired lease is held by another holder; a holder that gives the lease
  back for a later wake-up gives the run a new ``run_id``, carried by the
  wake-up message alone.
* **A lost wake-up**: a URL enqueued while the holder releases an empty
  backlog.  Dispatch adds the bundle *before* it asks for a run
  (``schedule``); the holder ends the run (``release(next_run=None)``)
  *before* it looks at the backlog one last time.  Whichever comes second
  sees the other's write.
* **A lost reply on the lease write**: the lease stores the holder's token;
  the same holder retrying finds its own token and has the lease.
* **A holder that dies**: its lease expires (``lease_until``, a condition on
  the item, never DynamoDB's TTL, whose deletes lag by days); the next
  holder waits until ``lease_until`` plus the delay before its first
  request, since the dead holder may have sent one just before.  Its
  unfinished bundles stay in the backlog, so no URL is lost; a page it had
  fetched but not yet flushed is fetched again.
* **A run whose messages are lost** (a crash loop ending in the DLQ):
  ``schedule`` may replace a run past ``run_expires``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from crawlstack.messages import FetchTask


@dataclass(frozen=True)
class HostRun:
    """One host's run item as it was read or written."""

    host: str
    run_id: str | None = None  # None: the host has no run
    run_expires: float = 0.0
    holder: str | None = None  # the lease holder's token; None: not leased
    lease_until: float = 0.0
    last_start: float = 0.0  # 0.0: no request recorded
    pause_until: float = 0.0
    adaptive_delay: float | None = None


@dataclass(frozen=True)
class Bundle:
    """Tasks of one host and depth, admitted together: one backlog item.

    ``key`` orders the host's bundles, shallowest first (it starts with the
    depth, zero-padded); it is unique per bundle.
    """

    host: str
    key: str
    tasks: tuple[FetchTask, ...]


class Runs(Protocol):
    """The hosts table's run items (one per host name)."""

    def schedule(self, host: str, run_id: str, now: float, expires: float) -> bool:
        """Give the host the run ``run_id``, if it has none or its run is past ``run_expires``; True if given.

        The winner sends the run's message; a loser does nothing, since the
        host's current run will find what was added to its backlog.
        ``run_id`` is new for each call, so a call retried with it (after a
        lost reply) that finds the host's run is ``run_id`` is True.
        """
        ...

    def lease(self, host: str, run_id: str, holder: str, now: float, until: float) -> HostRun | None:
        """Take the lease for run ``run_id`` until ``until``; the item as it was before, or None if refused.

        Refused when the host's run is not ``run_id`` (a stale or duplicate
        message) or another holder's lease runs past ``now``.  Taken again
        by the same ``holder`` (a retry after a lost reply) it succeeds, and
        the item before then shows that holder's own lease: what the first
        attempt found is gone, but a lease it took over had ended by ``now``.
        The item before tells the new holder when it may send its first
        request (``crawlstack.fetch.pacing.first_start``).
        """
        ...

    def renew(self, host: str, holder: str, until: float, last_start: float) -> bool:
        """Extend the lease to ``until`` and record ``last_start``, while ``holder`` holds it; False if lost."""
        ...

    def release(
        self,
        host: str,
        holder: str,
        last_start: float,
        pause_until: float,
        adaptive_delay: float | None,
        next_run: str | None,
        expires: float = 0.0,
    ) -> bool:
        """Give the lease back, recording the host's last request start, pause and adaptive delay.

        ``next_run``: the run goes on as ``next_run`` (the id its wake-up
        message carries), not to be replaced before ``expires``; a new id
        makes every earlier message of the run stale, so a redelivered one
        cannot start a second chain.  None: the run ends, and the next
        ``schedule`` starts one.  Only while ``holder`` holds the lease;
        False if it did not.  Repeated by the same ``holder`` (a retry after
        a lost reply) with no lease taken since, it is True; once another
        holder took the lease, False.
        """
        ...

    def get(self, host: str) -> HostRun:
        """The host's run item (consistent read); an empty ``HostRun`` when there is none."""
        ...


class Backlog(Protocol):
    """Each host's waiting fetch tasks, in bundles, shallowest first."""

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        """Store ``tasks`` (all of ``host`` and ``depth``) in as few bundles as fit an item; their keys."""
        ...

    def peek(self, host: str, limit: int, after: str | None = None, consistent: bool = True) -> list[Bundle]:
        """The host's first ``limit`` bundles, shallowest first (a consistent read).

        ``after``: only bundles whose key sorts after it, so a holder with
        served bundles in hand, not yet flushed (and so still stored),
        reads on past them rather than reading them again.
        ``consistent=False``: an eventually consistent read, for half the
        price, that may miss a bundle just added (a lingering run's polls:
        the next poll, or the consistent look at its end, finds it).
        """
        ...

    def replace(self, host: str, key: str, tasks: Sequence[FetchTask]) -> None:
        """What is left of a bundle partly served, under its key; no tasks deletes it.

        A bundle no longer there stays gone: a later holder served it, and
        writing it back would fetch its URLs again.
        """
        ...

    def delete(self, host: str, key: str) -> None:
        """A bundle whose every task was served and flushed."""
        ...

    def waiting(self) -> int:
        """Tasks waiting in every backlog (a scan: for a local crawl's summary, not a Lambda)."""
        ...
