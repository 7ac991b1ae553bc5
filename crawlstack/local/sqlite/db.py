"""The state database of a local crawl: one SQLite file, one connection, one writer at a time.

A crawl's handlers run as threads of one process, so the stores share one
connection under one lock (``sqlite3`` connections are not safe to use
from two threads at once), and every write is one transaction
(``transaction``: ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back if it
raises), which makes each store call atomic, as a conditional write is on
DynamoDB.  The file is in WAL mode with ``synchronous=NORMAL``: a commit
survives the process being killed (a power cut may lose the last ones),
and readers in other processes (``status --local``) do not block the crawl.

Each store creates its own tables (``ensure``).  ``":memory:"`` gives a
database of the process alone, for tests.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# How long a statement waits for another process's lock before failing.
BUSY_TIMEOUT_MS = 5_000


class StateDb:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        with self._lock:
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def ensure(self, *statements: str) -> None:
        """Create what a store needs (``CREATE ... IF NOT EXISTS``), in one transaction."""
        with self.transaction() as conn:
            for statement in statements:
                conn.execute(statement)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one write transaction: committed at the end, rolled back if it raises."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                # A failed COMMIT leaves the transaction open; an I/O error or a full disk may have ended it.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads: each statement sees every transaction committed before it."""
        with self._lock:
            yield self._conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()
