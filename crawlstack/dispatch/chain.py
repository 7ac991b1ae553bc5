"""A chain of dispatch components: each says what became of a link, or lets it go on to the next."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox


class Step(Protocol):
    def __call__(self, link: Link, outbox: Outbox) -> Decision | None:
        """A Decision ends the link's way through the chain; None lets it go on."""
        ...


class Chain:
    """Runs a link through its steps in order, until one of them decides."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = tuple(steps)

    def __call__(self, link: Link, outbox: Outbox) -> Decision:
        for step in self.steps:
            decision = step(link, outbox)
            if decision is not None:
                return decision
        raise RuntimeError("no step of the chain decided what becomes of the link")
