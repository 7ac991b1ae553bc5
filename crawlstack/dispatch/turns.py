"""A batch dispatched a link at a time from each of its messages.

Each page's links come as one bundle, mostly of one host.  Taken bundle by
bundle, a batch whose budget or host cap runs out would spend it all on its
first pages' hosts; in turns, every message's first link goes before any
message's second.  What the batch admits is sent once, when it is done
(``crawlstack.wiring.Services.flush``): each host's tasks in one backlog
write and one run schedule, however many of its links the batch held.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Protocol, TypeVar

from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.messages import FrontierMessage

K = TypeVar("K", bound=Hashable)


class Dispatches(Protocol):
    def dispatch(self, msg: FrontierMessage | Link, outbox: Outbox, message_id: str = "") -> Decision: ...


def dispatch_in_turns(
    dispatcher: Dispatches,
    batch: Iterable[tuple[K, str, list[FrontierMessage] | list[Link]]],
    outbox: Outbox,
    on_decision: Callable[[FrontierMessage, Decision], None] | None = None,
    before: Callable[[Link], None] | None = None,
) -> dict[K, Exception]:
    """Dispatch a batch's messages a link at a time from each: the first link of every message, then the second...

    ``batch``: (key, message id, links) per queue message (a bundle's links,
    or one message; as ``Link``s when the batch was prepared with them).
    ``before`` is called with each link before it is dispatched (the
    handler binds its log keys; the link's fingerprint, worked out then, is
    the one dispatch uses), ``on_decision`` with what became of its message.

    Returns the exception of each message one of whose links failed; its
    later links are not dispatched (its redelivery finds the ones before
    claimed by its own id).
    """
    failed: dict[K, Exception] = {}
    pending: list[tuple[K, str, Iterator[FrontierMessage | Link]]] = [
        (key, message_id, iter(links)) for key, message_id, links in batch
    ]
    while pending:
        still = []
        for key, message_id, links in pending:
            item = next(links, None)
            if item is None:
                continue
            link = Link.of(item, message_id)
            msg = link.msg
            if before is not None:
                before(link)
            try:
                decision = dispatcher.dispatch(link, outbox, message_id=message_id)
            except Exception as exc:  # this message fails; the batch goes on
                failed[key] = exc
                continue
            if on_decision is not None:
                on_decision(msg, decision)
            still.append((key, message_id, links))
        pending = still
    return failed
