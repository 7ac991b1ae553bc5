"""The robots.txt cache, one row per origin, on SQLite (``crawlstack.aws.hosts.HostStore`` on DynamoDB).

The body is stored as the DynamoDB adapter stores it (``robots.pack_body``:
gzipped, whole lines that fit), so both keep the same rules of a robots.txt
past DynamoDB's item limit.  A record past its ``expires_at`` reads as none.
"""

from __future__ import annotations

from crawlstack.fetch.robots_txt import pack_body, unpack_body
from crawlstack.local.sqlite.db import StateDb
from crawlstack.ports import RobotsRecord

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS robots ("
    " origin TEXT PRIMARY KEY, kind TEXT NOT NULL, body_gz BLOB NOT NULL, status INTEGER,"
    " fetched_at REAL NOT NULL, expires_at REAL NOT NULL, reason TEXT NOT NULL)"
)


class SqliteHosts:
    def __init__(self, db: StateDb) -> None:
        self.db = db
        db.ensure(SCHEMA)

    def get_robots(self, origin: str) -> RobotsRecord | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT kind, body_gz, status, fetched_at, expires_at, reason FROM robots WHERE origin = ?", (origin,)
            ).fetchone()
        if row is None:
            return None
        kind, body_gz, status, fetched_at, expires_at, reason = row
        record = RobotsRecord(origin, kind, unpack_body(body_gz), status, fetched_at, expires_at, reason)
        return None if record.expired() else record

    def put_robots(self, record: RobotsRecord) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO robots (origin, kind, body_gz, status, fetched_at, expires_at, reason)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (origin) DO UPDATE SET kind = excluded.kind,"
                " body_gz = excluded.body_gz, status = excluded.status, fetched_at = excluded.fetched_at,"
                " expires_at = excluded.expires_at, reason = excluded.reason",
                (record.origin, record.kind, pack_body(record.body), record.status, record.fetched_at,
                 int(record.expires_at), record.reason),
            )  # fmt: skip
