"""The sources a watch re-checks, in the state database (``crawlstack.watch.sources.SourceStore``)."""

from __future__ import annotations

import json

from crawlstack.local.sqlite.db import StateDb
from crawlstack.watch.sources import DuplicateSource, Source

SCHEMA = "CREATE TABLE IF NOT EXISTS sources (id TEXT PRIMARY KEY, source TEXT NOT NULL) WITHOUT ROWID"


class SqliteSources:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        db.ensure(SCHEMA)

    def add_all(self, sources: list[Source]) -> None:
        seen: set[str] = set()
        with self.db.transaction() as conn:
            for source in sources:
                taken = conn.execute("SELECT 1 FROM sources WHERE id = ?", (source.id,)).fetchone()
                if taken or source.id in seen:
                    raise DuplicateSource(source.id)  # the transaction rolls back: none is added
                seen.add(source.id)
                item = json.dumps(source.to_item())
                conn.execute("INSERT INTO sources (id, source) VALUES (?, ?)", (source.id, item))

    def get(self, source_id: str) -> Source | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT source FROM sources WHERE id = ?", (source_id,)).fetchone()
        return Source.from_item(json.loads(row[0])) if row else None

    def list(self) -> list[Source]:
        with self.db.reading() as conn:
            rows = conn.execute("SELECT source FROM sources ORDER BY id").fetchall()
        return [Source.from_item(json.loads(row[0])) for row in rows]

    def remove(self, source_id: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM sources WHERE id = ?", (source_id,)).rowcount > 0
