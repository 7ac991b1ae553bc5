"""The pages bucket as files under one directory: a key is a relative path.

A write goes to a temporary file in the key's directory and is renamed into
place, so a reader (or a crawl resumed after a kill) sees an object whole
or not at all, as S3 gives it.  ``keys`` lists in key order, as S3 does.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote_plus, unquote_plus

from crawlstack import settings
from crawlstack.local.sqlite.db import StateDb
from crawlstack.local.sqlite.queues import SqliteQueue


class FileBlobs:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        parts = PurePosixPath(key).parts
        if not parts or key.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"not an object key: {key!r}")
        return self.root.joinpath(*parts)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        _write_whole(self._path(key), data)

    def get(self, key: str, bucket: str | None = None) -> bytes:
        return self._path(key).read_bytes()

    def keys(self, prefix: str, since: float | None = None) -> Iterator[str]:
        """Keys under ``prefix``; with ``since`` (epoch seconds), only those written after it."""
        if not self.root.exists():
            return
        found = []
        for path in self.root.rglob("*"):
            if not path.is_file() or path.name.startswith(".put-"):
                continue
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix) and (since is None or path.stat().st_mtime >= since):
                found.append(key)
        yield from sorted(found)


class LocalBlobs:
    """A local crawl's bucket laid out as its output directory, with S3's notification to the extract queue.

    * A WARC (``settings.PAGES_PREFIX``) is written straight to ``OUT/warc/``,
      under its file name (unique: a hash of its batch), and announced to
      ``notify`` in an S3 ``ObjectCreated`` event, as the bucket's
      notification does deployed.  The event's row is committed with the
      object's, so a WARC listed is a WARC announced.
    * Every other object is a file under ``OUT/objects/`` (``FileBlobs``).
    * A records or crawl-log object is also appended, as JSON lines, to
      ``OUT/records.jsonl`` or ``OUT/crawl-log.jsonl``: the outputs grow as the
      crawl goes.  Each append is committed with its key and the file's new
      length, so a redelivery's rewrite of an object appends nothing twice,
      and ``trim`` cuts what a kill left past the last commit.

    Keys are listed from the ``objects`` table, not by walking directories.
    A streamed file is the state's from its first open: its length then is
    its first committed one, so ``trim`` never cuts what was there before.
    """

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, path TEXT NOT NULL) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS streamed (key TEXT PRIMARY KEY, file TEXT NOT NULL, end INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS streamed_records (crawl_id TEXT, fp TEXT, PRIMARY KEY (crawl_id, fp))"
        " WITHOUT ROWID",
    )
    RECORDS = "records.jsonl"
    # Which objects stream to which output file, and the keys each line drops.
    STREAMS = {
        settings.RECORDS_PREFIX: (RECORDS, ("fp",)),
        settings.CRAWL_LOG_PREFIX: ("crawl-log.jsonl", ("crawl_id",)),
    }

    def __init__(self, out: str | Path, db: StateDb, notify: SqliteQueue, bucket: str = "local") -> None:
        self.out = Path(out)
        self.db = db
        self.notify = notify
        self.bucket = bucket
        self.files = FileBlobs(self.out / "objects")
        db.ensure(*self.SCHEMA)
        if not db.read_only:
            self._claim_streams()
        # Records in records.jsonl so far; a resumed crawl's count goes on from its file's (``trim``).
        self.records_streamed = self._lines(self.out / self.RECORDS)

    def _claim_streams(self) -> None:
        """Commit each streamed file's length as this state first finds it (0 if absent), once."""
        with self.db.transaction() as conn:
            for name, _ in self.STREAMS.values():
                path = self.out / name
                conn.execute(
                    "INSERT INTO streamed (key, file, end) SELECT ?, ?, ?"
                    " WHERE NOT EXISTS (SELECT 1 FROM streamed WHERE file = ?)",
                    (f"#found:{name}", name, path.stat().st_size if path.is_file() else 0, name),
                )

    @staticmethod
    def written(db: StateDb) -> list[str]:
        """The files (relative to OUT/) of every object a crawl on ``db`` wrote."""
        with db.reading() as conn:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'objects'").fetchone():
                return []
            return [path for (path,) in conn.execute("SELECT path FROM objects")]

    def missing(self, read_back: tuple[str, ...] = ()) -> list[str]:
        """The files that are gone of objects under ``read_back`` prefixes and of WARCs announced, not yet extracted."""
        with self.db.reading() as conn:
            objects = conn.execute("SELECT key, path FROM objects").fetchall()
            bodies = conn.execute("SELECT body FROM messages WHERE queue = ?", (self.notify.name,)).fetchall()
        announced = {key for (body,) in bodies for key in announced_keys(body)}
        needed = [path for key, path in objects if key in announced or (read_back and key.startswith(read_back))]
        return [path for path in needed if not (self.out / path).exists()]

    def _path(self, key: str) -> Path:
        if key.startswith(settings.PAGES_PREFIX):
            name = PurePosixPath(key).name
            if not name or name.startswith("."):
                raise ValueError(f"not an object key: {key!r}")
            return self.out / "warc" / name
        return self.files._path(key)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        path = self._path(key)
        try:
            _write_whole(path, data)
        except OSError as exc:
            self.db.note(exc)  # a full disk stops the crawl (``StateDb.fault``)
            raise
        appended: list[tuple[Path, int]] = []  # each streamed file and its length before this put
        records = 0
        try:
            with self.db.transaction() as conn:
                conn.execute(
                    "INSERT INTO objects (key, path) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET path = excluded.path",
                    (key, str(path.relative_to(self.out))),
                )
                if key.startswith(settings.PAGES_PREFIX) and key.endswith(".warc.gz"):
                    self.notify.insert(conn, [(object_created(self.bucket, key, len(data)), 0)])
                for prefix, (name, dropped) in self.STREAMS.items():
                    if key.startswith(prefix):
                        lines = self._stream(conn, key, name, dropped, data, appended)
                        records += lines if name == self.RECORDS else 0
        except BaseException as exc:
            # Not committed: what was appended goes, or a later commit's length would keep it.
            for file, length in appended:
                with file.open("r+b") as fh:
                    fh.truncate(length)
            if isinstance(exc, OSError):
                self.db.note(exc)
            raise
        self.records_streamed += records

    def _stream(
        self,
        conn: sqlite3.Connection,
        key: str,
        name: str,
        dropped: tuple[str, ...],
        data: bytes,
        appended: list[tuple[Path, int]],
    ) -> int:
        """Append the object's lines to ``name``; how many."""
        if conn.execute("SELECT 1 FROM streamed WHERE key = ?", (key,)).fetchone():
            return 0  # a redelivery rewrote its object: its lines are in the file already
        lines = []
        for line in gzip.decompress(data).decode("utf-8").split("\n"):
            if not line.strip():
                continue
            value = json.loads(line)
            if name == self.RECORDS and not self._first_record(conn, value):
                continue
            for field in dropped:
                value.pop(field, None)
            lines.append(json.dumps(value, ensure_ascii=False, allow_nan=False) + "\n")
        path = self.out / name
        with path.open("a", encoding="utf-8") as fh:
            appended.append((path, fh.tell()))
            fh.write("".join(lines))
            end = fh.tell()
        conn.execute("INSERT INTO streamed (key, file, end) VALUES (?, ?, ?)", (key, name, end))
        return len(lines)

    @staticmethod
    def _first_record(conn: sqlite3.Connection, record: dict[str, Any]) -> bool:
        """Whether this is the first record streamed of its page: a page a kill caught after its WARC
        was written but before its task was done is fetched again, in another WARC."""
        if "fp" not in record:
            return True
        added = conn.execute(
            "INSERT OR IGNORE INTO streamed_records (crawl_id, fp) VALUES (?, ?)",
            (record.get("crawl_id") or "", record["fp"]),
        )
        return added.rowcount == 1

    def rewritten(self, name: str) -> None:
        """``name`` was rewritten whole (the crawl log at a crawl's end): its length now is the committed one."""
        path = self.out / name
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM streamed WHERE file = ?", (name,))
            conn.execute(
                "INSERT INTO streamed (key, file, end) VALUES (?, ?, ?)",
                (f"#rewritten:{name}", name, path.stat().st_size if path.exists() else 0),
            )

    def get(self, key: str, bucket: str | None = None) -> bytes:
        return self._path(key).read_bytes()

    def keys(self, prefix: str, since: float | None = None) -> Iterator[str]:
        """Keys under ``prefix``, in key order; with ``since`` (epoch seconds), only those written after it."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT key, path FROM objects WHERE key >= ? AND substr(key, 1, ?) = ? ORDER BY key",
                (prefix, len(prefix), prefix),
            ).fetchall()
        for key, path in rows:
            if since is None or (self.out / path).stat().st_mtime >= since:
                yield key

    def trim(self) -> None:
        """Cut each streamed file back to its last committed length: what a kill left after it goes."""
        with self.db.reading() as conn:
            ends = dict(conn.execute("SELECT file, max(end) FROM streamed GROUP BY file").fetchall())
        for name, _ in self.STREAMS.values():
            path = self.out / name
            if path.exists() and path.stat().st_size > ends.get(name, 0):
                with path.open("r+b") as fh:
                    fh.truncate(ends.get(name, 0))
        self.records_streamed = self._lines(self.out / self.RECORDS)

    @staticmethod
    def _lines(path: Path) -> int:
        if not path.exists():
            return 0
        with path.open("rb") as fh:
            return sum(1 for _ in fh)


def object_created(bucket: str, key: str, size: int) -> str:
    """The S3 event notification body an ``ObjectCreated:Put`` of ``key`` sends to a queue (its key URL-encoded)."""
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": {"key": quote_plus(key, safe="/"), "size": size}},
    }
    return json.dumps({"Records": [record]})


def announced_keys(body: str) -> list[str]:
    """The object keys an S3 event notification body (``object_created``) announces."""
    try:
        records = json.loads(body).get("Records") or []
        return [unquote_plus(r["s3"]["object"]["key"]) for r in records]
    except (ValueError, AttributeError, KeyError, TypeError):
        return []


def _write_whole(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
