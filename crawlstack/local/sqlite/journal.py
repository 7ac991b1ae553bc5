"""Which page tries went out to a server: so a crawl resumed after a kill can say which pages it fetched twice.

The host runner tells ``started`` of each page's try just before its
request (``HostRunner.on_request``), which appends a line to a file: an
append reaches the kernel at once, so it survives the process being killed
(as the state database's commits do), and takes no lock of the database.
A try whose task a kill left in its host's backlog (its flush never deleted
it: ``crawlstack.fetch.flush``) is fetched again by the resumed crawl;
``mark_in_flight`` finds those from the backlog's tasks and keeps their
URLs in the database, and ``refetched`` names them for the crawl log.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from crawlstack.local.sqlite.db import StateDb
from crawlstack.messages import FetchTask

SCHEMA = ("CREATE TABLE IF NOT EXISTS refetched (url TEXT PRIMARY KEY) WITHOUT ROWID",)


class SqliteJournal:
    def __init__(self, db: StateDb, path: str | Path) -> None:
        self.db = db
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        db.ensure(*SCHEMA)

    def started(self, task: FetchTask) -> None:
        # A tab or line feed cannot occur in an attempt key or a canonical URL.
        try:
            self._append(f"{task.attempt_key}\t{task.url}\n".encode())
        except OSError as exc:
            self.db.note(exc)  # a full disk stops the crawl (``StateDb.fault``)
            raise

    def _append(self, line: bytes) -> None:
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line)

    def mark_in_flight(self, waiting: Iterable[FetchTask]) -> int:
        """Mark the URLs of tries requested that are still ``waiting`` (in a backlog): they go out again."""
        requested = self._requested()
        urls = {requested[t.attempt_key] for t in waiting if t.attempt_key in requested}
        with self.db.transaction() as conn:
            return sum(conn.execute("INSERT OR IGNORE INTO refetched (url) VALUES (?)", (u,)).rowcount for u in urls)

    def _requested(self) -> dict[str, str]:
        """Attempt key -> URL of every try journalled; a line a kill cut short is left out."""
        if not self.path.exists():
            return {}
        found: dict[str, str] = {}
        with self.path.open("rb") as fh:
            for raw in fh:
                if raw.endswith(b"\n") and b"\t" in raw:
                    key, _, url = raw.decode("utf-8", "replace").rstrip("\n").partition("\t")
                    found[key] = url
        return found

    def refetched(self) -> set[str]:
        with self.db.reading() as conn:
            return {url for (url,) in conn.execute("SELECT url FROM refetched")}

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
