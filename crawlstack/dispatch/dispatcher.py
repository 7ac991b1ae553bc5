"""Dispatcher: the dispatch components composed into one chain, in their order."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from crawlstack.dispatch.canonicalise import Canonicalise
from crawlstack.dispatch.caps import BudgetAndCaps
from crawlstack.dispatch.chain import Chain, Step
from crawlstack.dispatch.dedupe import Dedupe
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.records import RecordComplete
from crawlstack.dispatch.robots import Robots
from crawlstack.dispatch.run_enqueue import RunEnqueue
from crawlstack.dispatch.scope import Scope
from crawlstack.errors import failure
from crawlstack.messages import FrontierMessage

log = logging.getLogger(__name__)


class Dispatcher:
    """Frontier message -> canonical, in-scope, new, robots-allowed URL -> its host's backlog.

    The order (``crawlstack.dispatch``): canonicalise, scope, limits this
    container knows spent, record complete, robots.txt, the dedupe claim,
    robots.txt's verdict, host cap and budget, enqueue into the host's run.  Without
    ``record_complete`` no message is skipped for its record.
    """

    def __init__(
        self,
        *,
        canonicalise: Canonicalise,
        scope: Scope,
        limits: BudgetAndCaps,
        robots: Robots,
        dedupe: Dedupe,
        enqueue: RunEnqueue,
        record_complete: RecordComplete | None = None,
    ) -> None:
        self.scope = scope
        self.limits = limits
        self.robots = robots
        self.dedupe = dedupe
        self.record_complete = record_complete
        steps: list[Step] = [canonicalise, scope, limits.known_spent]
        if record_complete is not None:
            steps.append(record_complete)
        steps += [robots.load, dedupe, robots.check, limits.take, enqueue]
        self.chain = Chain(steps)

    def prepare(self, links: Iterable[Link]) -> None:
        """Before a batch: read, in one go, which records its links resolve are complete, and which URLs are known.

        A batched read that fails is left undone: each link then reads alone
        in its turn, so a key that breaks a read (one hostile message) fails
        its own message, not the batch.
        """
        links = list(links)
        try:
            if self.record_complete is not None:
                complete = self.record_complete
                complete.prepare(link.msg for link in links)
                links = [link for link in links if not complete.complete(link.msg)]  # skipped before dedupe
            self.dedupe.prepare(links)
        except Exception as exc:
            log.warning("a batched read failed (%s: %s); each message reads alone", failure(exc), str(exc)[:200])

    def dispatch(self, msg: FrontierMessage | Link, outbox: Outbox, message_id: str = "") -> Decision:
        """What becomes of one message (or a Link made of it, whose canonical URL may be known already)."""
        link = Link.of(msg, message_id)
        if message_id:
            link.message_id = message_id
        return self.chain(link, outbox)
