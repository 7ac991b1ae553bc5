"""A watch's state in the state database: each source's schedule state, its items seen, its events.

* ``source_state``: priority, tokens, check history and the last check's
  validators (its first page's ``ETag``, ``Last-Modified`` and highest
  identity), per source (``watch.schedule.SourceState``);
* ``seen_items``: each (source, identity) ever seen, with when it was first and
  last seen.  ``record_page`` inserts the page's identities and the events of
  the new ones in one transaction: an identity is new exactly when its insert
  took (the conditional write), so a replayed page publishes nothing twice;
* ``events``: the outbox, in order.  ``publish`` appends the events not yet in
  ``OUT/events.jsonl`` and stores the file's length in the same transaction,
  so a kill between the two leaves lines that ``claim_events`` cuts before the
  next append: each ``event_id`` is in the file once.  A file the state did
  not write is never cut (``claim_events``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.local.outdir import StateError
from crawlstack.local.sqlite.db import StateDb
from crawlstack.watch.check import Validators
from crawlstack.watch.plan_clock import PlanClock
from crawlstack.watch.schedule import Check, SourceState

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS source_state (id TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS seen_items ("
    " source_id TEXT NOT NULL, identity TEXT NOT NULL, first_seen REAL NOT NULL, last_seen REAL NOT NULL,"
    " first_page TEXT NOT NULL, PRIMARY KEY (source_id, identity)) WITHOUT ROWID",
    # Each page of a check, with its new items: a check's yield is their sum.
    "CREATE TABLE IF NOT EXISTS check_pages ("
    " source_id TEXT NOT NULL, slot TEXT NOT NULL, page INTEGER NOT NULL, new_items INTEGER NOT NULL,"
    " PRIMARY KEY (source_id, slot, page)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS checks_done (source_id TEXT NOT NULL, slot TEXT NOT NULL,"
    " PRIMARY KEY (source_id, slot)) WITHOUT ROWID",
    # The day's planned checks; sent once each (a resume goes on with the ones not sent).
    "CREATE TABLE IF NOT EXISTS watch_plan (source_id TEXT NOT NULL, at REAL NOT NULL, sent INTEGER NOT NULL,"
    " sent_at REAL, PRIMARY KEY (source_id, at)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS watch_plan_due ON watch_plan (sent, at)",
    "CREATE INDEX IF NOT EXISTS watch_plan_sent ON watch_plan (sent, sent_at)",
    "CREATE TABLE IF NOT EXISTS watch_day (id INTEGER PRIMARY KEY CHECK (id = 1), day_end REAL NOT NULL)",
    # How the plan's times map to the watch's, once a stall re-spread them (watch.plan_clock).
    "CREATE TABLE IF NOT EXISTS plan_clock (id INTEGER PRIMARY KEY CHECK (id = 1), anchor REAL NOT NULL,"
    " at REAL NOT NULL, rate REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, event_id TEXT UNIQUE NOT NULL, line TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events_file (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL,"
    " length INTEGER NOT NULL)",
)


class SqliteWatch:
    def __init__(self, db: StateDb, events_path: Path) -> None:
        self.db = db
        self.events_path = events_path
        db.ensure(*SCHEMA)

    # --- schedule state ---------------------------------------------------------
    def states(self) -> dict[str, tuple[SourceState, Validators | None]]:
        with self.db.reading() as conn:
            rows = conn.execute("SELECT id, state FROM source_state").fetchall()
        return {source_id: _state_of(json.loads(text)) for source_id, text in rows}

    def save_state(self, source_id: str, state: SourceState, validators: Validators | None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO source_state (id, state) VALUES (?, ?)",
                (source_id, json.dumps(_state_item(state, validators))),
            )

    # --- the plan -----------------------------------------------------------------
    def plan(
        self, checks: list[tuple[str, float]], tokens: dict[str, float], first: dict[str, SourceState], day_end: float
    ) -> None:
        """A day's checks (source, time), each source's change of tokens, and the day's end, in one write.

        The change is applied to the state as it is now, so a check that ended
        since the plan was drawn keeps its history and priority; a source with
        no state yet starts from ``first``.
        """
        with self.db.transaction() as conn:
            for source_id, change in tokens.items():
                _change_state(conn, source_id, first[source_id], _add_tokens(change))
            conn.executemany("INSERT OR IGNORE INTO watch_plan (source_id, at, sent) VALUES (?, ?, 0)", checks)
            conn.execute("INSERT OR REPLACE INTO watch_day (id, day_end) VALUES (1, ?)", (day_end,))

    def unplanned(self) -> bool:
        """Whether a source in the same database (``SqliteSources``) has no schedule state yet."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT 1 FROM sources s WHERE NOT EXISTS (SELECT 1 FROM source_state st WHERE st.id = s.id) LIMIT 1"
            ).fetchone()
        return row is not None

    def plan_first(self, checks: list[tuple[str, float]], states: dict[str, SourceState]) -> list[str]:
        """Each source without a state gets ``states``' and its checks, in one write; the ones planned."""
        planned = []
        with self.db.transaction() as conn:
            for source_id, state in states.items():
                item = json.dumps(_state_item(state, None))
                if conn.execute(
                    "INSERT OR IGNORE INTO source_state (id, state) VALUES (?, ?)", (source_id, item)
                ).rowcount:
                    planned.append(source_id)
            rows = [(sid, at) for sid, at in checks if sid in set(planned)]
            conn.executemany("INSERT OR IGNORE INTO watch_plan (source_id, at, sent) VALUES (?, ?, 0)", rows)
        return planned

    def plan_clock(self) -> PlanClock:
        with self.db.reading() as conn:
            row = conn.execute("SELECT anchor, at, rate FROM plan_clock WHERE id = 1").fetchone()
        return PlanClock(*map(float, row)) if row else PlanClock()

    def move_plan_clock(self, old: PlanClock, new: PlanClock) -> bool:
        """Set the plan's clock to ``new`` if it is still ``old``."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT anchor, at, rate FROM plan_clock WHERE id = 1").fetchone()
            if (PlanClock(*map(float, row)) if row else PlanClock()) != old:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO plan_clock (id, anchor, at, rate) VALUES (1, ?, ?, ?)",
                (new.anchor, new.at, new.rate),
            )
        return True

    def day_end(self) -> float | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT day_end FROM watch_day WHERE id = 1").fetchone()
        return float(row[0]) if row else None

    def due(self, now: float) -> list[tuple[str, float]]:
        """The planned checks not sent whose time has come, oldest first."""
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT source_id, at FROM watch_plan WHERE sent = 0 AND at <= ? ORDER BY at, source_id", (now,)
            ).fetchall()
        return [(str(source_id), float(at)) for source_id, at in rows]

    def resume_plan(self) -> int | None:
        """None: a plan is stored in one transaction, so none is ever left half applied."""
        return None

    def claim_due(self, now: float, wall: float, limit: int | None = None) -> list[tuple[str, float]]:
        """Claim the due checks not sent nor claimed lately: an unsent row's ``sent_at`` is its claim's time.

        A claim not followed by ``mark_sent`` (the send failed) is claimed
        again once older than ``settings.WATCH_CLAIM_SECONDS``.
        """
        query = (
            "SELECT source_id, at FROM watch_plan WHERE sent = 0 AND at <= ? AND (sent_at IS NULL OR sent_at < ?)"
            " ORDER BY at, source_id LIMIT ?"
        )
        args = (now, wall - settings.WATCH_CLAIM_SECONDS, -1 if limit is None else limit)
        with self.db.reading() as conn:
            if not conn.execute(query, args).fetchone():
                return []  # most turns of the pump: nothing due, and no write taken
        with self.db.transaction() as conn:
            rows = conn.execute(query, args).fetchall()
            claim = "UPDATE watch_plan SET sent_at = ? WHERE source_id = ? AND at = ?"
            conn.executemany(claim, [(wall, source_id, at) for source_id, at in rows])
        return [(str(source_id), float(at)) for source_id, at in rows]

    def oldest_unsent(self, now: float, claimable_at: float | None = None) -> float | None:
        query, args = "SELECT min(at) FROM watch_plan WHERE sent = 0 AND at <= ?", [now]
        if claimable_at is not None:  # an unsent row's sent_at is its claim's time
            query += " AND (sent_at IS NULL OR sent_at < ?)"
            args.append(claimable_at - settings.WATCH_CLAIM_SECONDS)
        with self.db.reading() as conn:
            row = conn.execute(query, args).fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def release_claims(self) -> int:
        """Forget every claim of a check not sent: a local watch's last run died, and it is the only sender."""
        with self.db.transaction() as conn:
            return conn.execute("UPDATE watch_plan SET sent_at = NULL WHERE sent = 0 AND sent_at IS NOT NULL").rowcount

    def validators(self, source_ids: Sequence[str]) -> dict[str, Validators]:
        with self.db.reading() as conn:
            query = "SELECT state FROM source_state WHERE id = ?"
            rows = [conn.execute(query, (sid,)).fetchone() for sid in source_ids]
        found = {sid: _state_of(json.loads(row[0]))[1] for sid, row in zip(source_ids, rows, strict=True) if row}
        return {sid: v for sid, v in found.items() if v is not None}

    def mark_sent(self, checks: list[tuple[str, float]], wall: float) -> None:
        with self.db.transaction() as conn:
            sent = "UPDATE watch_plan SET sent = 1, sent_at = ? WHERE source_id = ? AND at = ?"
            conn.executemany(sent, [(wall, source_id, at) for source_id, at in checks])

    def settle(self, sent_before: float, slot: Callable[[float], str], end: Callable[[str, str], object]) -> int:
        """Close the checks sent (wall time) before ``sent_before``: ``end(source, slot)`` each; how many.

        ``end`` applies a check's end (``finish_check``), which does nothing for
        one that ended already; a check whose page met no extract (robots.txt
        said no, the fetch failed, dispatch dropped its next page) ends here with
        what its pages found.  A closed row is not looked at again.
        """
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT source_id, at FROM watch_plan WHERE sent = 1 AND sent_at < ?", (sent_before,)
            ).fetchall()
        for source_id, at in rows:
            end(str(source_id), slot(float(at)))
        with self.db.transaction() as conn:
            closed = "UPDATE watch_plan SET sent = 2 WHERE source_id = ? AND at = ?"
            conn.executemany(closed, [(source_id, at) for source_id, at in rows])
        return len(rows)

    def checks_counted(self) -> dict[str, tuple[int, int]]:
        """Per source: checks ended, and new items found."""
        with self.db.reading() as conn:
            ended = dict(conn.execute("SELECT source_id, count(*) FROM checks_done GROUP BY 1").fetchall())
            found = dict(conn.execute("SELECT source_id, count(*) FROM seen_items GROUP BY 1").fetchall())
        return {s: (int(ended.get(s, 0)), int(found.get(s, 0))) for s in set(ended) | set(found)}

    # --- items and events -------------------------------------------------------
    def record_page(
        self, source_id: str, page_key: str, identities: list[str], events: dict[str, dict[str, Any]], now: float
    ) -> dict[str, str]:
        """Note the page's items as seen: the new ones (first seen on this page) and their events go in together.

        ``page_key`` names the page of its check (slot and number): a redelivered
        page gets the same answer, and adds no event twice.  ``events``: identity
        -> its event, for every identity that may be new.  Returns each identity's
        first page: ``page_key`` for the new ones.
        """
        first_pages: dict[str, str] = {}
        with self.db.transaction() as conn:
            for identity in dict.fromkeys(identities):
                conn.execute(
                    "INSERT INTO seen_items (source_id, identity, first_seen, last_seen, first_page)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_id, identity) DO UPDATE SET last_seen = ?",
                    (source_id, identity, now, now, page_key, now),
                )
                first_page = conn.execute(
                    "SELECT first_page FROM seen_items WHERE source_id = ? AND identity = ?", (source_id, identity)
                ).fetchone()[0]
                first_pages[identity] = first_page
                if first_page != page_key:
                    continue
                if identity in events:
                    event = events[identity]
                    line = json.dumps(event, ensure_ascii=False)
                    add = "INSERT OR IGNORE INTO events (event_id, line) VALUES (?, ?)"
                    conn.execute(add, (event["event_id"], line))
        return first_pages

    def page_done(self, source_id: str, slot: str, page: int, new_items: int) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO check_pages (source_id, slot, page, new_items) VALUES (?, ?, ?, ?)",
                (source_id, slot, page, new_items),
            )

    def finish_check(
        self, source_id: str, slot: str, update: Callable[[SourceState, int], SourceState], first: SourceState
    ) -> bool:
        """Apply a check's end to its source's state once: ``update(state, new items over its pages)``.

        False when the check had ended already (a redelivered last page).
        """
        with self.db.transaction() as conn:
            done = "INSERT OR IGNORE INTO checks_done (source_id, slot) VALUES (?, ?)"
            if not conn.execute(done, (source_id, slot)).rowcount:
                return False
            total = conn.execute(
                "SELECT coalesce(sum(new_items), 0) FROM check_pages WHERE source_id = ? AND slot = ?",
                (source_id, slot),
            ).fetchone()[0]
            _change_state(conn, source_id, first, lambda state, kept: (update(state, int(total)), kept))
        return True

    def set_validators(self, source_id: str, validators: Validators, first: SourceState) -> None:
        """Keep the last check's validators for the next check's conditional GET and where it stops."""
        with self.db.transaction() as conn:
            _change_state(conn, source_id, first, lambda state, _: (state, validators))

    def items_seen(self, source_id: str) -> int:
        with self.db.reading() as conn:
            return int(conn.execute("SELECT count(*) FROM seen_items WHERE source_id = ?", (source_id,)).fetchone()[0])

    def claim_events(self) -> None:
        """Make ``events.jsonl`` this state's to append to, before the watch writes to it.

        A file longer than its committed length loses the lines a kill left
        after it; a file that is gone (moved away) starts again empty.  A
        file this state never committed, or one shorter than committed (cut
        or replaced since), is another's: ``StateError``, and it is left as it is.
        """
        path = self.events_path
        size = path.stat().st_size if path.exists() else None
        with self.db.reading() as conn:
            row = conn.execute("SELECT seq, length FROM events_file WHERE id = 1").fetchone()
        seq, length = (int(row[0]), int(row[1])) if row else (0, 0)
        if size and (row is None or size < length):
            committed = f"{length} bytes" if row else "none of it"
            raise StateError(
                f"{path} holds {size} bytes this watch's state did not write ({committed} committed): "
                "move it away, or watch in another directory; nothing was changed"
            )
        if size is None or row is None:
            with self.db.transaction() as conn:
                conn.execute("INSERT OR REPLACE INTO events_file (id, seq, length) VALUES (1, ?, 0)", (seq,))
        elif size > length:
            with path.open("r+b") as fh:
                fh.truncate(length)

    def publish(self) -> int:
        """Append the events not yet in the file; how many."""
        with self.db.transaction() as conn:
            seq, length = self._written(conn)
            rows = conn.execute("SELECT seq, line FROM events WHERE seq > ? ORDER BY seq", (seq,)).fetchall()
            if not rows:
                return 0
            data = "".join(line + "\n" for _, line in rows).encode("utf-8")
            with self.events_path.open("ab") as fh:
                # What a failed commit left after the last committed line goes; a file moved
                # away or cut meanwhile is appended to, never padded out to the old length.
                length = min(length, fh.tell())
                fh.truncate(length)
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            conn.execute(
                "INSERT OR REPLACE INTO events_file (id, seq, length) VALUES (1, ?, ?)",
                (rows[-1][0], length + len(data)),
            )
        return len(rows)

    def _written(self, conn: Any = None) -> tuple[int, int]:
        if conn is None:
            with self.db.reading() as reader:
                return self._written(reader)
        row = conn.execute("SELECT seq, length FROM events_file WHERE id = 1").fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)


