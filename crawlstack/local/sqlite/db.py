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

import errno
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# How long a statement waits for another process's lock before failing.
BUSY_TIMEOUT_MS = 5_000
# A store's table, as ``ensure`` is given it.
_CREATE_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (?P<name>\w+)(?P<rest>.*)", re.DOTALL)
# Read connections at once (``StateDb.reading``); more readers wait for one.
MAX_READERS = 8


class StorageFull(Exception):
    """The disk (or quota) under the crawl's state is full: the crawl stops, and can be resumed once there is room."""


def is_storage_full(exc: BaseException) -> bool:
    """SQLite's SQLITE_FULL, or a write's ENOSPC, EDQUOT or EFBIG (over the process's file size limit)."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@contextmanager
def stops_when_full(where: str | Path) -> Iterator[None]:
    """A write inside that fails for want of room ends as one ``StorageFull``, with no traceback chained to it."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if not is_storage_full(exc):
            raise
        raise StorageFull(f"no room left to write {where}: {exc}") from None


class StateDb:
    def __init__(
        self, path: str | Path, read_only: bool = False, check: Callable[[sqlite3.Connection], None] | None = None
    ) -> None:
        """Open (or create) the file; ``read_only`` opens an existing one for readers, who never block the crawl.

        ``check`` looks at the file before anything is written to it (WAL
        mode rewrites its header): it raises to refuse a file that is not
        the one expected.  Raises ``sqlite3.DatabaseError`` if the file is
        not a database.
        """
        self.path = str(path)
        self.read_only = read_only
        # The first write that failed for want of room (``note``): the crawl stops on it (``fault``).
        self.fault: StorageFull | None = None
        # Idle read connections (``reading``); list.pop and append are atomic.  At most
        # MAX_READERS: each holds its own page cache, and a crawl runs hundreds of threads.
        self._readers: list[sqlite3.Connection] = []
        self._reader_slots = threading.BoundedSemaphore(MAX_READERS)
        self._lock = threading.RLock()
        if read_only:
            uri = f"{Path(self.path).resolve().as_uri()}?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        else:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        with self._lock:
            if check is not None:
                try:
                    check(self._conn)
                except BaseException:
                    self._conn.close()
                    raise
            if self.path != ":memory:" and not read_only:
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def ensure(self, *statements: str) -> None:
        """Create what a store needs (``CREATE ... IF NOT EXISTS``), in one transaction.

        A reader writes nothing to the file: a table the file does not hold
        yet (``sources add`` makes only the sources') is made empty in the
        connection's own temporary schema, so reading it finds nothing.  One
        the file holds is left alone (a temporary one would hide it), and so
        are indexes.
        """
        if self.read_only:
            self._ensure_empty(statements)
            return
        with self.transaction() as conn:
            for statement in statements:
                conn.execute(statement)

    def _ensure_empty(self, statements: tuple[str, ...]) -> None:
        with self._lock:
            for statement in statements:
                table = _CREATE_TABLE.match(statement)
                if table is None:
                    continue
                held = "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?"
                if self._conn.execute(held, (table["name"],)).fetchone() is None:
                    self._conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table['name']}{table['rest']}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one write transaction: committed at the end, rolled back if it raises."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self.note(exc)
                # A failed COMMIT leaves the transaction open; an I/O error or a full disk may have ended it.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def note(self, exc: BaseException) -> None:
        """Keep ``exc`` as the crawl's fault if it says the disk is full (the first such one)."""
        if self.fault is None and is_storage_full(exc):
            self.fault = StorageFull(f"no room left to write {Path(self.path).parent}: {exc}")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A connection for reads: each statement sees every transaction committed before it.

        A reader of a file takes a connection of its own from a pool, so reads
        never wait for the writer's lock (WAL lets them run beside a write);
        it does not see a write still open in its own thread.
        """
        if self.path == ":memory:" or self.read_only:
            with self._lock:
                yield self._conn
            return
        with self._reader_slots:
            try:
                conn = self._readers.pop()
            except IndexError:
                conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA query_only=1")
            try:
                yield conn
            finally:
                self._readers.append(conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            while self._readers:
                self._readers.pop().close()
