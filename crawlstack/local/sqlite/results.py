"""The results table on SQLite: one record per mapped page (crawl and fingerprint), the last written kept.

A record is stored as strict JSON (``storable.json_safe``: a page's NaN or
infinity is null, values nested past ``MAX_VALUE_DEPTH`` kept as JSON
text), whole: SQLite has no item limit to fit it to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from crawlstack.local.sqlite.db import StateDb
from crawlstack.records import storable

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS results ("
    " crawl_id TEXT NOT NULL, fp TEXT NOT NULL, record TEXT NOT NULL,"
    " PRIMARY KEY (crawl_id, fp)) WITHOUT ROWID"
)


class SqliteResults:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        db.ensure(SCHEMA)

    def put(self, record: dict[str, Any]) -> None:
        data = json.dumps(storable.json_safe(record), ensure_ascii=False, allow_nan=False)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO results (crawl_id, fp, record) VALUES (?, ?, ?)"
                " ON CONFLICT (crawl_id, fp) DO UPDATE SET record = excluded.record",
                (record["crawl_id"], record["fp"], data),
            )

    def scan_crawl(self, crawl_id: str) -> Iterator[dict[str, Any]]:
        with self.db.reading() as conn:
            rows = conn.execute("SELECT record FROM results WHERE crawl_id = ? ORDER BY fp", (crawl_id,)).fetchall()
        for (data,) in rows:
            yield json.loads(data)
