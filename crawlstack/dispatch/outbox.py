"""What a batch sends when it is done: fetch tasks and frontier re-sends (dispatch's and fetch's).

``runs``: the tasks admitted to host runs (``crawlstack.dispatch.run_enqueue``),
written to their hosts' backlogs when the batch is sent (``flush_runs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawlstack.messages import FetchTask
from crawlstack.politeness import sqs_delay
from crawlstack.runs.admission import RunAdmissions


@dataclass
class Outbox:
    """What a batch sends when it is done: fetch tasks, frontier re-sends, and tasks for host runs."""

    fetch: list[tuple[str, int]] = field(default_factory=list)
    frontier: list[tuple[str, int]] = field(default_factory=list)
    unparked: dict[str, list[str | None]] = field(default_factory=dict)
    runs: RunAdmissions = field(default_factory=RunAdmissions)

    def add_fetch(self, task: FetchTask, now: float, parked_order: str | None = None, *, admitted: bool = True) -> None:
        """Queue ``task`` to wait in SQS for its slot.

        ``admitted``: it comes from an admission or an unpark, so its parked
        row (None if it never parked) is deleted once it is sent.
        """
        self.fetch.append((task.to_json(), sqs_delay(task.not_before, now)))
        if admitted:
            self.unparked.setdefault(task.host, []).append(parked_order)

    def clear(self) -> None:
        """Forget what was sent (``dispatch_in_turns`` sends part of a batch early)."""
        self.fetch.clear()
        self.frontier.clear()
        self.unparked.clear()
        self.runs.clear()
