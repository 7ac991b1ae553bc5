"""A local crawl's dead-letter queues: ``crawlstack dlq show|redrive --local OUT``, and the pages they hold back.

Each queue of the state database has its dead-letter queue beside it
(``crawlstack.local.sqlite.queues``), where a message goes after its
failed tries (``settings.QUEUES``' ``max_receive_count``) or when it was in
flight at ``settings.MAX_CONSECUTIVE_KILLS`` kills in a row, with why.

* ``show`` reads them without a lock (the state opened read-only), as
  ``status --local`` does: it may run beside a crawl.
* ``redrive`` moves them back to their queues, as new messages.  It takes
  the crawl's lock: a crawl running on ``OUT`` refuses it, and no crawl
  starts on ``OUT`` while it moves them.  ``crawl --local --resume`` then
  delivers them.
* ``held_back_pages``: the pages of each WARC whose extract message is
  dead-lettered, for their crawl-log lines: fetched, but neither records
  nor links came of them.

Settings: ``settings.QUEUES``, ``settings.MAX_CONSECUTIVE_KILLS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from crawlstack import settings
from crawlstack.fetch.warc import WarcUnreadable, read_warc
from crawlstack.local.backend import LocalState, has_state, open_read_only
from crawlstack.local.outdir import STATE_FILE, StateError, crawl_running
from crawlstack.local.sqlite import FileBlobs, LocalBlobs, SqliteQueue, StateDb
from crawlstack.local.sqlite.queues import DeadLetter
from crawlstack.messages import created_objects


@dataclass(frozen=True)
class Shown:
    """One dead-letter queue: how many it holds, and the first of them."""

    key: str
    total: int
    letters: list[DeadLetter]


def dead_letter_queue(db: StateDb, key: str) -> SqliteQueue:
    return SqliteQueue(db, f"{key}-dlq")


def show(out: Path, keys: Iterable[str], limit: int) -> list[Shown]:
    """Up to ``limit`` dead letters of each queue in ``keys``; ``StateError`` if ``out`` holds no crawl's state."""
    db = open_read_only(out)
    try:
        shown = []
        for key in keys:
            queue = dead_letter_queue(db, key)
            shown.append(Shown(key, queue.depth().visible, queue.dead_letters(limit)))
        return shown
    finally:
        db.close()


def redrive(out: Path, keys: Iterable[str], limit: int | None) -> dict[str, int]:
    """Move up to ``limit`` dead letters of each queue back to it (all: None); how many per queue.

    Refused (``StateError``, nothing moved) while a crawl holds ``out``.
    """
    if not has_state(out):
        raise StateError(f"{out} holds no crawl state ({STATE_FILE})")
    if crawl_running(out):
        raise StateError(f"{out}: a crawl is running there; redrive once it has stopped (nothing was moved)")
    state = LocalState(out, "resume")  # the crawl's lock: no crawl starts on OUT while the messages move
    try:
        return {key: dead_letter_queue(state.db, key).move(key, limit) for key in keys}
    finally:
        state.close()


def held_back_pages(blobs: LocalBlobs | FileBlobs, dead_extract: SqliteQueue, crawl_id: str) -> dict[str, str]:
    """URL -> crawl-log reason for each page of ``crawl_id`` whose WARC's extraction is dead-lettered.

    Only pages extract would have read (2xx); a WARC gone or unreadable names none.
    """
    pages: dict[str, str] = {}
    for letter in dead_extract.dead_letters(None):
        reason = f"extraction dead-lettered: {letter.reason or 'moved there by hand'}"
        try:
            warcs = created_objects(letter.body)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not an S3 event: nothing names its pages
        for _bucket, key in warcs:
            try:
                archived = list(read_warc(blobs.get(key)))
            except (OSError, ValueError, WarcUnreadable):
                continue
            for page in archived:
                page_crawl = page.metadata.get("crawl_id") or settings.DEFAULT_CRAWL_ID
                if 200 <= page.status < 300 and page_crawl == crawl_id:
                    pages[page.url] = reason
    return pages
