"""Each host's waiting fetch tasks, in bundles: the ``Backlog`` port (``crawlstack.runs.ports``) on SQLite.

One row per bundle, keyed by host and the bundle's order key
(``crawlstack.runs.bundles.order_key``), so an ordered range read serves
the shallowest depth first and, within a depth, bundles in the order they
were added; ``tasks`` holds them as ``crawlstack.runs.bundles.encode``
packs them, as the DynamoDB adapter stores them, so a bundle is cut at the
same ``settings.BACKLOG_BUNDLE_BYTES``.  A read is always consistent here:
``consistent`` is accepted and has nothing to change.

Settings: ``settings.BACKLOG_BUNDLE_BYTES``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from crawlstack import settings
from crawlstack.local.sqlite.db import StateDb
from crawlstack.messages import FetchTask
from crawlstack.runs.bundles import decode, encode, order_key, pack
from crawlstack.runs.ports import Bundle

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS backlog ("
    " host TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL, tasks BLOB NOT NULL,"
    " PRIMARY KEY (host, key)) WITHOUT ROWID"
)


class SqliteBacklog:
    def __init__(self, db: StateDb, bundle_bytes: int = settings.BACKLOG_BUNDLE_BYTES) -> None:
        self.db = db
        self.bundle_bytes = bundle_bytes
        db.ensure(SCHEMA)

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        if not tasks:
            return []
        keys: list[str] = []
        with self.db.transaction() as conn:
            for part, blob in pack(tasks, self.bundle_bytes):
                keys.append(order_key(depth))
                conn.execute(
                    "INSERT INTO backlog (host, key, n, tasks) VALUES (?, ?, ?, ?)", (host, keys[-1], len(part), blob)
                )
        return keys

    def peek(self, host: str, limit: int, after: str | None = None, consistent: bool = True) -> list[Bundle]:
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT key, tasks FROM backlog WHERE host = ? AND key > ? ORDER BY key LIMIT ?",
                (host, after or "", max(limit, 0)),
            ).fetchall()
        return [Bundle(host, key, decode(blob)) for key, blob in rows]

    def replace(self, host: str, key: str, tasks: Sequence[FetchTask]) -> None:
        """Rewrite the bundle with ``tasks``, only while it exists: one a later holder served stays gone."""
        if not tasks:
            self.delete(host, key)
            return
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE backlog SET n = ?, tasks = ? WHERE host = ? AND key = ?", (len(tasks), encode(tasks), host, key)
            )

    def delete(self, host: str, key: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM backlog WHERE host = ? AND key = ?", (host, key))

    def tasks(self) -> Iterator[FetchTask]:
        """Every task waiting in every backlog (a resume's look at what a kill left)."""
        with self.db.reading() as conn:
            rows = conn.execute("SELECT tasks FROM backlog").fetchall()
        for (blob,) in rows:
            yield from decode(blob)

    def waiting(self) -> int:
        """Tasks waiting in every backlog."""
        with self.db.reading() as conn:
            (total,) = conn.execute("SELECT coalesce(sum(n), 0) FROM backlog").fetchone()
        return int(total)
