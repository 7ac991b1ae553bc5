"""A queue with SQS's semantics on SQLite (``crawlstack.queueing``): delays, visibility, receive counts, a DLQ.

Every queue of the state database shares one table, a message a row; a
receive picks the messages visible now, in the order they became
visible, and hides them in the same transaction, so two receivers never
get one message at once.  A message already received ``max_receives``
times is moved to ``dead_letter`` (another queue of the same database)
instead of being handed out, as SQS's redrive policy does.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Sequence

from crawlstack import settings
from crawlstack.local.sqlite.db import StateDb
from crawlstack.queueing import Depth, Received

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages ("
    " queue TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, sent_at REAL NOT NULL,"
    " visible_at REAL NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0, receipt TEXT,"
    " PRIMARY KEY (queue, id))",
    "CREATE INDEX IF NOT EXISTS messages_due ON messages (queue, visible_at)",
    "CREATE INDEX IF NOT EXISTS messages_receipt ON messages (receipt)",
)


class SqliteQueue:
    def __init__(
        self,
        db: StateDb,
        name: str,
        dead_letter: str | None = None,
        max_receives: int = settings.MAX_RECEIVE_COUNT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.name = name
        self.dead_letter = dead_letter
        self.max_receives = max_receives
        self.clock = clock
        db.ensure(*SCHEMA)

    def send(self, messages: Iterable[tuple[str, int]]) -> int:
        with self.db.transaction() as conn:
            return self.insert(conn, messages)

    def insert(self, conn: sqlite3.Connection, messages: Iterable[tuple[str, int]]) -> int:
        """``send`` inside a transaction another store of the same database holds (``LocalBlobs``' notifications)."""
        now = self.clock()
        rows = [
            (self.name, uuid.uuid4().hex, body, now, now + max(0, min(delay, settings.MAX_SQS_DELAY_SECONDS)))
            for body, delay in messages
        ]
        conn.executemany("INSERT INTO messages (queue, id, body, sent_at, visible_at) VALUES (?, ?, ?, ?, ?)", rows)
        return len(rows)

    def release_in_flight(self) -> int:
        """Make every message received and not deleted visible now: their receivers died with a killed crawl."""
        with self.db.transaction() as conn:
            return conn.execute(
                "UPDATE messages SET visible_at = ?, receipt = NULL"
                " WHERE queue = ? AND receive_count > 0 AND visible_at > ?",
                (self.clock(), self.name, self.clock()),
            ).rowcount

    def receive(self, most: int, visibility_timeout: int) -> list[Received]:
        with self.db.reading() as conn:
            # An empty queue costs a read, not a write transaction (the pump polls them all).
            if not conn.execute(
                "SELECT 1 FROM messages WHERE queue = ? AND visible_at <= ? LIMIT 1", (self.name, self.clock())
            ).fetchone():
                return []
        out: list[Received] = []
        handed: set[str] = set()  # a message hidden for 0 s is visible again, but not twice in one receive
        with self.db.transaction() as conn:
            now = self.clock()
            while len(out) < most:
                due = conn.execute(
                    "SELECT id, body, sent_at, receive_count FROM messages WHERE queue = ? AND visible_at <= ?"
                    " ORDER BY visible_at, sent_at, id LIMIT ?",
                    (self.name, now, most - len(out) + len(handed)),
                ).fetchall()
                fresh = [row for row in due if row[0] not in handed]
                if not fresh:
                    break
                for message_id, body, sent_at, count in fresh:
                    if self.dead_letter is not None and count >= self.max_receives:
                        conn.execute(
                            "UPDATE messages SET queue = ?, visible_at = ?, receipt = NULL WHERE queue = ? AND id = ?",
                            (self.dead_letter, now, self.name, message_id),
                        )
                        continue
                    receipt = uuid.uuid4().hex
                    conn.execute(
                        "UPDATE messages SET visible_at = ?, receive_count = ?, receipt = ? WHERE queue = ? AND id = ?",
                        (now + visibility_timeout, count + 1, receipt, self.name, message_id),
                    )
                    handed.add(message_id)
                    out.append(Received(message_id, body, receipt, count + 1, sent_at))
        return out

    def delete(self, receipts: Sequence[str]) -> None:
        with self.db.transaction() as conn:
            conn.executemany("DELETE FROM messages WHERE queue = ? AND receipt = ?", [(self.name, r) for r in receipts])

    def change_visibility(self, receipts: Sequence[str], timeout: int) -> None:
        with self.db.transaction() as conn:
            visible_at = self.clock() + timeout
            conn.executemany(
                "UPDATE messages SET visible_at = ? WHERE queue = ? AND receipt = ?",
                [(visible_at, self.name, r) for r in receipts],
            )

    def depth(self) -> Depth:
        with self.db.reading() as conn:
            visible, in_flight, delayed = conn.execute(
                "SELECT coalesce(sum(visible_at <= :now), 0),"
                " coalesce(sum(visible_at > :now AND receive_count > 0), 0),"
                " coalesce(sum(visible_at > :now AND receive_count = 0), 0)"
                " FROM messages WHERE queue = :queue",
                {"now": self.clock(), "queue": self.name},
            ).fetchone()
        return Depth(int(visible), int(in_flight), int(delayed))
