"""Local mode's backend: one crawl's state in ``OUT/state.sqlite``, its files in ``OUT/`` (issue 15).

``LocalState`` opens an output directory for a crawl:

* it takes ``OUT/.crawl.lock`` (``flock``), so a second crawl on the same
  directory is refused while the first runs; readers open the database
  read-only (``open_read_only``) and take no lock;
* it knows its database by SQLite's ``application_id``: a file that is not
  a database, or is another program's, is refused with one line and left
  as it is (``StateError``), by ``--overwrite`` too;
* a new crawl starts only where no earlier one left its outputs, and
  ``--overwrite`` removes only what that one wrote (``start_afresh``); a
  resumed one only on the outputs its state wrote, none of the files it
  reads back gone (``crawlstack.local.outdir``);
* ``stores`` builds every port on it (``crawlstack.wiring.Stores``): the
  tables and queues in the database, the bucket as ``OUT/`` itself
  (``LocalBlobs``); a crawl's config is read with ``crawl_defaults``;
* ``journal`` notes each page request, so a resume knows what a kill left
  unflushed, and ``run_hooks`` gives the host runs local mode's hooks;
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

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.local import outdir
from crawlstack.local.outdir import JOURNAL_FILE, STATE_FILE, StateError
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
from crawlstack.wiring import RunHooks, Stores

# "cstk": PRAGMA application_id of a crawlstack state database; user_version is its layout.
APPLICATION_ID = 0x6373746B
LAYOUT_VERSION = 1


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


def _check_ours(conn: sqlite3.Connection, path: Path, layout: bool = True) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise StateError(f"{path} is not a crawlstack state database; nothing was changed")
    if layout and version != LAYOUT_VERSION:
        raise StateError(f"{path} has layout {version}, this crawlstack reads layout {LAYOUT_VERSION}")


class LocalState:
    """An output directory opened by one crawl: its lock, its database and its stores."""

    def __init__(self, out: str | Path, mode: str, crawl_defaults: CrawlConfig | None = None) -> None:
        """``mode``: ``new`` (refused if ``out`` holds a crawl's state or outputs), ``overwrite`` or ``resume``.

        An overwritten crawl starts with what the earlier one wrote removed
        (``start_afresh``); a resumed one is checked as its outputs' own.
        ``crawl_defaults``: what a crawl's config is read with where its
        item has no value (the environment's if None); a resume, which
        learns its settings from the state, may set it until ``stores`` is first called.
        """
        self.crawl_defaults = crawl_defaults
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._lock_file = outdir.take_lock(self.out)
        fresh = mode != "resume"
        try:
            if fresh:
                start_afresh(self.out, overwrite=mode == "overwrite")
            elif not has_state(self.out):
                raise StateError(f"{self.out} holds no crawl to resume ({STATE_FILE})")
            self.db = self.open_db(self.out / STATE_FILE, fresh)
            if not fresh:
                self._check_owner()
        except BaseException:
            if hasattr(self, "db"):
                self.db.close()
            self._lock_file.close()
            raise
        self._stores: Stores | None = None
        self._journal: SqliteJournal | None = None

    @staticmethod
    def open_db(path: Path, fresh: bool) -> StateDb:
        """A fresh state database (marked as ours, its id in OUT/), or an existing one checked as ours and undamaged."""
        try:
            db = StateDb(path, check=None if fresh else lambda conn: _check_ours(conn, path))
            if fresh:
                with db.transaction() as conn:
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")
                    conn.execute("CREATE TABLE IF NOT EXISTS crawl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                _give_id(db, path.parent)
            else:
                with db.reading() as conn:
                    problem = conn.execute("PRAGMA quick_check").fetchone()[0]
                if problem != "ok":
                    raise StateError(f"{path} is damaged ({problem}); nothing was changed")
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{path} is not a crawlstack state database ({exc}); nothing was changed") from None
        return db

    def _check_owner(self) -> None:
        """Refuse a state that did not write the outputs beside it; a state made before ids gets one."""
        state_id = read_meta(self.db, outdir.STATE_ID_KEY)
        outdir.check_owner(self.out, state_id)
        if state_id is None:
            _give_id(self.db, self.out)
        elif outdir.read_state_id(self.out) is None:
            outdir.write_state_id(self.out, state_id)

    def check_files(self, read_back: tuple[str, ...] = ()) -> None:
        """Refuse to go on when files the resumed work reads are gone: the objects under ``read_back``
        prefixes, and each WARC announced to extract and not yet extracted."""
        blobs = self.stores().blobs
        assert isinstance(blobs, LocalBlobs)
        outdir.refuse_missing(self.out, blobs.missing(read_back))

    def stores(self) -> Stores:
        if self._stores is None:
            self._stores = local_stores(self.db, self.out, self.crawl_defaults)
            self._journal = SqliteJournal(self.db, self.out / JOURNAL_FILE)  # opened with the stores, as before
        return self._stores

    @property
    def journal(self) -> SqliteJournal:
        """The page requests started and not yet flushed (``HostRunner.on_request``), for a resume after a kill."""
        self.stores()
        assert self._journal is not None
        return self._journal

    def run_hooks(self, settled: Callable[[], bool] | None = None) -> RunHooks:
        """Local mode's hooks for the host runs: its journal, pacing and backlog's wake-up, the pump's ``settled``."""
        backlog = self.stores().backlog
        assert isinstance(backlog, SqliteBacklog)
        return RunHooks(
            on_request=self.journal.started,
            settled=settled,
            pacing=settings.LOCAL_PACING,
            wait_for_tasks=backlog.wait_added,
        )

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
        assert isinstance(stores.backlog, SqliteBacklog)
        self.journal.mark_in_flight(stores.backlog.tasks())
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
        if self._journal is not None:
            self._journal.close()
        self.db.close()
        self._lock_file.close()  # closing the file releases its flock


def local_stores(db: StateDb, out: Path, crawl_defaults: CrawlConfig | None = None) -> Stores:
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
    crawls = SqliteCrawls(db, crawl_defaults)
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
    )


def start_afresh(out: Path, overwrite: bool) -> None:
    """Ready ``out`` for a new crawl: refused if it holds an earlier one's state or outputs, unless ``overwrite``,
    which removes what that crawl wrote (the files its state lists), and never a database that is not a crawl's."""
    if not overwrite:
        if has_state(out):
            raise StateError(f"{out} holds a crawl's state: use --resume to continue or --overwrite to start again")
        outdir.refuse_outputs(out)
        return
    written = None
    if has_state(out):
        path = out / STATE_FILE
        try:
            db = StateDb(path, read_only=True, check=lambda conn: _check_ours(conn, path, layout=False))
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{path} is not a crawlstack state database ({exc}); nothing was changed") from None
        try:
            written = LocalBlobs.written(db)
        finally:
            db.close()
    outdir.remove_outputs(out, written)


def _give_id(db: StateDb, out: Path) -> None:
    """A new id for the state, in it and beside it (``outdir.STATE_ID_FILE``)."""
    state_id = outdir.new_state_id()
    write_meta(db, outdir.STATE_ID_KEY, state_id)
    outdir.write_state_id(out, state_id)