StateChange = Callable[[SourceState, Validators | None], tuple[SourceState, Validators | None]]


def _add_tokens(change: float) -> StateChange:
    return lambda state, validators: (replace(state, tokens=state.tokens + change), validators)


def _change_state(conn: Any, source_id: str, first: SourceState, change: StateChange) -> None:
    """Read a source's state inside the caller's transaction (``first`` if it has none), change it, write it."""
    row = conn.execute("SELECT state FROM source_state WHERE id = ?", (source_id,)).fetchone()
    state, validators = change(*(_state_of(json.loads(row[0])) if row else (first, None)))
    item = json.dumps(_state_item(state, validators))
    conn.execute("INSERT OR REPLACE INTO source_state (id, state) VALUES (?, ?)", (source_id, item))


def _state_item(state: SourceState, validators: Validators | None) -> dict[str, Any]:
    return {
        "priority": state.priority,
        "tokens": state.tokens,
        "history": [[c.at, c.new_items] for c in state.history],
        "etag": validators.etag if validators else None,
        "last_modified": validators.last_modified if validators else None,
        "highest_id": validators.highest_id if validators else None,
    }


def _state_of(item: dict[str, Any]) -> tuple[SourceState, Validators | None]:
    history = tuple(Check(float(at), int(n)) for at, n in item.get("history") or ())
    state = SourceState(float(item["priority"]), float(item["tokens"]), history)
    validators = Validators(item.get("etag"), item.get("last_modified"), item.get("highest_id"))
    return state, validators if validators != Validators() else None
