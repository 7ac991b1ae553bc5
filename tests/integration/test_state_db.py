"""Local mode's state database (``crawlstack.local.sqlite.db``): atomic writes that outlive the process's handle."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from crawlstack.local.sqlite import SqliteBacklog, StateDb
from crawlstack.messages import FetchTask


def task(n: int) -> FetchTask:
    return FetchTask(f"http://a.example/{n}", f"fp{n}", "a.example", 1, "c", 0.0)


def test_a_write_that_raises_leaves_nothing_behind(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    db.ensure("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")
    with pytest.raises(RuntimeError), db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('a')")
        raise RuntimeError("the write fails half way")
    with db.reading() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    with pytest.raises(sqlite3.IntegrityError), db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES ('b')")
        conn.execute("INSERT INTO t VALUES ('b')")
    with db.reading() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_committed_bundles_are_there_for_the_next_process_and_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    first = StateDb(path)
    keys = SqliteBacklog(first).add("a.example", 1, [task(1), task(2)])
    with first.reading() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    # Not closed: as after a kill, the next process opens the same file.
    again = SqliteBacklog(StateDb(path))
    assert [b.key for b in again.peek("a.example", 5)] == keys
    assert again.waiting() == 2


def test_threads_share_one_database_and_lose_no_write(tmp_path: Path) -> None:
    backlog = SqliteBacklog(StateDb(tmp_path / "state.sqlite"))

    def add(worker: int) -> None:
        for n in range(50):
            backlog.add(f"h{worker}.example", 1, [task(worker * 1000 + n)])

    threads = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert backlog.waiting() == 200
    assert all(len(backlog.peek(f"h{w}.example", 100)) == 50 for w in range(4))


def test_a_commit_that_fails_leaves_no_transaction_open(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    db.ensure(
        "CREATE TABLE IF NOT EXISTS p (k TEXT PRIMARY KEY)",
        "CREATE TABLE IF NOT EXISTS c (k TEXT REFERENCES p(k) DEFERRABLE INITIALLY DEFERRED)",
    )
    db._conn.execute("PRAGMA foreign_keys = ON")  # on the writer's connection, outside any transaction
    with pytest.raises(sqlite3.IntegrityError), db.transaction() as conn:
        conn.execute("INSERT INTO c VALUES ('missing')")  # checked at COMMIT: the commit fails
    with db.transaction() as conn:  # a new transaction can begin
        conn.execute("INSERT INTO p VALUES ('k')")
    with db.reading() as conn:
        assert conn.execute("SELECT count(*) FROM c").fetchone() == (0,)
