"""Local mode's bucket as OUT/ (``LocalBlobs``): WARCs announced as S3 announces them, outputs streamed once."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

from crawlstack import settings
from crawlstack.local.sqlite import LocalBlobs, SqliteJournal, SqliteQueue, StateDb
from crawlstack.messages import FetchTask
from functions.extract.handler import created_objects


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
    return FetchTask(url=f"http://a/{n}", fp=f"fp{n}", host="a", depth=1, crawl_id="c", not_before=0, delay=0)


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
