"""A queue with SQS's semantics on SQLite (``crawlstack.queueing``): delays, visibility, receive counts, a DLQ.

Every queue of the state database shares one table, a message a row; a
receive picks the messages visible now, in the order they became
visible, and hides them in the same transaction, so two receivers never
get one message at once.  A message already received ``max_receives``
times is moved to ``dead_letter`` (another queue of the same database)
instead of being handed out, as SQS's redrive policy does.

A kill of the crawl is not a failed delivery.  Each receive notes who
holds the message (``holder``: this queue object, one per process), until
it is deleted or handed back (``change_visibility``: its handler returned).
A resume's ``recover`` finds the messages a killed process held, makes
them visible, and gives their receives back; it counts the kill instead
(``kills``: kills in a row the message was in flight at; a kill it was not
held at, or a handler that returned, starts the count again).  At
``max_kills`` it goes to the dead-letter queue as ``killed while
processing``.  A dead-lettered message keeps why (``dead_reason``), for
``crawlstack dlq show --local`` and the crawl log; ``move`` redrives it.

Settings: ``settings.MAX_RECEIVE_COUNT``, ``settings.MAX_CONSECUTIVE_KILLS``.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from crawlstack import settings
from crawlstack.local.sqlite.db import StateDb
from crawlstack.queueing import Depth, Received

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages ("
    " queue TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, sent_at REAL NOT NULL,"
    " visible_at REAL NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0, receipt TEXT,"
    " holder TEXT, kills INTEGER NOT NULL DEFAULT 0, dead_reason TEXT,"
    " PRIMARY KEY (queue, id))",
    "CREATE INDEX IF NOT EXISTS messages_due ON messages (queue, visible_at)",
    "CREATE INDEX IF NOT EXISTS messages_receipt ON messages (receipt)",
)
# Columns a state written before kills were told apart lacks (added on a writable open).
ADDED_COLUMNS = {"holder": "TEXT", "kills": "INTEGER NOT NULL DEFAULT 0", "dead_reason": "TEXT"}


@dataclass(frozen=True)
class DeadLetter:
    """A message in a dead-letter queue, and why it is there."""

    message_id: str
    body: str
    receive_count: int
    sent_at: float
    reason: str | None  # "killed while processing", "5 failed tries"; None: moved by another program


class SqliteQueue:
    def __init__(
        self,
        db: StateDb,
        name: str,
        dead_letter: str | None = None,
        max_receives: int = settings.MAX_RECEIVE_COUNT,
        clock: Callable[[], float] = time.time,
        max_kills: int | None = settings.MAX_CONSECUTIVE_KILLS,
    ) -> None:
        """``max_kills``: kills in a row a message may be in flight at before it is dead-lettered; None: any."""
        self.db = db
        self.name = name
        self.dead_letter = dead_letter
        self.max_receives = max_receives
        self.max_kills = max_kills
        self.clock = clock
        # Who holds the messages this process receives: any other holder found by ``recover`` was killed.
        self.holder = uuid.uuid4().hex
        db.ensure(*SCHEMA)
        if not db.read_only:
            _add_columns(db)

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

    def recover(self) -> int:
        """Ready the queue after a kill: what a killed process held comes back, its receives given back.

        Each such message counts a kill; one in flight at ``max_kills`` kills
        in a row goes to the dead-letter queue, ``killed while processing``.
        A message failed and waiting out its retry is visible at once, as
        before.  Returns how many were dead-lettered.
        """
        with self.db.transaction() as conn:
            now = self.clock()
            # Not in a handler at this kill: whatever killed the process, it was not this message.
            conn.execute("UPDATE messages SET kills = 0 WHERE queue = ? AND kills > 0 AND holder IS NULL", (self.name,))
            conn.execute(
                "UPDATE messages SET visible_at = ?, receipt = NULL, holder = NULL,"
                " receive_count = max(receive_count - 1, 0), kills = kills + 1"
                " WHERE queue = ? AND holder IS NOT NULL AND holder != ?",
                (now, self.name, self.holder),
            )
            conn.execute(
                "UPDATE messages SET visible_at = ?, receipt = NULL"
                " WHERE queue = ? AND receive_count > 0 AND visible_at > ? AND holder IS NULL",
                (now, self.name, now),
            )
            if self.dead_letter is None or self.max_kills is None:
                return 0
            return conn.execute(
                "UPDATE messages SET queue = ?, dead_reason = ? WHERE queue = ? AND kills >= ?",
                (self.dead_letter, settings.KILLED_WHILE_PROCESSING, self.name, self.max_kills),
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
                            "UPDATE messages SET queue = ?, visible_at = ?, receipt = NULL, holder = NULL,"
                            " dead_reason = ? WHERE queue = ? AND id = ?",
                            (self.dead_letter, now, f"{count} failed tries", self.name, message_id),
                        )
                        continue
                    receipt = uuid.uuid4().hex
                    conn.execute(
                        "UPDATE messages SET visible_at = ?, receive_count = ?, receipt = ?, holder = ?"
                        " WHERE queue = ? AND id = ?",
                        (now + visibility_timeout, count + 1, receipt, self.holder, self.name, message_id),
                    )
                    handed.add(message_id)
                    out.append(Received(message_id, body, receipt, count + 1, sent_at))
        return out

    def delete(self, receipts: Sequence[str]) -> None:
        with self.db.transaction() as conn:
            conn.executemany("DELETE FROM messages WHERE queue = ? AND receipt = ?", [(self.name, r) for r in receipts])

    def change_visibility(self, receipts: Sequence[str], timeout: int) -> None:
        """Hide the messages for ``timeout`` seconds; their handler returned (the pump's retry), so none holds them.

        A kill while they wait is none of theirs, and they outlived their
        handler: their count of kills starts again.
        """
        with self.db.transaction() as conn:
            visible_at = self.clock() + timeout
            conn.executemany(
                "UPDATE messages SET visible_at = ?, holder = NULL, kills = 0 WHERE queue = ? AND receipt = ?",
                [(visible_at, self.name, r) for r in receipts],
            )

    def dead_letters(self, limit: int | None) -> list[DeadLetter]:
        """Up to ``limit`` messages (all: None) of this (dead-letter) queue, oldest moved first, left where they are."""
        with self.db.reading() as conn:
            reason = "dead_reason" if "dead_reason" in _columns(conn) else "NULL"
            rows = conn.execute(
                f"SELECT id, body, receive_count, sent_at, {reason} FROM messages WHERE queue = ?"
                " ORDER BY visible_at, sent_at, id LIMIT ?",
                (self.name, -1 if limit is None else limit),
            ).fetchall()
        return [DeadLetter(*row) for row in rows]

    def move(self, target: str, limit: int | None = None) -> int:
        """Move up to ``limit`` messages (all: None) to queue ``target``, as new: visible now, never received."""
        with self.db.transaction() as conn:
            return conn.execute(
                "UPDATE messages SET queue = ?, visible_at = ?, receive_count = 0, receipt = NULL, holder = NULL,"
                " kills = 0, dead_reason = NULL WHERE queue = ? AND id IN"
                " (SELECT id FROM messages WHERE queue = ? ORDER BY visible_at, sent_at, id LIMIT ?)",
                (target, self.clock(), self.name, self.name, -1 if limit is None else limit),
            ).rowcount

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


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(messages)")}


def _add_columns(db: StateDb) -> None:
    with db.reading() as conn:
        if not ADDED_COLUMNS.keys() - _columns(conn):
            return  # the usual case: no write transaction
    with db.transaction() as conn:
        for column in sorted(ADDED_COLUMNS.keys() - _columns(conn)):
            conn.execute(f"ALTER TABLE messages ADD COLUMN {column} {ADDED_COLUMNS[column]}")
