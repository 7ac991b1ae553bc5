"""Run admission: a dispatch batch's fetch tasks into their hosts' backlogs, and a run for each host that has none.

Dispatch gathers what it admits during a batch (``RunAdmissions``, by host
and depth: a page's links are mostly of its own host, so one bundle write
admits many URLs), then ``admit`` writes them once the batch is done:

1. for each host, its tasks of each depth go to the backlog
   (``Backlog.add``: one bundle, or a few if they outgrow
   ``settings.BACKLOG_BUNDLE_BYTES``);
2. then, once per host, a consistent read of its run (``Runs.get``) and,
   if it has none (or one past its ``run_expires``), ``Runs.schedule``
   with a new run id.  The winner's ``RunMessage`` is returned for the
   caller to send; a loser sends nothing, since the host's current run
   will find the new bundles.

**Look after every add.**  The lost wake-up (``crawlstack.runs.ports``):
the holder ends its run *before* its last look at the backlog, and
admission adds *before* it looks at the run, so whichever comes second
sees the other's write.  That holds only if every add is followed by a
look at the run item as it is now: a container that remembered "this host
has a live run" would be wrong as soon as the holder released the run,
and the bundle would wait with no run to serve it.  A consistent read
sees every write before it, as the conditional write's own check does, so
a live run found by the read is the refusal ``schedule`` would have met
(``has_live_run``), for a read unit rather than the write unit a refused
condition is billed; a host with no run pays both.

**Failures.**  Hosts are admitted one after another; the first failure
stops the rest and raises ``AdmissionFailed`` (the store's error as its
``__cause__``), carrying the run messages already won, which the caller
must still send (``flush_runs`` in ``crawlstack.dispatch.run_enqueue``
does), since their runs exist now and nothing else would start them.

* The backlog write fails: nothing is scheduled for that host (its tasks
  may be partly written: ``BacklogStore.add`` writes in batches).
* ``schedule`` fails after the host's bundles were written: they stay in
  the backlog and wait for the host's next run, which some later admission
  to the host starts (its ``schedule`` finds no run, or an expired one).
  A host that sees no later admission would wait for ever, so the failure
  propagates out of the batch's send and fails the batch: its messages are
  redelivered, their URLs claimed again under the same message ids
  (``crawlstack.dispatch.dedupe``), added again (a second copy of each
  task, under new keys: the run fetches a URL once, ``crawlstack.fetch.tries``) and
  scheduled again.  Only a batch that fails until its messages reach the
  DLQ strands its bundles; a sweep of hosts with a backlog and no run
  would recover those (not built).

Settings: ``settings.MAX_SQS_DELAY_SECONDS`` and
``settings.RUN_SCHEDULE_GRACE_SECONDS`` (``run_expires``);
``settings.BACKLOG_BUNDLE_BYTES`` through the backlog.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from crawlstack import settings
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.runs.ports import Backlog, HostRun, Runs


class AdmissionFailed(Exception):
    """A backlog write or a schedule failed (``__cause__``); ``messages``: runs won before it, still to be sent."""

    def __init__(self, host: str, messages: list[RunMessage]) -> None:
        super().__init__(f"admission to host {host!r} failed")
        self.host = host
        self.messages = messages


def new_run_id() -> str:
    """A run id never used before: the token a retried ``schedule`` recognises as its own."""
    return uuid.uuid4().hex


def run_expires(now: float) -> float:
    """Until when a new run may not be replaced: its message's longest SQS delay, and time to take its first lease."""
    return now + settings.MAX_SQS_DELAY_SECONDS + settings.RUN_SCHEDULE_GRACE_SECONDS


@dataclass
class RunAdmissions:
    """A batch's admitted fetch tasks by host, then depth, in the order admitted.

    A URL is gathered once per batch (by crawl and fingerprint): a message
    that names it twice passes dedupe twice under its own id.  ``senders``:
    the ids of the queue messages whose tasks each host holds, so a failed
    admission fails only those messages (``unadmitted``).
    """

    hosts: dict[str, dict[int, list[FetchTask]]] = field(default_factory=dict)
    senders: dict[str, set[str]] = field(default_factory=dict)
    _seen: set[tuple[str, str]] = field(default_factory=set, repr=False)

    def add(self, task: FetchTask, message_id: str = "") -> None:
        self.senders.setdefault(task.host, set()).add(message_id)
        key = (task.crawl_id, task.fp)
        if key in self._seen:
            return
        self._seen.add(key)
        self.hosts.setdefault(task.host, {}).setdefault(task.depth, []).append(task)

    def __len__(self) -> int:
        return len(self._seen)

    def __iter__(self) -> Iterator[tuple[str, list[tuple[int, list[FetchTask]]]]]:
        """Each host (in the order first admitted) with its tasks by depth, shallowest first."""
        for host, depths in self.hosts.items():
            yield host, sorted(depths.items())

    def clear(self) -> None:
        self.hosts.clear()
        self.senders.clear()
        self._seen.clear()

    def unadmitted(self, exc: BaseException) -> set[str]:
        """The messages whose tasks a failed admission (``exc``) may have left out: theirs to fail and redeliver.

        ``admit`` stops at the host that failed, so its messages and those of
        every host after it; any other failure (sending the run messages won)
        leaves no host known to be done, so every message that gave a task.
        """
        hosts = list(self.hosts)
        if isinstance(exc, AdmissionFailed) and exc.host in self.hosts:
            hosts = hosts[hosts.index(exc.host) :]
        return {sender for host in hosts for sender in self.senders.get(host, ())}


def has_live_run(run: HostRun, now: float) -> bool:
    """Whether ``Runs.schedule`` at ``now`` would be refused: the host has a run not past its ``run_expires``."""
    return run.run_id is not None and run.run_expires >= now


def admit(
    admissions: RunAdmissions,
    backlog: Backlog,
    runs: Runs,
    now: float,
    new_run_id: Callable[[], str] = new_run_id,
) -> list[RunMessage]:
    """Add each host's tasks to its backlog, then schedule its run; the run messages of the schedules won.

    Raises ``AdmissionFailed`` at the first failure (the module docstring
    says what is left behind); hosts after it are not admitted.
    """
    won: list[RunMessage] = []
    expires = run_expires(now)
    for host, depths in admissions:
        try:
            for depth, tasks in depths:
                backlog.add(host, depth, tasks)
            # After every add, whatever this container saw of the host's run before: the lost wake-up.
            if has_live_run(runs.get(host), now):
                continue
            run_id = new_run_id()
            if runs.schedule(host, run_id, now, expires):
                won.append(RunMessage(host, run_id))
        except Exception as exc:
            raise AdmissionFailed(host, won) from exc
    return won


def admit_and_send(
    admissions: RunAdmissions,
    backlog: Backlog,
    runs: Runs,
    now: float,
    send: Callable[[list[RunMessage]], object],
    new_run_id: Callable[[], str] = new_run_id,
) -> list[RunMessage]:
    """``admit``, then ``send`` the run messages won; those messages.

    On a failure the runs already won are sent before ``AdmissionFailed``
    propagates: their runs exist, and nothing else would start them.
    """
    try:
        won = admit(admissions, backlog, runs, now, new_run_id)
    except AdmissionFailed as exc:
        if exc.messages:
            send(exc.messages)
        raise
    if won:
        send(won)
    return won
