"""A page's line in the crawl log, as extraction reads and writes it through the urls table.

Extraction reads each page's depth there (smaller than its WARC's when the
URL was found again nearer a seed), and writes back what became of the page:
a page whose extraction failed is ``failed`` with its reason, and gets a
crawl-log line in S3 at once (for Athena); a page whose values were changed
to be stored gets a note.
"""

from __future__ import annotations

import time

from crawlstack import settings
from crawlstack.errors import failure
from crawlstack.extract.metadata import page_metadata
from crawlstack.extract.ports import PageOutcomes
from crawlstack.fetch.crawllog import PageFailure, failure_objects
from crawlstack.fetch.warc import WarcPage
from crawlstack.ports import Blobs
from crawlstack.rules.budget import BudgetExceeded


def failure_reason(exc: Exception) -> str:
    """A failed page's reason: its budget's own words, else the exception's type and place (never its message)."""
    return str(exc) if isinstance(exc, BudgetExceeded) else f"extraction failed: {failure(exc)}"


def stored_depths(outcomes: PageOutcomes | None, pages: list[WarcPage]) -> dict[tuple[str, str], int]:
    """The urls table's depth of each page (one batched read per crawl): smaller when found again nearer a seed."""
    if outcomes is None:
        return {}
    by_crawl: dict[str, list[str]] = {}
    for archived in pages:
        meta = page_metadata(archived.metadata)
        if meta.get("fp") and 200 <= archived.status < 300:
            by_crawl.setdefault(str(meta.get("crawl_id") or settings.DEFAULT_CRAWL_ID), []).append(meta["fp"])
    return {
        (crawl_id, fp): depth
        for crawl_id, fps in by_crawl.items()
        for fp, depth in outcomes.depths(crawl_id, fps).items()
    }


def record_outcomes(
    blobs: Blobs,
    outcomes: PageOutcomes | None,
    warc_key: str,
    failed: list[PageFailure],
    notes: list[tuple[str, str, str]],
) -> None:
    """Failed pages get crawl-log lines (S3, for Athena) and become ``failed`` in the urls table, notes too."""
    if failed:
        for key, data in failure_objects(failed, warc_key, time.time()).items():
            blobs.put(key, data, "application/x-ndjson")
    if outcomes is None:
        return
    for page in failed:
        if page.fp:
            outcomes.set_outcome(page.crawl_id, page.fp, "failed", reason=page.reason)
    for crawl_id, fp, note in notes:
        outcomes.add_note(crawl_id, fp, note)
