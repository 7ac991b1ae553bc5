"""Dispatch's scope bookkeeping on SQLite: per-host page counters and notes of dropped URLs.

As ``crawlstack.aws.scope_store.ScopeStore`` keeps them on DynamoDB: a
counter per crawl and host name, taken in chunks within its cap (check and
count in one transaction), and a dropped URL's note in the urls table,
written only where the crawl has no item for the URL.
"""

from __future__ import annotations

from crawlstack.local.sqlite.db import StateDb
from crawlstack.local.sqlite.urls import SqliteUrls

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS host_pages ("
    " crawl_id TEXT NOT NULL, host TEXT NOT NULL, pages_admitted INTEGER NOT NULL,"
    " PRIMARY KEY (crawl_id, host)) WITHOUT ROWID"
)


class SqliteScope:
    def __init__(self, db: StateDb, urls: SqliteUrls) -> None:
        self.db = db
        self.urls = urls
        db.ensure(SCHEMA)

    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool:
        """Take ``pages`` of the host's ``cap`` pages for the crawl at once; False if fewer are left."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT pages_admitted FROM host_pages WHERE crawl_id = ? AND host = ?", (crawl_id, host)
            ).fetchone()
            admitted = (row[0] if row else 0) + pages
            if admitted > cap:
                return False
            conn.execute(
                "INSERT INTO host_pages (crawl_id, host, pages_admitted) VALUES (?, ?, ?)"
                " ON CONFLICT (crawl_id, host) DO UPDATE SET pages_admitted = excluded.pages_admitted",
                (crawl_id, host, admitted),
            )
            return True

    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        """Record a URL dropped before dedupe, only if the crawl has no item for it yet."""
        return self.urls.note_url(crawl_id, fp, url, depth, "dropped", reason)
