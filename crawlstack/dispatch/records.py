"""RecordComplete: a message for a record already complete is skipped, before robots.txt and dedupe.

A message for a record (``record_id`` and ``want``) every wanted field of
which is found (``crawlstack.records.resolution``) is skipped, before any
robots.txt request, without taking the URL's claim: another record (or a
seed without one) may still need the page.  It is noted only where the
crawl has no item for the URL yet, so the crawl log says why it was not
fetched; a later claim takes the note over.

Completion is read once per batch (``prepare``, one batched read for the
batch's record ids; if it fails, each message reads alone); a record seen
complete is remembered by the container (``CompletedRecords``, shared with
fetch), since completion never reverts.
Messages without ``record_id`` and ``want`` cost no read.

Settings: none.
"""

from __future__ import annotations

from collections.abc import Iterable

from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.messages import FrontierMessage
from crawlstack.ports import Urls
from crawlstack.records.resolution import RECORD_COMPLETE, CompletedRecords, ResolvedRecords, read_complete


class RecordComplete:
    def __init__(self, urls: Urls, resolved: ResolvedRecords, completed: CompletedRecords | None = None) -> None:
        self.urls = urls
        self.resolved = resolved
        self.completed = completed if completed is not None else CompletedRecords()
        # Records read incomplete by ``prepare`` for the batch being dispatched.
        self._incomplete: set[tuple[str, str]] = set()

    def prepare(self, messages: Iterable[FrontierMessage]) -> None:
        """Read, in one go, which records the batch's messages resolve are complete."""
        keys = {(msg.crawl_id, msg.record_id) for msg in messages if msg.record_id and msg.want}
        self._incomplete = set()  # the last batch's answers, never this one's, if the read fails
        self._incomplete = keys - read_complete(self.resolved, self.completed, keys) if keys else set()

    def __call__(self, link: Link, outbox: Outbox) -> Decision | None:
        if not self.complete(link.msg):
            return None
        self.urls.note_skip(link.msg.crawl_id, link.fp, link.url, link.msg.depth, RECORD_COMPLETE)
        return Decision(link.url, "skipped", RECORD_COMPLETE, "record-complete")

    def complete(self, msg: FrontierMessage) -> bool:
        """Whether ``msg``'s record is complete: from memory once its batch is prepared."""
        if not msg.record_id or not msg.want:
            return False
        key = (msg.crawl_id, msg.record_id)
        if key in self.completed:
            return True
        if key in self._incomplete:
            return False
        # Not prepared with its batch: read it alone (and keep no "incomplete"
        # answer, which only holds for the batch it was read for).
        return bool(read_complete(self.resolved, self.completed, [key]))
