"""Extract: a WARC from S3 -> records (mapping rules) and outlinks (frontier).

For each archived 2xx response, the first mapping whose ``url_patterns``
match runs its fields; the record goes to the results table and, with the
rest of the WARC's records of its crawl, into one gzipped JSON-lines object
under ``records/crawl_id=<id>/dt=<day>/`` (for Athena).  Outlinks go to
the frontier at depth + 1 (``crawlstack.extract.outlinks``).  A page's depth is the smallest it was found at
before it was extracted: the urls table's, read once per WARC.

A mapped page whose WARC metadata carries a ``record_id`` also merges its
found fields into that record (``crawlstack.resolution``); once the record
is complete, that page and any later page of the record give no outlinks.

Records are strict JSON: NaN and infinities are null (``crawlstack.storable``),
and a record's fields are in the order its mapping lists them.  The records
object is written before the results table: it keeps every record in full,
where a value too large for a DynamoDB item gives way to a marker.

The records object is named after the WARC it came from, so a redelivered
S3 event rewrites the same object and the same result items, and merging a
page's fields again changes nothing.
"""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from crawlstack import patterns, settings
from crawlstack.config import CrawlConfig
from crawlstack.crawllog import PageFailure
from crawlstack.extract.metadata import page_metadata
from crawlstack.extract.outcomes import failure_reason, record_outcomes, stored_depths
from crawlstack.extract.outlinks import SentLinks, SkippedLinks, frontier_batch, page_outlinks
from crawlstack.extract.ports import Blobs, Crawls, PageOutcomes, Results
from crawlstack.messages import CheckRef, FrontierMessage
from crawlstack.resolution import CompletedRecords, ResolvedRecords, found_fields
from crawlstack.rules import Mapping, Page, RuleSet
from crawlstack.rules.budget import page_budget
from crawlstack.scope import rules_for
from crawlstack.storable import MAX_VALUE_DEPTH, bounded_fields, json_safe
from crawlstack.tables import numbers_of
from crawlstack.warc import WarcPage, read_warc

# The statuses fetch follows (crawlstack.fetch_outcomes): their targets go on with a watch's check.
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


def records_key(warc_key: str, crawl_id: str) -> str:
    """``records/crawl_id=<id>/dt=<day>/<WARC name>.jsonl.gz``: Hive-style, for the Glue table's partition projection.

    The day is the WARC's (``pages/dt=<day>/...``), so a redelivered S3 event
    rewrites the same object.
    """
    name = warc_key.rsplit("/", 1)[-1].replace(".warc.gz", ".jsonl.gz")
    parts = warc_key.split("/")
    day = next((p[3:] for p in parts if p.startswith("dt=")), None)
    if day is None:
        return f"{settings.RECORDS_PREFIX}crawl_id={quote(crawl_id, safe='-_.')}/{name}"
    # Same spelling of the crawl id as the crawl log's (crawlstack.crawllog).
    return f"{settings.RECORDS_PREFIX}crawl_id={quote(crawl_id, safe='-_.')}/dt={day}/{name}"


def record_line(record: dict[str, Any]) -> str:
    """One line of a records object: strict JSON, keys in the record's own order (fields in mapping order).

    ``numbers`` follows ``fields``: its numeric values, for the query tables' typed column (``crawlstack.tables``).
    """
    line: dict[str, Any] = {}
    for key, value in json_safe(record).items():
        line[key] = value
        if key == "fields":
            line["numbers"] = numbers_of(value or {})
    return json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"


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
        self.resolved = resolved
        self.outcomes = outcomes
        self.budget_seconds = budget_seconds
        # A watch's checked pages (crawlstack.watch.pages): their new items only, and their next page.
        self.checks = checks
        self._completed = CompletedRecords()

    def extract_object(self, bucket: str, key: str) -> Extracted:
        out = Extracted()
        pages = list(read_warc(self.blobs.get(key, bucket=bucket)))
        depths = stored_depths(self.outcomes, pages)
        for archived in pages:
            self._extract_page(archived, out, depths)
        out.outlinks = frontier_batch(out.outlinks, self._completed)
        if out.records:
            # One object per crawl in the WARC, so each lands in its crawl's partition.
            by_crawl: dict[str, list[dict[str, Any]]] = {}
            for record in out.records:
                by_crawl.setdefault(str(record.get("crawl_id", "")), []).append(record)
            for crawl_id, records in by_crawl.items():
                object_key = records_key(key, crawl_id)
                out.records_keys.append(object_key)
                body = "".join(record_line(r) for r in records)
                self.blobs.put(object_key, gzip.compress(body.encode("utf-8")), "application/x-ndjson")
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
            self._resolve(record, meta)
        if found.notes and meta.get("fp"):
            out.notes.append((crawl_id, str(meta["fp"]), "; ".join(found.notes)))
        if self._record_complete(crawl_id, meta):
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
            items = mapping.extract_items(page)
            for index, extracted in enumerate(items):
                fields, deep = bounded_fields(extracted)
                found.notes.extend(f"field {n!r} nested over {MAX_VALUE_DEPTH} levels, kept as JSON text" for n in deep)
                record: dict[str, Any] = {
                    "mapping": mapping.name,
                    "url": archived.url,
                    "fields": fields,
                    "depth": depth,
                    "crawl_id": crawl_id,
                    # An item's record is keyed by its page and place, so a page's items are as many records.
                    "fp": meta.get("fp") if mapping.items is None else f"{meta.get('fp')}#{index}",
                    "fetched_at": meta.get("fetched_at"),
                }
                if mapping.items is not None:
                    record["item"] = index
                if meta.get("record_id"):
                    record["record_id"] = meta["record_id"]
                # Strict JSON (NaN found in a page is not found: null), converted here so
                # that a value no store can take fails this page, not the WARC.
                found.records.append(json_safe(record))
        if depth + 1 <= config.max_depth:
            outlinks = page_outlinks(page, mapping, depth + 1, config, meta, found.skipped, self.rules, self.sent)
            found.outlinks = list(outlinks)
        found.notes[:0] = page.notes
        return found

    def _resolve(self, record: dict[str, Any], meta: dict[str, Any]) -> None:
        """Merge a mapped page's found fields into its record_id's record."""
        if self.resolved is None or not meta.get("record_id"):
            return
        merged = self.resolved.merge(
            record["crawl_id"],
            str(meta["record_id"]),
            tuple(meta.get("want") or ()),
            found_fields(record["fields"]),
            record["url"],
        )
        if merged.complete:
            self._completed.add(merged.crawl_id, merged.record_id)

    def _record_complete(self, crawl_id: str, meta: dict[str, Any]) -> bool:
        """Every wanted field of the page's record found (as this container knows): follow nothing more."""
        return bool(meta.get("record_id")) and (crawl_id, str(meta["record_id"])) in self._completed
