"""What a batch sends when it is done: frontier re-sends, and fetch tasks for host runs.

``runs``: the tasks admitted to host runs (``crawlstack.dispatch.run_enqueue``),
written to their hosts' backlogs when the batch is sent (``flush_runs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawlstack.runs.admission import RunAdmissions


@dataclass
class Outbox:
    """What a batch sends when it is done: frontier re-sends (body, SQS delay), and tasks for host runs."""

    frontier: list[tuple[str, int]] = field(default_factory=list)
    runs: RunAdmissions = field(default_factory=RunAdmissions)

    def clear(self) -> None:
        """Forget what was sent."""
        self.frontier.clear()
        self.runs.clear()
