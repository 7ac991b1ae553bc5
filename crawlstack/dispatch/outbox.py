"""What a batch sends when it is done: fetch tasks and frontier re-sends (dispatch's and fetch's)."""

from __future__ import annotations

from dataclasses import dataclass, field

from crawlstack.messages import FetchTask
from crawlstack.politeness import sqs_delay


@dataclass
class Outbox:
    """What a batch sends when it is done: fetch tasks and frontier re-sends."""

    fetch: list[tuple[str, int]] = field(default_factory=list)
    frontier: list[tuple[str, int]] = field(default_factory=list)
    unparked: dict[str, list[str | None]] = field(default_factory=dict)

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
