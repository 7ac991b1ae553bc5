"""``Extractor``: one WARC from S3 -> its pages' records, outlinks and crawl-log outcomes.

Each archived 2xx response is read in its own budget
(``settings.EXTRACTION_BUDGET_SECONDS``, ``crawlstack.rules.budget``) and
pattern context (``crawlstack.rules.patterns``): whatever the page holds costs
that page alone, which fails with its crawl-log line while the rest of the
WARC goes on.  A page's depth is the smallest it was found at before it was
extracted: the urls table's, read once per WARC.  A watch's checked page
goes to its check instead (``crawlstack.watch.pages``).

The parts: a page's records and their resolution (``records``), its
outlinks (``outlinks``), its crawl-log outcome (``outcomes``), the WARC
metadata read (``metadata``), and the stores (``ports``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.extract.metadata import page_metadata
from crawlstack.extract.outcomes import failure_reason, record_outcomes, stored_depths
from crawlstack.extract.outlinks import SentLinks, SkippedLinks, frontier_batch, page_outlinks
from crawlstack.extract.page_records import Resolution, page_records, write_records
from crawlstack.extract.ports import PageOutcomes
from crawlstack.fetch.crawllog import PageFailure
from crawlstack.fetch.warc import WarcPage, read_warc
from crawlstack.messages import CheckRef, FrontierMessage
from crawlstack.ports import Blobs, Crawls, Results
from crawlstack.records.resolution import ResolvedRecords
from crawlstack.rules import Mapping, Page, RuleSet, patterns
from crawlstack.rules.budget import page_budget
from crawlstack.scope import rules_for

# The statuses fetch follows (crawlstack.fetch.outcomes): their targets go on with a watch's check.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

if TYPE_CHECKING:  # only a watch's extract has one; the handlers' asset need not ship it
    from crawlstack.watch.pages import CheckPages


@dataclass
class Extracted:
    records: list[dict[str, Any]] = field(default_factory=list)
    outlinks: list[FrontierMessage] = field(default_factory=list)
    skipped: SkippedLinks = field(default_factory=SkippedLinks)
    # The records objects written, one per crawl in the WARC (usually one).
    records_keys: list[str] = field(default_factory=list)
    failed: list[PageFailure] = field(default_factory=list)
    # (crawl id, fp, note): what a page's crawl-log line should say about its values.
    notes: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def records_key(self) -> str | None:
        return self.records_keys[0] if self.records_keys else None


@dataclass
class _PageFound:
    # The page's record, or one per item of a mapping with items.
    records: list[dict[str, Any]] = field(default_factory=list)
    outlinks: list[FrontierMessage] = field(default_factory=list)
    skipped: SkippedLinks = field(default_factory=SkippedLinks)
    notes: list[str] = field(default_factory=list)


class Extractor:
    def __init__(
        self,
        crawls: Crawls,
        results: Results,
        blobs: Blobs,
        rules: RuleSet,
        sent: SentLinks | None = None,
        resolved: ResolvedRecords | None = None,
        outcomes: PageOutcomes | None = None,
        budget_seconds: float | None = settings.EXTRACTION_BUDGET_SECONDS,
        checks: CheckPages | None = None,
    ) -> None:
        self.crawls = crawls
        self.results = results
        self.blobs = blobs
        self.rules = rules
        self.sent = sent if sent is not None else SentLinks()
        self.resolution = Resolution(resolved)
        self.outcomes = outcomes
        self.budget_seconds = budget_seconds
        # A watch's checked pages (crawlstack.watch.pages): their new items only, and their next page.
        self.checks = checks

    def extract_object(self, bucket: str, key: str) -> Extracted:
        out = Extracted()
        pages = list(read_warc(self.blobs.get(key, bucket=bucket)))
        depths = stored_depths(self.outcomes, pages)
        for archived in pages:
            self._extract_page(archived, out, depths)
        out.outlinks = frontier_batch(out.outlinks, self.resolution.completed)
        if out.records:
            out.records_keys = write_records(self.blobs, key, out.records)
            for record in out.records:
                self.results.put(record)
        record_outcomes(self.blobs, self.outcomes, key, out.failed, out.notes)
        return out

    def _extract_page(self, archived: WarcPage, out: Extracted, depths: dict[tuple[str, str], int]) -> None:
        meta = page_metadata(archived.metadata)
        if meta.get("check") is not None and self.checks is not None:
            self._check_page(archived, meta, out)
            return
        if not 200 <= archived.status < 300:
            return
        crawl = str(meta.get("crawl_id") or settings.DEFAULT_CRAWL_ID)
        stored = depths.get((crawl, str(meta.get("fp"))))
        if stored is not None and stored < int(meta.get("depth") or 0):
            meta["depth"] = stored
        crawl_id = str(meta.get("crawl_id") or settings.DEFAULT_CRAWL_ID)
        config = self.crawls.get(crawl_id)  # a store: its failure fails the message, to be retried
        try:
            with page_budget(self.budget_seconds), patterns.page_context(archived.url) as context:
                found = self._page(archived, meta, crawl_id, config)
            if context.timeouts:
                found.notes.append(f"{context.timeouts} pattern matches timed out, counted as no match")
        except Exception as exc:
            # Whatever the page holds costs that page alone: it fails, with its
            # crawl-log line, and the rest of the WARC goes on.  The reason names the
            # exception's type and place, never its message, which may quote the page.
            reason = failure_reason(exc)
            depth = int(meta.get("depth") or 0)
            out.failed.append(PageFailure(archived.url, crawl_id, meta.get("fp"), depth, reason))
            return
        for record in found.records:
            out.records.append(record)
            self.resolution.merge(record, meta)
        if found.notes and meta.get("fp"):
            out.notes.append((crawl_id, str(meta["fp"]), "; ".join(found.notes)))
        if self.resolution.complete(crawl_id, meta):
            return
        out.outlinks.extend(found.outlinks)
        out.skipped.merge(found.skipped)

    def _check_page(self, archived: WarcPage, meta: dict[str, Any], out: Extracted) -> None:
        """A watch's checked page, read with its source's mapping; only its new items become records.

        A try to be retried, and a redirect (its target goes on with the check), leave the check open.
        """
        assert self.checks is not None
        redirected = archived.status in REDIRECT_STATUSES and archived.headers.get("location", "").strip()
        if meta.get("retried") or redirected:
            return
        ref = CheckRef.from_dict(meta["check"])
        crawl_id = str(meta.get("crawl_id") or settings.DEFAULT_CRAWL_ID)
        records: list[dict[str, Any]] = []
        links: list[str] = []
        name = self.checks.mapping_of(ref)
        mapping = next((m for m in self.rules if m.name == name), None)
        read = False
        if 200 <= archived.status < 300 and mapping is not None:
            config = self.crawls.get(crawl_id)
            try:
                with page_budget(self.budget_seconds), patterns.page_context(archived.url):
                    records = self._page(archived, meta, crawl_id, config, mapping).records
                    links = mapping.links(Page(archived.url, archived.body, archived.content_type))
                read = True
            except Exception as exc:  # the page fails alone, and its check ends with it
                reason = failure_reason(exc)
                out.failed.append(PageFailure(archived.url, crawl_id, meta.get("fp"), 0, reason))
                records, links = [], []
        fetched_at = float(meta.get("fetched_at") or time.time())
        headers = list(archived.headers.items())
        parsers = mapping is not None and bool(mapping.url_parsers)
        kept = self.checks.page_seen(
            ref, archived.url, archived.status, headers, records, links, fetched_at, read, has_url_parsers=parsers
        )
        out.records.extend(kept)

    def _page(
        self,
        archived: WarcPage,
        meta: dict[str, Any],
        crawl_id: str,
        config: CrawlConfig,
        chosen: Mapping | None = None,
    ) -> _PageFound:
        """The page's record and links: pure work on the page, in the page's budget, touching no store.

        ``chosen``: the mapping to read it with (a watch's source's), instead of the first that matches.
        """
        depth = int(meta.get("depth") or 0)
        found = _PageFound()
        page = Page(archived.url, archived.body, archived.content_type)
        # Only the mappings the page's crawl uses (its config's ``rules``; all by default).
        mapping = chosen or rules_for(self.rules, config).match(archived.url, archived.content_type)
        if mapping is not None:
            found.records, found.notes = page_records(mapping, page, archived.url, meta, crawl_id, depth)
        if depth + 1 <= config.max_depth:
            outlinks = page_outlinks(page, mapping, depth + 1, config, meta, found.skipped, self.rules, self.sent)
            found.outlinks = list(outlinks)
        found.notes[:0] = page.notes
        return found
