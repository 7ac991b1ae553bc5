"""Local mode's bucket as OUT/ (``LocalBlobs``): WARCs announced as S3 announces them, outputs streamed once."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crawlstack import settings
from crawlstack.local.sqlite import LocalBlobs, SqliteJournal, SqliteQueue, StateDb
from crawlstack.messages import FetchTask, created_objects


def blobs_in(out: Path) -> tuple[LocalBlobs, SqliteQueue, StateDb]:
    db = StateDb(out / "state.sqlite")
    queue = SqliteQueue(db, "extract")
    return LocalBlobs(out, db, queue, bucket="pages"), queue, db


def gz_lines(*values: dict[str, object]) -> bytes:
    return gzip.compress("".join(json.dumps(v) + "\n" for v in values).encode())


def test_a_warc_goes_to_out_warc_and_is_announced_as_s3_would(tmp_path: Path) -> None:
    blobs, queue, _ = blobs_in(tmp_path)
    key = f"{settings.PAGES_PREFIX}dt=2026-11-27/ab+c d.warc.gz"
    blobs.put(key, b"warc bytes", "application/warc")
    assert (tmp_path / "warc" / "ab+c d.warc.gz").read_bytes() == b"warc bytes"
    assert blobs.get(key) == b"warc bytes"
    [message] = queue.receive(10, 30)
    assert created_objects(message.body) == [("pages", key)]  # the key survives its URL encoding
    assert list(blobs.keys(settings.PAGES_PREFIX)) == [key]
    blobs.put(f"{settings.CRAWL_LOG_PREFIX}x.jsonl.gz", gz_lines({"url": "u"}), "application/x-ndjson")
    assert queue.receive(10, 30) == []  # only WARCs are announced


def test_records_stream_into_records_jsonl_once_however_often_their_object_is_written(tmp_path: Path) -> None:
    blobs, _, _ = blobs_in(tmp_path)
    key = f"{settings.RECORDS_PREFIX}crawl_id=c/dt=2026-11-27/a.jsonl.gz"
    data = gz_lines({"url": "http://a/1", "fp": "f1", "fields": {"t": "é"}}, {"url": "http://a/2", "fp": "f2"})
    blobs.put(key, data, "application/x-ndjson")
    blobs.put(key, data, "application/x-ndjson")  # a redelivered S3 event rewrites its own object
    lines = (tmp_path / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"url": "http://a/1", "fields": {"t": "é"}}, {"url": "http://a/2"}]
    assert gzip.decompress(blobs.get(key)) == gzip.decompress(data)


def test_trim_cuts_what_a_kill_left_after_the_last_commit(tmp_path: Path) -> None:
    blobs, _, _ = blobs_in(tmp_path)
    blobs.put(f"{settings.CRAWL_LOG_PREFIX}a.jsonl.gz", gz_lines({"url": "u1", "crawl_id": "c"}), "x")
    committed = (tmp_path / "crawl-log.jsonl").read_bytes()
    with (tmp_path / "crawl-log.jsonl").open("ab") as fh:
        fh.write(b'{"url": "u2"}\n{"url": "u3", "trunc')  # appended, never committed
    (tmp_path / "records.jsonl").write_text('{"url": "never committed"}\n')
    blobs.trim()
    assert (tmp_path / "crawl-log.jsonl").read_bytes() == committed == b'{"url": "u1"}\n'
    assert (tmp_path / "records.jsonl").read_bytes() == b""


def task(n: int, attempt: int = 1) -> FetchTask:
    return FetchTask(url=f"http://a/{n}", fp=f"fp{n}", host="a", depth=1, crawl_id="c", not_before=0)


def test_the_journal_marks_requested_tries_still_waiting_as_refetched(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    journal = SqliteJournal(db, tmp_path / "requests.journal")
    done, in_flight, retried, never_started = (task(n) for n in (1, 2, 3, 4))
    for started in (done, in_flight, retried):
        journal.started(started)
    next_try = replace(retried, attempt=2)
    assert journal.mark_in_flight([in_flight, next_try, never_started]) == 1
    assert journal.refetched() == {in_flight.url}
    with (tmp_path / "requests.journal").open("a") as fh:
        fh.write(f"{never_started.attempt_key}\thttp://a/4")  # a line a kill cut short
    assert journal.mark_in_flight([never_started]) == 0


def test_a_page_fetched_again_in_another_warc_streams_its_record_once(tmp_path: Path) -> None:
    blobs, _, _ = blobs_in(tmp_path)
    record = {"url": "http://a/1", "fp": "f1", "crawl_id": "c", "fields": {"t": "one"}}
    blobs.put(f"{settings.RECORDS_PREFIX}crawl_id=c/first.jsonl.gz", gz_lines(record), "x")
    # The same page after a kill caught it between its WARC and its task's end: another WARC, another key.
    again = {**record, "fields": {"t": "one, again"}}
    blobs.put(f"{settings.RECORDS_PREFIX}crawl_id=c/second.jsonl.gz", gz_lines(again, {**record, "fp": "f2"}), "x")
    lines = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    # The first record of the page kept; the other page's record in the second object still goes in.
    assert [(r["url"], r["fields"]["t"]) for r in lines] == [("http://a/1", "one"), ("http://a/1", "one")]


def test_a_put_that_fails_to_commit_leaves_no_line_behind(tmp_path: Path, monkeypatch: Any) -> None:
    blobs, _, db = blobs_in(tmp_path)
    blobs.put(f"{settings.RECORDS_PREFIX}crawl_id=c/a.jsonl.gz", gz_lines({"url": "u1", "fp": "f1"}), "x")
    before = (tmp_path / "records.jsonl").read_bytes()
    real = StateDb.transaction

    @contextmanager
    def full_at_commit(self: StateDb) -> Iterator[sqlite3.Connection]:
        with real(self) as conn:
            yield conn
            raise sqlite3.OperationalError("database or disk is full")  # as COMMIT would

    monkeypatch.setattr(StateDb, "transaction", full_at_commit)
    with pytest.raises(sqlite3.OperationalError):
        blobs.put(f"{settings.RECORDS_PREFIX}crawl_id=c/b.jsonl.gz", gz_lines({"url": "u2", "fp": "f2"}), "x")
    monkeypatch.undo()
    assert (tmp_path / "records.jsonl").read_bytes() == before
    assert db.fault is not None
    # Retried once there is room: its lines go in then.
    blobs.put(f"{settings.RECORDS_PREFIX}crawl_id=c/b.jsonl.gz", gz_lines({"url": "u2", "fp": "f2"}), "x")
    assert [json.loads(x)["url"] for x in (tmp_path / "records.jsonl").read_text().splitlines()] == ["u1", "u2"]


def test_a_file_rewritten_whole_is_committed_as_it_stands(tmp_path: Path) -> None:
    blobs, _, _ = blobs_in(tmp_path)
    blobs.put(f"{settings.CRAWL_LOG_PREFIX}a.jsonl.gz", gz_lines({"url": "u1", "attempt": 1}, {"url": "u2"}), "x")
    (tmp_path / "crawl-log.jsonl").write_text('{"url": "u1", "outcome": "fetched"}\n')  # the end's one line a URL
    blobs.rewritten("crawl-log.jsonl")
    blobs.put(f"{settings.CRAWL_LOG_PREFIX}b.jsonl.gz", gz_lines({"url": "u3"}), "x")  # a resume goes on
    with (tmp_path / "crawl-log.jsonl").open("a") as fh:
        fh.write('{"url": "u4", "cut')
    blobs.trim()
    assert (tmp_path / "crawl-log.jsonl").read_text() == '{"url": "u1", "outcome": "fetched"}\n{"url": "u3"}\n'


def test_trim_never_cuts_what_a_streamed_file_held_before_the_state_first_opened_it(tmp_path: Path) -> None:
    # An earlier crawl's records.jsonl in OUT/ when `sources add` made a state there: a watch resumed on it
    # trims its streamed files, and must not cut what it never wrote.
    (tmp_path / "records.jsonl").write_text('{"url": "an earlier crawl\'s"}\n', encoding="utf-8")
    before = (tmp_path / "records.jsonl").read_bytes()
    blobs, _, _ = blobs_in(tmp_path)
    blobs.trim()  # as a resume does, before anything is streamed
    assert (tmp_path / "records.jsonl").read_bytes() == before
    blobs.put(f"{settings.RECORDS_PREFIX}crawl_id=watch/a.jsonl.gz", gz_lines({"url": "u", "fp": "f"}), "x")
    blobs.trim()
    assert (tmp_path / "records.jsonl").read_bytes() == before + b'{"url": "u"}\n'
    assert blobs.records_streamed == 2
