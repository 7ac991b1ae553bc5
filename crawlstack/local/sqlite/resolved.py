"""The resolved table on SQLite: one merged record per crawl and record id (``crawlstack.records.resolution``).

A record is one JSON document: ``want`` (kept from its first page), and
per field the first value merged and the URL it came from.  A merge reads
and writes it in one transaction, so the first value of a field wins
however many pages merge at once, as ``if_not_exists`` makes it on
DynamoDB (``crawlstack.aws.resolved``).  Values are stored as strict JSON
(``storable.json_safe``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from crawlstack.local.sqlite.db import StateDb
from crawlstack.records import storable
from crawlstack.records.resolution import ResolvedRecord

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS resolved ("
    " crawl_id TEXT NOT NULL, record_id TEXT NOT NULL, item TEXT NOT NULL,"
    " PRIMARY KEY (crawl_id, record_id)) WITHOUT ROWID"
)


def _record(crawl_id: str, record_id: str, item: dict[str, Any]) -> ResolvedRecord:
    return ResolvedRecord(crawl_id, record_id, tuple(item.get("want") or ()), item["fields"], item["sources"])


class SqliteResolved:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        db.ensure(SCHEMA)

    def merge(
        self, crawl_id: str, record_id: str, want: Sequence[str], fields: Mapping[str, Any], source_url: str
    ) -> ResolvedRecord:
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT item FROM resolved WHERE crawl_id = ? AND record_id = ?", (crawl_id, record_id)
            ).fetchone()
            item: dict[str, Any] = json.loads(row[0]) if row else {"want": list(want), "fields": {}, "sources": {}}
            for name, value in fields.items():
                if name not in item["fields"]:
                    item["fields"][name] = storable.json_safe(value)
                    item["sources"][name] = source_url
            conn.execute(
                "INSERT INTO resolved (crawl_id, record_id, item) VALUES (?, ?, ?)"
                " ON CONFLICT (crawl_id, record_id) DO UPDATE SET item = excluded.item",
                (crawl_id, record_id, json.dumps(item, ensure_ascii=False, allow_nan=False)),
            )
        return _record(crawl_id, record_id, item)

    def get_many(self, crawl_id: str, record_ids: Iterable[str]) -> dict[str, ResolvedRecord]:
        out: dict[str, ResolvedRecord] = {}
        with self.db.reading() as conn:
            for record_id in dict.fromkeys(record_ids):
                row = conn.execute(
                    "SELECT item FROM resolved WHERE crawl_id = ? AND record_id = ?", (crawl_id, record_id)
                ).fetchone()
                if row:
                    out[record_id] = _record(crawl_id, record_id, json.loads(row[0]))
        return out

    def scan_crawl(self, crawl_id: str) -> Iterator[ResolvedRecord]:
        """Every record of a crawl (local mode's OUT/resolved.jsonl)."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT record_id, item FROM resolved WHERE crawl_id = ? ORDER BY record_id", (crawl_id,)
            ).fetchall()
        for record_id, item in rows:
            yield _record(crawl_id, record_id, json.loads(item))
