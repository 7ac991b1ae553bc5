"""A batch dispatched a link at a time from each of its messages, and sent as it goes.

Settings: ``EARLY_TURNS``, ``EARLY_SEND_SECONDS``, ``settings.SQS_BATCH_SIZE``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol, TypeVar

from crawlstack import settings
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.messages import FrontierMessage

K = TypeVar("K", bound=Hashable)

# Turns after which dispatch_in_turns sends what it admitted, however little:
# they give each host its first window places.
EARLY_TURNS = 2
# After those, what it admitted waits at most this long for a full
# SendMessageBatch: a long batch must not hold tasks past their slots.
EARLY_SEND_SECONDS = 0.2


class Dispatches(Protocol):
    def dispatch(self, msg: FrontierMessage | Link, outbox: Outbox, message_id: str = "") -> Decision: ...


def dispatch_in_turns(
    dispatcher: Dispatches,
    batch: Iterable[tuple[K, str, list[FrontierMessage]]],
    outbox: Outbox,
    send: Callable[[Outbox], None],
    on_decision: Callable[[FrontierMessage, Decision], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    before: Callable[[Link], None] | None = None,
) -> dict[K, Exception]:
    """Dispatch a batch's messages a link at a time from each: the first link of every message, then the second...

    ``batch``: (key, message id, links) per queue message (a bundle's links,
    or one message).  Each page's links come as one bundle, mostly of one
    host; taken bundle by bundle, the last host's first links would wait
    for every earlier bundle's, and their fetches for the whole batch.  In
    turns, every host gets its first window places at once, and those tasks
    are sent after each of the first ``EARLY_TURNS`` turns; later ones once
    a full SendMessageBatch is ready or ``EARLY_SEND_SECONDS`` after the
    last send, so a long batch holds no task long past its slot.
    ``outbox`` keeps the rest for the batch's own send.  Sending early loses nothing: a task sent is one that
    holds a window place, which must go out anyway.

    ``before`` is called with each link before it is dispatched (the
    handler binds its log keys; the link's fingerprint, worked out then, is
    the one dispatch uses), ``on_decision`` with what became of its message.

    Returns the exception of each message one of whose links failed; its
    later links are not dispatched (its redelivery finds the ones before
    claimed by its own id).  ``send`` failing raises: the whole batch is
    then tried again, as when the batch's own send fails.
    """
    failed: dict[K, Exception] = {}
    pending = [(key, message_id, iter(links)) for key, message_id, links in batch]
    turn = 0
    sent_at = clock()
    while pending:
        turn += 1
        still = []
        for key, message_id, links in pending:
            msg = next(links, None)
            if msg is None:
                continue
            link = Link(msg, message_id)
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
        if not outbox.fetch:
            continue
        now = clock()
        if turn <= EARLY_TURNS or len(outbox.fetch) >= settings.SQS_BATCH_SIZE or now - sent_at >= EARLY_SEND_SECONDS:
            send(outbox)
            outbox.clear()
            sent_at = now
    return failed
