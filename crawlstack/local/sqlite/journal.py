"""Which page tries went out to a server: so a crawl resumed after a kill can say which pages it fetched twice.

The host runner tells ``started`` of each page's try just before its
request (``HostRunner.on_request``).  A try whose task a kill left in its
host's backlog (its flush never deleted it: ``crawlstack.runs.flush``) is
fetched again by the resumed crawl; ``mark_in_flight`` finds those from the
backlog's tasks, and ``refetched`` names their URLs for the crawl log.
"""

from __future__ import annotations

from collections.abc import Iterable

from crawlstack.local.sqlite.db import StateDb
from crawlstack.messages import FetchTask

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS requested (attempt_key TEXT PRIMARY KEY, url TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS refetched (url TEXT PRIMARY KEY) WITHOUT ROWID",
)


class SqliteJournal:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        db.ensure(*SCHEMA)

    def started(self, task: FetchTask) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO requested (attempt_key, url) VALUES (?, ?)", (task.attempt_key, task.url)
            )

    def mark_in_flight(self, waiting: Iterable[FetchTask]) -> int:
        """Mark the URLs of tries requested that are still ``waiting`` (in a backlog): they go out again."""
        marked = 0
        with self.db.transaction() as conn:
            for task in waiting:
                row = conn.execute("SELECT url FROM requested WHERE attempt_key = ?", (task.attempt_key,)).fetchone()
                if row is not None:
                    marked += conn.execute("INSERT OR IGNORE INTO refetched (url) VALUES (?)", row).rowcount
        return marked

    def refetched(self) -> set[str]:
        with self.db.reading() as conn:
            return {url for (url,) in conn.execute("SELECT url FROM refetched")}
