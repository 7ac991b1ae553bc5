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

import threading
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
        # Per host, set when tasks are added: a lingering run waits on it (``wait_added``), not polls.
        self._added: dict[str, threading.Event] = {}
        self._events_lock = threading.Lock()

    def _event(self, host: str) -> threading.Event:
        with self._events_lock:
            return self._added.setdefault(host, threading.Event())

    def wait_added(self, host: str, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for tasks added to ``host``'s backlog in this process (no answer: peek)."""
        event = self._event(host)
        event.wait(max(0.0, timeout))
        event.clear()  # an add after this is seen by the caller's next peek, committed before its set

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
        self._event(host).set()
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

    def hosts(self) -> list[str]:
        """Every host with tasks waiting."""
        with self.db.reading() as conn:
            return [host for (host,) in conn.execute("SELECT DISTINCT host FROM backlog ORDER BY host")]

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
