"""The crawls table: each crawl's config, seed hosts, state, page budget and outcome counts, on SQLite.

The item ``crawlstack.aws.crawls.CrawlStore`` keeps, one JSON document a
row (sets as sorted lists).  Each change reads and writes the item in one
transaction, so the budget's check and its count are one atomic step, as
the conditional counter is on DynamoDB.  ``get`` is read for every link
dispatched, so it keeps the config it read until this store next writes
(``_writing``): a stop takes effect at the next read, as every write to a
local crawl's state goes through its one process (``OUT/.crawl.lock``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from decimal import Decimal
from typing import Any

from crawlstack import jobs, settings
from crawlstack.config import CrawlConfig
from crawlstack.local.sqlite.db import StateDb

SCHEMA = "CREATE TABLE IF NOT EXISTS crawls (crawl_id TEXT PRIMARY KEY, item TEXT NOT NULL)"


def _plain(value: Any) -> Any:
    """A value of ``CrawlConfig.to_item`` as JSON holds it: sets sorted into lists, Decimals as numbers."""
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, Decimal):
        return float(value)
    return value


class SqliteCrawls:
    def __init__(self, db: StateDb, defaults: CrawlConfig | None = None) -> None:
        self.db = db
        # What a crawl's unstored settings default to: the handlers' (``HandlerSettings``);
        # None: this process's environment's (``CrawlConfig.defaults_from_env``), at each read.
        self.defaults = defaults
        db.ensure(SCHEMA)
        # Bumped after every write; a config read at one generation is good until the next.
        self._generation = 0
        self._configs: dict[str, tuple[int, CrawlConfig]] = {}

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        try:
            with self.db.transaction() as conn:
                yield conn
        finally:
            self._generation += 1  # after the commit: a read before it may have cached the old item

    def read(self, conn: sqlite3.Connection, crawl_id: str) -> dict[str, Any] | None:
        """The crawl's item inside a transaction another store of the same database holds (``SqliteHeld``)."""
        return self._get(conn, crawl_id)

    @staticmethod
    def _get(conn: sqlite3.Connection, crawl_id: str) -> dict[str, Any] | None:
        row = conn.execute("SELECT item FROM crawls WHERE crawl_id = ?", (crawl_id,)).fetchone()
        return json.loads(row[0]) if row else None

    @staticmethod
    def _put(conn: sqlite3.Connection, crawl_id: str, item: dict[str, Any]) -> None:
        conn.execute(
            "INSERT INTO crawls (crawl_id, item) VALUES (?, ?)"
            " ON CONFLICT (crawl_id) DO UPDATE SET item = excluded.item",
            (crawl_id, json.dumps(item)),
        )

    def _defaults(self, crawl_id: str) -> CrawlConfig:
        if self.defaults is None:
            return CrawlConfig.defaults_from_env(os.environ, crawl_id)
        return replace(self.defaults, crawl_id=crawl_id or self.defaults.crawl_id)

    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        generation = self._generation
        cached = self._configs.get(crawl_id)
        if cached is not None and cached[0] == generation:
            return cached[1]
        with self.db.reading() as conn:
            item = self._get(conn, crawl_id)
        defaults = self._defaults(crawl_id)
        config = CrawlConfig.from_item(item, defaults) if item else defaults
        self._configs[crawl_id] = (generation, config)
        return config

    def put(self, config: CrawlConfig) -> None:
        """The crawl's config, replacing its whole item (counters included), as PutItem does."""
        with self._writing() as conn:
            self._put(conn, config.crawl_id, {k: _plain(v) for k, v in config.to_item().items()})

    def put_new(self, config: CrawlConfig, only: Collection[str] | None = None) -> bool:
        """Store a crawl's config unless it has one already (with ``only``, just those settings); whether it did."""
        with self._writing() as conn:
            if self._get(conn, config.crawl_id) is not None:
                return False
            self._put(conn, config.crawl_id, {k: _plain(v) for k, v in config.to_item(only).items()})
            return True

    def add_seed_host(self, crawl_id: str, host: str) -> None:
        with self._writing() as conn:
            item = self._get(conn, crawl_id) or {"crawl_id": crawl_id}
            item["seed_hosts"] = sorted({*item.get("seed_hosts", []), host})
            self._put(conn, crawl_id, item)

    def set_state(self, crawl_id: str, state: str) -> None:
        """Set a crawl ``running`` or ``stopped`` (``crawlstack.jobs``); UnknownCrawl if it has no item."""
        if state not in jobs.STATES:
            raise ValueError(f"crawl state must be one of {', '.join(jobs.STATES)}, not {state!r}")
        with self._writing() as conn:
            item = self._get(conn, crawl_id)
            if item is None:
                raise jobs.UnknownCrawl(crawl_id)
            self._put(conn, crawl_id, {**item, "state": state})

    def count_page(self, crawl_id: str, max_pages: int) -> bool:
        """Take one page from the budget; False once it is spent (``take_pages`` of 1)."""
        return self.take_pages(crawl_id, max_pages, 1) is not None

    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None:
        """Take ``pages`` of the budget at once; the pages admitted since, or None if fewer are left."""
        with self._writing() as conn:
            item = self._get(conn, crawl_id) or {"crawl_id": crawl_id}
            admitted = int(item.get("pages_admitted", 0)) + pages
            if admitted > max_pages:
                return None
            self._put(conn, crawl_id, {**item, "pages_admitted": admitted})
            return admitted

    def count_logged(self, crawl_id: str, counts: dict[str, int]) -> None:
        """Add ``counts`` (outcome -> tries) to the crawl item's ``logged_<outcome>`` counters."""
        counts = {outcome: n for outcome, n in counts.items() if n}
        if not counts:
            return
        with self._writing() as conn:
            item = self._get(conn, crawl_id) or {"crawl_id": crawl_id}
            for outcome, n in counts.items():
                name = f"{settings.LOGGED_COUNTER_PREFIX}{outcome}"
                item[name] = int(item.get(name, 0)) + n
            self._put(conn, crawl_id, item)

    def item(self, crawl_id: str) -> dict[str, Any]:
        """The crawl's whole item (``crawlstack status`` reads its counters)."""
        with self.db.reading() as conn:
            return self._get(conn, crawl_id) or {}
