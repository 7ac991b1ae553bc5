"""The queue port: what an event source (local mode's pump, ``crawlstack.local.pump``) needs of a queue.

SQS's semantics, which both implementations keep (``crawlstack.aws.queues``
on SQS, ``crawlstack.local.sqlite.queues`` on SQLite), each under one
conformance suite (``tests/integration/test_queue_port.py``):

* a message sent with a delay is not received before it;
* a message received is hidden for the visibility timeout, then received
  again (its ``receive_count`` one more) unless deleted by its receipt;
* a message received ``max_receives`` times and not deleted goes to the
  queue's dead-letter queue at its next receive;
* ``depth`` counts messages visible, in flight (received, hidden) and
  delayed (sent, not yet visible).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Received:
    """One message as a receive hands it out."""

    message_id: str
    body: str
    receipt: str  # deletes it, or changes its visibility, until it is received again
    receive_count: int
    sent_at: float  # epoch seconds


@dataclass(frozen=True)
class Depth:
    visible: int
    in_flight: int
    delayed: int


class MessageQueue(Protocol):
    def send(self, messages: Iterable[tuple[str, int]]) -> int:
        """Send (body, delay seconds) pairs; how many."""
        ...

    def receive(self, most: int, visibility_timeout: int) -> list[Received]:
        """Up to ``most`` messages visible now, each hidden for ``visibility_timeout`` seconds."""
        ...

    def delete(self, receipts: Sequence[str]) -> None: ...

    def change_visibility(self, receipts: Sequence[str], timeout: int) -> None:
        """Hide each message for ``timeout`` seconds from now (0: visible at once)."""
        ...

    def depth(self) -> Depth: ...
