"""The urls table: one item per crawl and URL (dedupe, a retry's state, outcomes the table holds), on SQLite.

The same items as ``crawlstack.aws.urls.UrlStore`` keeps on DynamoDB, one
JSON document a row keyed by crawl and fingerprint; each method that
writes reads the item and writes it in one transaction, so its condition
and its change are one atomic step, as each is one conditional write on
DynamoDB (whose adapter's docstrings say what each condition is for).  No
reply is lost here, so no write needs a token.

Settings: ``settings.NOTE_MAX_CHARS``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any

from crawlstack import settings
from crawlstack.local.sqlite.db import StateDb
from crawlstack.ports import Claim, UrlState

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS urls ("
    " crawl_id TEXT NOT NULL, fp TEXT NOT NULL, item TEXT NOT NULL,"
    " PRIMARY KEY (crawl_id, fp)) WITHOUT ROWID"
)
UNFETCHED = ("queued", "retrying", "fetching")


def _lost_claim(item: dict[str, Any]) -> Claim | None:
    if item.get("claimable") is True:
        return None
    return Claim(False, item.get("depth"), item.get("state"), item.get("claimed_by"))


# Fingerprints a batch read asks for in one statement (SQLite allows 32,766 parameters).
MANY_CHUNK = 500


class SqliteUrls:
    def __init__(self, db: StateDb, clock: Any = time.time) -> None:
        self.db = db
        self.clock = clock
        db.ensure(SCHEMA)

    # -- rows ------------------------------------------------------------------------
    @staticmethod
    def _get(conn: sqlite3.Connection, crawl_id: str, fp: str) -> dict[str, Any] | None:
        row = conn.execute("SELECT item FROM urls WHERE crawl_id = ? AND fp = ?", (crawl_id, fp)).fetchone()
        return json.loads(row[0]) if row else None

    @staticmethod
    def _put(conn: sqlite3.Connection, crawl_id: str, fp: str, item: dict[str, Any]) -> None:
        conn.execute(
            "INSERT INTO urls (crawl_id, fp, item) VALUES (?, ?, ?)"
            " ON CONFLICT (crawl_id, fp) DO UPDATE SET item = excluded.item",
            (crawl_id, fp, json.dumps(item, ensure_ascii=False)),
        )

    # -- dispatch ----------------------------------------------------------------------
    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> Claim:
        with self.db.transaction() as conn:
            old = self._get(conn, crawl_id, fp)
            takes = (
                old is None
                or old.get("claimable") is True
                or (bool(claimer) and old.get("claimed_by") == claimer and old.get("state") == "queued")
            )
            if not takes:
                assert old is not None
                return Claim(False, old.get("depth"), old.get("state"))
            item: dict[str, Any] = {
                "crawl_id": crawl_id,
                "url": url,
                "depth": depth,
                "state": "queued",
                "seen_at": self.clock(),
            }
            if claimer:
                item["claimed_by"] = claimer
            if record_id:
                item["record_id"] = record_id
            self._put(conn, crawl_id, fp, item)
            return Claim(True)

    def seen(self, crawl_id: str, fp: str) -> Claim | None:
        with self.db.reading() as conn:
            item = self._get(conn, crawl_id, fp)
        return _lost_claim(item) if item else None

    def seen_many(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Claim | None]:
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, str], dict[str, Any]] = {}
        by_crawl: dict[str, list[str]] = {}
        for crawl_id, fp in wanted:
            by_crawl.setdefault(crawl_id, []).append(fp)
        with self.db.reading() as conn:
            for crawl_id, fps in by_crawl.items():
                for start in range(0, len(fps), MANY_CHUNK):
                    chunk = fps[start : start + MANY_CHUNK]
                    rows = conn.execute(
                        f"SELECT fp, item FROM urls WHERE crawl_id = ? AND fp IN ({', '.join('?' * len(chunk))})",
                        (crawl_id, *chunk),
                    )
                    found.update(((crawl_id, fp), json.loads(item)) for fp, item in rows)
        return {key: _lost_claim(found[key]) if key in found else None for key in wanted}

    def lower_depth(self, crawl_id: str, fp: str, depth: int) -> bool:
        with self.db.transaction() as conn:
            item = self._get(conn, crawl_id, fp)
            if item is None or item.get("state") not in UNFETCHED or not item.get("depth", 0) > depth:
                return False
            self._put(conn, crawl_id, fp, {**item, "depth": depth})
            return True

    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        """Record a URL skipped without claiming it, only if the crawl has no item for it yet (``claimable``)."""
        return self.note_url(crawl_id, fp, url, depth, "skipped", reason)

    def note_url(self, crawl_id: str, fp: str, url: str, depth: int, state: str, reason: str) -> bool:
        """A URL the crawl passed over (``state``, ``reason``), only if it has no item yet; a claim takes it over."""
        with self.db.transaction() as conn:
            if self._get(conn, crawl_id, fp) is not None:
                return False
            now = self.clock()
            item = {"crawl_id": crawl_id, "url": url, "depth": depth, "state": state, "reason": reason,
                    "claimable": True, "seen_at": now, "finished_at": now}  # fmt: skip
            self._put(conn, crawl_id, fp, item)
            return True

    # -- fetch and extract ---------------------------------------------------------------
    def depths(self, crawl_id: str, fps: Iterable[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self.db.reading() as conn:
            for fp in dict.fromkeys(fps):
                item = self._get(conn, crawl_id, fp)
                if item is not None and isinstance(item.get("depth"), int):
                    found[fp] = item["depth"]
        return found

    def fetch_states(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], UrlState]:
        found: dict[tuple[str, str], UrlState] = {}
        with self.db.reading() as conn:
            for key in dict.fromkeys(keys):
                item = self._get(conn, *key)
                if item is not None:
                    found[key] = UrlState(
                        item.get("state"), int(item.get("attempt") or 1), float(item.get("retry_at") or 0)
                    )
        return found

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None:
        """The URL's outcome (an item is made if there is none, as an UpdateItem makes one)."""
        with self.db.transaction() as conn:
            item = self._get(conn, crawl_id, fp) or {"crawl_id": crawl_id}
            item.update(state=outcome, finished_at=self.clock(), **{k: v for k, v in fields.items() if v is not None})
            self._put(conn, crawl_id, fp, item)

    def add_note(self, crawl_id: str, fp: str, note: str) -> None:
        """What the URL's crawl-log line should say beyond its outcome; only on an item that exists."""
        with self.db.transaction() as conn:
            item = self._get(conn, crawl_id, fp)
            if item is not None:
                self._put(conn, crawl_id, fp, {**item, "note": note[: settings.NOTE_MAX_CHARS]})

    def unclaim(self, crawl_id: str, fp: str, record_id: str, reason: str, stale_before: float) -> bool:
        """A claimed, unfetched URL given back by its record: ``skipped`` and ``claimable`` again."""
        with self.db.transaction() as conn:
            item = self._get(conn, crawl_id, fp)
            if item is None or item.get("record_id") != record_id:
                return False
            state = item.get("state")
            # As DynamoDB's condition: an item with no started_at is not stale.
            stale = state == "fetching" and item.get("started_at") is not None and item["started_at"] < stale_before
            if state not in ("queued", "retrying") and not stale:
                return False
            item.update(state="skipped", reason=reason, finished_at=self.clock(), claimable=True)
            self._put(conn, crawl_id, fp, item)
            return True

    def state(self, crawl_id: str, fp: str) -> str | None:
        with self.db.reading() as conn:
            item = self._get(conn, crawl_id, fp)
        return item.get("state") if item else None

    def scan_crawl(self, crawl_id: str) -> Iterator[dict[str, Any]]:
        with self.db.reading() as conn:
            rows = conn.execute("SELECT item FROM urls WHERE crawl_id = ?", (crawl_id,)).fetchall()
        for (raw,) in rows:
            yield json.loads(raw)
