"""Local mode's backend: one crawl's state in ``OUT/state.sqlite``, its files in ``OUT/`` (issue 15).

``LocalState`` opens an output directory for a crawl:

* it takes ``OUT/.crawl.lock`` (``flock``), so a second crawl on the same
  directory is refused while the first runs; readers open the database
  read-only (``open_read_only``) and take no lock;
* it knows its database by SQLite's ``application_id``: a file that is not
  a database, or is another program's, is refused with one line and left
  as it is (``StateError``);
* ``stores`` builds every port on it (``crawlstack.wiring.Stores``): the
  tables and queues in the database, the bucket as ``OUT/`` itself
  (``LocalBlobs``);
* ``save_crawl``/``load_crawl`` keep what a resume needs: the seeds, the
  options and the rule files' text, so ``--resume`` needs none of them again;
* ``recover`` readies a killed crawl's state: messages its handlers held
  come back, their receives given back (a kill is not a failed delivery;
  one in flight at ``settings.MAX_CONSECUTIVE_KILLS`` kills in a row is
  dead-lettered, ``killed while processing``, except a host's run
  message, which recover replaces anyway), leases its runs held end, every host with tasks gets a fresh
  run and its message, the streamed outputs are cut back
  to their last commit, and pages requested but never flushed are marked
  to be logged ``"refetched": true`` when the resumed crawl fetches them.

Settings: ``settings.QUEUES`` (each queue's ``max_receive_count``), ``settings.MAX_CONSECUTIVE_KILLS``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from crawlstack import settings
from crawlstack.local.sqlite import (
    LocalBlobs,
    SqliteBacklog,
    SqliteCrawls,
    SqliteHeld,
    SqliteHosts,
    SqliteJournal,
    SqliteQueue,
    SqliteResolved,
    SqliteResults,
    SqliteRuns,
    SqliteScope,
    SqliteUrls,
    StateDb,
)
from crawlstack.messages import RunMessage
from crawlstack.runs.admission import new_run_id, run_expires
from crawlstack.wiring import Stores

STATE_FILE = "state.sqlite"
# Each page try's request, appended before it goes out (``SqliteJournal``).
JOURNAL_FILE = "requests.journal"
LOCK_FILE = ".crawl.lock"
# "cstk": PRAGMA application_id of a crawlstack state database; user_version is its layout.
APPLICATION_ID = 0x6373746B
LAYOUT_VERSION = 1
# What a crawl writes into OUT/, and so what --overwrite removes (nothing else there is touched).
OUTPUTS = (
    STATE_FILE,
    JOURNAL_FILE,
    f"{STATE_FILE}-wal",
    f"{STATE_FILE}-shm",
    "objects",
    "warc",
    "records.jsonl",
    "crawl-log.jsonl",
    "resolved.jsonl",
    "metrics.jsonl",
    "summary.json",
    "report.html",
)


class StateError(Exception):
    """The output directory's state cannot be used as asked; its message is the one line a user sees."""


@dataclass(frozen=True)
class SavedCrawl:
    """What a crawl started with, for ``--resume``."""

    seeds: list[dict[str, Any]]
    options: dict[str, Any]
    rules: dict[str, str]  # rule file name -> its text
    started: float


def has_state(out: Path) -> bool:
    return (out / STATE_FILE).exists()


def open_read_only(out: Path) -> StateDb:
    """The state of a crawl that may be running, for reading; ``StateError`` if there is none or it is not ours."""
    path = out / STATE_FILE
    if not path.exists():
        raise StateError(f"{out} holds no crawl state ({STATE_FILE})")
    try:
        db = StateDb(path, read_only=True, check=lambda conn: _check_ours(conn, path))
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path} is not a crawlstack state database: {exc}") from None
    return db


