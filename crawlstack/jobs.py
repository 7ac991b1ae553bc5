"""Crawl jobs: stop a crawl cheaply and resume it without losing or repeating work.

A crawl's ``state`` in the crawls table is ``running`` (the default) or
``stopped``.  Nothing is scanned or deleted to stop a crawl; its work is set
aside as it arrives:

* dispatch **holds** a frontier message of a stopped crawl (before scope,
  robots.txt or the dedupe claim, so the URL stays unclaimed);
* a host's run **holds** a fetch task of a stopped crawl before any wait or
  request, and goes on to the host's next task (perhaps another crawl's), so
  the host's other crawls go on.

A held item is a row of the parked table under the pseudo-host
``held#<crawl_id>`` (host names never contain ``#``), keyed by what it is:
``f#<hash of the message>`` or ``t#<fingerprint>``, so a redelivered message
or task holds onto the same row.  ``Held.hold`` writes the row only while the
crawl is stopped, atomically (a DynamoDB transaction with a condition check
on the crawl's item); when it finds the crawl running again it returns False
and the caller goes on as usual.  So a hold can never land after ``resume``
has set the crawl running and read the held rows: nothing is stranded.

``resume`` sets the crawl running, then sends every held frontier message
back to the frontier and adds every held fetch task back to its host's
backlog, scheduling the host's run (``crawlstack.runs.admission``), deleting
each row only once sent or added:
at least once, and exactly once unless ``resume`` dies midway (a frontier
message sent twice is dropped by dedupe; a fetch task added twice is
fetched once if one run serves both copies, else again).

Containers cache a crawl's config for ``STATE_CACHE_SECONDS``, so a stop
takes effect within that time: after it, no request of the crawl starts
(a request already in flight finishes).  Pages fetched before the stop are
still extracted; their outlinks are held by dispatch.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from crawlstack.messages import FetchTask, FrontierMessage, RunMessage
from crawlstack.runs.admission import RunAdmissions, admit_and_send
from crawlstack.runs.ports import Backlog, Runs

RUNNING = "running"
STOPPED = "stopped"
STATES = (RUNNING, STOPPED)
# How long a container acts on a crawl's cached config: the bound on how
# long a stop takes to reach every dispatcher and fetcher.
STATE_CACHE_SECONDS = 10.0
HELD_PREFIX = "held#"
FRONTIER_KEY = "f#"
TASK_KEY = "t#"
HELD_PAGE = 100


class UnknownCrawl(LookupError):
    """The crawls table has no item for this crawl id."""


class CrawlStates(Protocol):
    def set_state(self, crawl_id: str, state: str) -> None: ...


class Held(Protocol):
    def hold(self, crawl_id: str, key: str, body: str) -> bool: ...
    def held(self, crawl_id: str, limit: int) -> list[tuple[str, str]]: ...
    def release(self, crawl_id: str, key: str) -> None: ...


class Sender(Protocol):
    def send(self, messages: Iterable[tuple[str, int]]) -> int: ...


def held_host(crawl_id: str) -> str:
    """The parked table's partition holding a crawl's held work."""
    return HELD_PREFIX + crawl_id


def message_key(msg: FrontierMessage) -> str:
    return FRONTIER_KEY + hashlib.sha256(msg.to_json().encode()).hexdigest()[:32]


def task_key(task: FetchTask) -> str:
    return TASK_KEY + task.fp


def hold_message(held: Held, msg: FrontierMessage) -> bool:
    """Set a frontier message aside while its crawl is stopped; False if the crawl runs."""
    return held.hold(msg.crawl_id, message_key(msg), msg.to_json())


def hold_task(held: Held, task: FetchTask) -> bool:
    """Set a fetch task aside while its crawl is stopped; False if the crawl runs."""
    return held.hold(task.crawl_id, task_key(task), task.to_json())


def stop(crawl_id: str, crawls: CrawlStates) -> None:
    """Stop a crawl: its messages and tasks are held from now on (within ``STATE_CACHE_SECONDS``)."""
    crawls.set_state(crawl_id, STOPPED)


def resume(
    crawl_id: str,
    crawls: CrawlStates,
    held: Held,
    frontier: Sender,
    backlog: Backlog,
    runs: Runs,
    send_runs: Callable[[list[RunMessage]], object],
    clock: Callable[[], float] = time.time,
) -> int:
    """Run a stopped crawl again; returns how many held items were sent back.

    The state is set first: from then on no hold succeeds, so the rows read
    below are all there will be.  A held task goes back to its host's
    backlog without its old backoff, and the host's run is scheduled (the
    run messages of the runs started are sent).
    """
    crawls.set_state(crawl_id, RUNNING)
    sent = 0
    while True:
        rows = held.held(crawl_id, HELD_PAGE)
        if not rows:
            return sent
        messages = [(key, body) for key, body in rows if not key.startswith(TASK_KEY)]
        if messages:
            frontier.send((body, 0) for _, body in messages)
            for key, _ in messages:
                held.release(crawl_id, key)
                sent += 1
        tasks = [(key, FetchTask.from_json(body)) for key, body in rows if key.startswith(TASK_KEY)]
        if tasks:
            admissions = RunAdmissions()
            for _, task in tasks:
                admissions.add(replace(task, not_before=0.0))
            admit_and_send(admissions, backlog, runs, clock(), send_runs)
            for key, _ in tasks:
                held.release(crawl_id, key)
                sent += 1
