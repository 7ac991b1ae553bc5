"""Each host's run and lease: the ``Runs`` port (``crawlstack.runs.ports``) on SQLite.

One row per host name.  Each method reads the row and writes it in one
transaction (``StateDb.transaction``), so its condition and its change
are one atomic step, as each is one conditional UpdateItem on DynamoDB
(``crawlstack.aws.runs``, whose docstring says which race each condition
closes).  No reply is lost here, so a call repeated with the same
arguments answers as the DynamoDB adapter's retry after a lost reply does.

Settings: ``settings.RUN_GRACE_SECONDS``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from crawlstack.local.sqlite.db import StateDb
from crawlstack.runs.ports import HostRun
from crawlstack.settings import RUN_GRACE_SECONDS

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs ("
    " host TEXT PRIMARY KEY, run_id TEXT, run_expires REAL, holder TEXT, lease_until REAL,"
    " last_start REAL, pause_until REAL, adaptive_delay REAL, released_by TEXT)"
)
COLUMNS = (
    "run_id",
    "run_expires",
    "holder",
    "lease_until",
    "last_start",
    "pause_until",
    "adaptive_delay",
    "released_by",
)


class SqliteRuns:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        db.ensure(SCHEMA)

    @staticmethod
    def _row(conn: sqlite3.Connection, host: str) -> dict[str, Any]:
        found = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM runs WHERE host = ?", (host,)).fetchone()
        return dict(zip(COLUMNS, found, strict=True)) if found else {}

    @staticmethod
    def _write(conn: sqlite3.Connection, host: str, row: dict[str, Any]) -> None:
        values = [row.get(c) for c in COLUMNS]
        conn.execute(
            f"INSERT INTO runs (host, {', '.join(COLUMNS)}) VALUES (?{', ?' * len(COLUMNS)})"
            f" ON CONFLICT (host) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in COLUMNS)}",
            (host, *values),
        )

    def schedule(self, host: str, run_id: str, now: float, expires: float) -> bool:
        with self.db.transaction() as conn:
            row = self._row(conn, host)
            if row.get("run_id") is not None and row["run_expires"] >= now:
                return bool(row["run_id"] == run_id)  # our own run: a repeated call
            self._write(conn, host, {**row, "run_id": run_id, "run_expires": expires})
            return True

    def lease(self, host: str, run_id: str, holder: str, now: float, until: float) -> HostRun | None:
        with self.db.transaction() as conn:
            row = self._row(conn, host)
            lease_over = row.get("lease_until") is not None and row["lease_until"] <= now
            free = row.get("holder") is None or row["holder"] == holder or lease_over
            if row.get("run_id") != run_id or not free:
                return None
            self._write(
                conn,
                host,
                {**row, "holder": holder, "lease_until": until, "run_expires": until + RUN_GRACE_SECONDS,
                 "released_by": None},
            )  # fmt: skip
            return _run_from(host, row)

    def renew(self, host: str, holder: str, until: float, last_start: float) -> bool:
        with self.db.transaction() as conn:
            row = self._row(conn, host)
            if row.get("holder") != holder:
                return False
            changed = {"lease_until": until, "last_start": last_start, "run_expires": until + RUN_GRACE_SECONDS}
            self._write(conn, host, {**row, **changed})
            return True

    def release(
        self,
        host: str,
        holder: str,
        last_start: float,
        pause_until: float,
        adaptive_delay: float | None,
        next_run: str | None,
        expires: float = 0.0,
    ) -> bool:
        with self.db.transaction() as conn:
            row = self._row(conn, host)
            if row.get("holder") != holder:
                # Repeated after it was done: the row still says who released it, until the next lease.
                return bool(row) and row.get("holder") is None and row.get("released_by") == holder
            changed = {
                "last_start": last_start,
                "pause_until": pause_until,
                "adaptive_delay": adaptive_delay,
                "released_by": holder,
                "holder": None,
                "lease_until": None,
                "run_id": next_run,
                "run_expires": None if next_run is None else expires,
            }
            self._write(conn, host, {**row, **changed})
            return True

    def forget_run(self, host: str) -> None:
        """Drop the host's run and lease (a resume's, before it schedules a fresh one); its timing stays."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE runs SET run_id = NULL, run_expires = NULL, holder = NULL, lease_until = NULL WHERE host = ?",
                (host,),
            )

    def expire_leases(self, now: float) -> int:
        """End every lease now: their holders died with a killed crawl, and their runs' messages come back."""
        with self.db.transaction() as conn:
            return conn.execute(
                "UPDATE runs SET lease_until = ? WHERE holder IS NOT NULL AND lease_until > ?", (now, now)
            ).rowcount

    def get(self, host: str) -> HostRun:
        with self.db.reading() as conn:
            return _run_from(host, self._row(conn, host))


def _run_from(host: str, row: dict[str, Any]) -> HostRun:
    return HostRun(
        host=host,
        run_id=row.get("run_id"),
        run_expires=row.get("run_expires") or 0.0,
        holder=row.get("holder"),
        lease_until=row.get("lease_until") or 0.0,
        last_start=row.get("last_start") or 0.0,
        pause_until=row.get("pause_until") or 0.0,
        adaptive_delay=row.get("adaptive_delay"),
    )
