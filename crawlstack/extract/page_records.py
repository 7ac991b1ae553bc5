"""A page's records, the records objects they are written to, and their resolution across pages.

For each archived 2xx response, the first mapping whose ``url_patterns``
match runs its fields (``page_records``); the record goes to the results
table and, with the rest of the WARC's records of its crawl, into one
gzipped JSON-lines object under ``records/crawl_id=<id>/dt=<day>/`` (for
Athena; ``write_records``).  Records are strict JSON: NaN and infinities are
null (``crawlstack.records.storable``), and a record's fields are in the order its
mapping lists them.  The records object is written before the results table:
it keeps every record in full, where a value too large for a DynamoDB item
gives way to a marker.

A mapped page whose WARC metadata carries a ``record_id`` also merges its
found fields into that record (``Resolution``; ``crawlstack.records.resolution``);
once the record is complete, that page and any later page of the record give
no outlinks.

The records object is named after the WARC it came from, so a redelivered
S3 event rewrites the same object and the same result items, and merging a
page's fields again changes nothing.

Setting: ``settings.RECORDS_PREFIX``.
"""

from __future__ import annotations

import gzip
import json
from typing import Any
from urllib.parse import quote

from crawlstack import settings
from crawlstack.ports import Blobs
from crawlstack.records.resolution import CompletedRecords, ResolvedRecords, found_fields
from crawlstack.records.storable import MAX_VALUE_DEPTH, bounded_fields, json_safe
from crawlstack.records.tables import numbers_of
from crawlstack.rules import Mapping, Page


def page_records(
    mapping: Mapping, page: Page, url: str, meta: dict[str, Any], crawl_id: str, depth: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The page's record, or one per item of a mapping with items; and notes on values kept as JSON text."""
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    for index, extracted in enumerate(mapping.extract_items(page)):
        fields, deep = bounded_fields(extracted)
        notes.extend(f"field {n!r} nested over {MAX_VALUE_DEPTH} levels, kept as JSON text" for n in deep)
        record: dict[str, Any] = {
            "mapping": mapping.name,
            "url": url,
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
        records.append(json_safe(record))
    return records, notes


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
    # Same spelling of the crawl id as the crawl log's (crawlstack.fetch.crawllog).
    return f"{settings.RECORDS_PREFIX}crawl_id={quote(crawl_id, safe='-_.')}/dt={day}/{name}"


def record_line(record: dict[str, Any]) -> str:
    """One line of a records object: strict JSON, keys in the record's own order (fields in mapping order).

    ``numbers`` follows ``fields``: its numeric values, for the query tables' typed column
    (``crawlstack.records.tables``).
    """
    line: dict[str, Any] = {}
    for key, value in json_safe(record).items():
        line[key] = value
        if key == "fields":
            line["numbers"] = numbers_of(value or {})
    return json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"


def write_records(blobs: Blobs, warc_key: str, records: list[dict[str, Any]]) -> list[str]:
    """The WARC's records objects, one per crawl so each lands in its crawl's partition; their keys."""
    by_crawl: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_crawl.setdefault(str(record.get("crawl_id", "")), []).append(record)
    keys = []
    for crawl_id, crawl_records in by_crawl.items():
        object_key = records_key(warc_key, crawl_id)
        keys.append(object_key)
        body = "".join(record_line(r) for r in crawl_records)
        blobs.put(object_key, gzip.compress(body.encode("utf-8")), "application/x-ndjson")
    return keys


class Resolution:
    """Records resolved across pages: the resolved table, and the records this container saw complete."""

    def __init__(self, resolved: ResolvedRecords | None) -> None:
        self.resolved = resolved
        self.completed = CompletedRecords()

    def merge(self, record: dict[str, Any], meta: dict[str, Any]) -> None:
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
            self.completed.add(merged.crawl_id, merged.record_id)

    def complete(self, crawl_id: str, meta: dict[str, Any]) -> bool:
        """Every wanted field of the page's record found (as this container knows): follow nothing more."""
        return bool(meta.get("record_id")) and (crawl_id, str(meta["record_id"])) in self.completed