def read_meta(db: StateDb, key: str) -> Any:
    """The JSON value stored under ``key`` in the state's ``crawl_meta``, or None."""
    with db.reading() as conn:
        row = conn.execute("SELECT value FROM crawl_meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else None


def write_meta(db: StateDb, key: str, value: Any) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT OR REPLACE INTO crawl_meta (key, value) VALUES (?, ?)", (key, json.dumps(value)))


def _check_ours(conn: sqlite3.Connection, path: Path) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise StateError(f"{path} is not a crawlstack state database; nothing was changed")
    if version != LAYOUT_VERSION:
        raise StateError(f"{path} has layout {version}, this crawlstack reads layout {LAYOUT_VERSION}")


class LocalState:
    """An output directory opened by one crawl: its lock, its database and its stores."""

    def __init__(self, out: str | Path, mode: str) -> None:
        """``mode``: ``new`` (refused if ``out`` holds a crawl's state), ``overwrite`` or ``resume``.

        A new or overwritten crawl starts with earlier outputs removed.
        """
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._lock_file = _take_lock(self.out)
        fresh = mode != "resume"
        try:
            if mode == "new" and has_state(self.out):
                raise StateError(
                    f"{self.out} holds a crawl's state: use --resume to continue or --overwrite to start again"
                )
            if fresh:
                remove_outputs(self.out)
            elif not has_state(self.out):
                raise StateError(f"{self.out} holds no crawl to resume ({STATE_FILE})")
            self.db = self.open_db(self.out / STATE_FILE, fresh)
        except BaseException:
            self._lock_file.close()
            raise
        self._stores: Stores | None = None

    @staticmethod
    def open_db(path: Path, fresh: bool) -> StateDb:
        """A fresh state database (marked as ours), or an existing one checked as ours and undamaged."""
        try:
            db = StateDb(path, check=None if fresh else lambda conn: _check_ours(conn, path))
            if fresh:
                with db.transaction() as conn:
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
                    conn.execute("CREATE TABLE IF NOT EXISTS crawl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            else:
                with db.reading() as conn:
                    problem = conn.execute("PRAGMA quick_check").fetchone()[0]
                if problem != "ok":
                    raise StateError(f"{path} is damaged ({problem}); nothing was changed")
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{path} is not a crawlstack state database ({exc}); nothing was changed") from None
        return db

    def stores(self) -> Stores:
        if self._stores is None:
            self._stores = local_stores(self.db, self.out)
        return self._stores

    def save_crawl(self, crawl: SavedCrawl) -> None:
        write_meta(self.db, "crawl", crawl.__dict__)

    def load_crawl(self) -> SavedCrawl:
        saved = read_meta(self.db, "crawl")
        if saved is None:
            raise StateError(f"{self.out / STATE_FILE} holds no crawl's settings; start again with --overwrite")
        return SavedCrawl(**saved)

    def recover(self) -> None:
        """Ready a killed crawl's state to go on (see the module's docstring)."""
        stores = self.stores()
        for queue in (stores.frontier_queue, stores.fetch_queue, stores.extract_queue):
            assert isinstance(queue, SqliteQueue)
            queue.recover()  # a kill is not a failed delivery: the receives it cost are given back
        assert isinstance(stores.runs, SqliteRuns) and isinstance(stores.blobs, LocalBlobs)
        assert isinstance(stores.backlog, SqliteBacklog) and stores.journal is not None
        stores.journal.mark_in_flight(stores.backlog.tasks())
        now = time.time()
        stores.runs.expire_leases(now)
        # A kill between a run's schedule (or release) and its message's send left a host with
        # tasks and a run no message will start: every host with tasks gets a fresh run, and the
        # old runs' messages are refused at their lease.
        messages = []
        for host in stores.backlog.hosts():
            stores.runs.forget_run(host)
            run_id = new_run_id()
            if stores.runs.schedule(host, run_id, now, run_expires(now)):
                messages.append((RunMessage(host, run_id).to_json(), 0))
        stores.fetch_queue.send(messages)
        stores.blobs.trim()

    def seeded(self) -> bool:
        """Whether the crawl's config was stored and its seeds sent (``mark_seeded``)."""
        with self.db.reading() as conn:
            return conn.execute("SELECT 1 FROM crawl_meta WHERE key = 'seeded'").fetchone() is not None

    def mark_seeded(self) -> None:
        with self.db.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO crawl_meta (key, value) VALUES ('seeded', 'true')")

    def close(self) -> None:
        if self._stores is not None and self._stores.journal is not None:
            self._stores.journal.close()
        self.db.close()
        self._lock_file.close()  # closing the file releases its flock


def local_stores(db: StateDb, out: Path) -> Stores:
    """Every port on the state database and ``out`` (``crawlstack.wiring.Stores``)."""
    dead = {key: SqliteQueue(db, f"{key}-dlq") for key in settings.QUEUES}
    queues = {
        key: SqliteQueue(
            db,
            key,
            dead_letter=f"{key}-dlq",
            max_receives=spec.max_receive_count,
            # A run message spans minutes of its host's pages, and recover gives every host
            # with tasks a fresh run: a kill while one is in flight says nothing of it.
            max_kills=None if key == "fetch" else settings.MAX_CONSECUTIVE_KILLS,
        )
        for key, spec in settings.QUEUES.items()
    }
    crawls = SqliteCrawls(db)
    urls = SqliteUrls(db)
    backlog = SqliteBacklog(db)
    return Stores(
        crawls=crawls,
        urls=urls,
        hosts=SqliteHosts(db),
        resolved=SqliteResolved(db),
        held=SqliteHeld(db, crawls),
        runs=SqliteRuns(db),
        backlog=backlog,
        scope=SqliteScope(db, urls),
        results=SqliteResults(db),
        blobs=LocalBlobs(out, db, queues["extract"]),
        frontier_queue=queues["frontier"],
        fetch_queue=queues["fetch"],
        extract_queue=queues["extract"],
        dead_letter=dead,
        journal=SqliteJournal(db, out / JOURNAL_FILE),
        pacing=settings.LOCAL_PACING,
        wait_for_tasks=backlog.wait_added,
    )


def remove_outputs(out: Path) -> None:
    """Remove what an earlier crawl wrote to ``out`` (``OUTPUTS``), and nothing else."""
    for name in OUTPUTS:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def crawl_running(out: Path) -> bool:
    """Whether a crawl holds ``out``'s lock now: a shared lock is tried without waiting, and let go at once."""
    try:
        handle = (out / LOCK_FILE).open("rb")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def _take_lock(out: Path, tries: int = 20) -> IO[str]:
    """The crawl's lock on ``out``; a reader's brief probe (``crawl_running``) is waited out, another crawl is not."""
    handle = (out / LOCK_FILE).open("a+", encoding="utf-8")
    for attempt in range(tries):
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt + 1 < tries:
                time.sleep(0.05)
    else:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        message = f"{out} is in use by another crawl (pid {holder}); wait for it or choose another --out"
        raise StateError(message) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle
