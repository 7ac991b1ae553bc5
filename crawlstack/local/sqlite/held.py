"""Held work of stopped crawls (``crawlstack.jobs``) on SQLite, beside the crawls table in the same file.

``hold`` reads the crawl's state and writes the row in one transaction, as
the DynamoDB adapter's ``TransactWriteItems`` checks the crawls item and
puts the row: no hold lands after ``resume`` set the crawl running.
"""

from __future__ import annotations

from crawlstack import jobs
from crawlstack.local.sqlite.crawls import SqliteCrawls
from crawlstack.local.sqlite.db import StateDb

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS held ("
    " crawl_id TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (crawl_id, key)) WITHOUT ROWID"
)


class SqliteHeld:
    def __init__(self, db: StateDb, crawls: SqliteCrawls) -> None:
        if crawls.db is not db:
            raise ValueError("held work and the crawls it checks must share one state database")
        self.db = db
        self.crawls = crawls
        db.ensure(SCHEMA)

    def hold(self, crawl_id: str, key: str, body: str) -> bool:
        """Write the row only while the crawl is stopped, in one transaction with that check."""
        with self.db.transaction() as conn:
            item = self.crawls.read(conn, crawl_id)
            if item is None or item.get("state") != jobs.STOPPED:
                return False
            conn.execute(
                "INSERT INTO held (crawl_id, key, body) VALUES (?, ?, ?)"
                " ON CONFLICT (crawl_id, key) DO UPDATE SET body = excluded.body",
                (crawl_id, key, body),
            )
            return True

    def held(self, crawl_id: str, limit: int) -> list[tuple[str, str]]:
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT key, body FROM held WHERE crawl_id = ? ORDER BY key LIMIT ?", (crawl_id, max(limit, 0))
            ).fetchall()
        return [(key, body) for key, body in rows]

    def release(self, crawl_id: str, key: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM held WHERE crawl_id = ? AND key = ?", (crawl_id, key))

    def count(self) -> int:
        with self.db.reading() as conn:
            (total,) = conn.execute("SELECT count(*) FROM held").fetchone()
        return int(total)
