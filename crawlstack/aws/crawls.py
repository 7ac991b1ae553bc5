"""The crawls table: each crawl's config, seed hosts, state and page budget."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from crawlstack import jobs, settings
from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.errors import aws_errors
from crawlstack.config import CrawlConfig

# The token of the write of the crawl item's counts of outcomes only the crawl log holds.
LOGGED_TOKEN = "logged_token"


class CrawlStore:
    """The crawls table: config, seed hosts and the page budget counter."""

    def __init__(
        self,
        table: str,
        cache_seconds: float | None = None,
        defaults: CrawlConfig | None = None,
        *,
        connection: Connection = ENVIRONMENT,
    ) -> None:
        self.connection = connection
        self.name = table
        # What a crawl's unstored settings default to: a function's, read once (``HandlerSettings``);
        # None: this process's environment's (``CrawlConfig.defaults_from_env``), at each read.
        self.defaults = defaults
        # The cache bounds how long a stop takes to reach this container.
        self.cache_seconds = jobs.STATE_CACHE_SECONDS if cache_seconds is None else cache_seconds
        self._cache: dict[str, tuple[float, CrawlConfig]] = {}
        self._lock = threading.Lock()

    def _defaults(self, crawl_id: str) -> CrawlConfig:
        if self.defaults is None:
            return CrawlConfig.defaults_from_env(os.environ, crawl_id)
        return replace(self.defaults, crawl_id=crawl_id or self.defaults.crawl_id)

    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        max_age = self.cache_seconds if max_age is None else max_age
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(crawl_id)
        if cached and now - cached[0] < max_age:
            return cached[1]
        item = (
            self.connection.client("dynamodb")
            .get_item(TableName=self.name, Key=clients.key(crawl_id=crawl_id), ConsistentRead=True)
            .get("Item")
        )
        defaults = self._defaults(crawl_id)
        config = CrawlConfig.from_item(clients.unmarshal(item), defaults) if item else defaults
        with self._lock:
            self._cache[crawl_id] = (now, config)
        return config

    def put(self, config: CrawlConfig) -> None:
        self.connection.client("dynamodb").put_item(TableName=self.name, Item=clients.marshal(config.to_item()))

    def put_new(self, config: CrawlConfig, only: Collection[str] | None = None) -> bool:
        """Store a crawl's config unless it has one already; whether this call stored it.

        With ``only``, just those settings: the others follow the defaults where the crawl is read.
        """
        return clients.conditional_write(
            self.connection,
            "put_item",
            TableName=self.name,
            Item=clients.marshal(config.to_item(only)),
            ConditionExpression="attribute_not_exists(crawl_id)",
        )

    def add_seed_host(self, crawl_id: str, host: str) -> None:
        self.connection.client("dynamodb").update_item(
            TableName=self.name,
            Key=clients.key(crawl_id=crawl_id),
            UpdateExpression="ADD seed_hosts :h",
            ExpressionAttributeValues=clients.values(h={host}),
        )
        with self._lock:
            self._cache.pop(crawl_id, None)

    def set_state(self, crawl_id: str, state: str) -> None:
        """Set a crawl ``running`` or ``stopped`` (``crawlstack.jobs``); UnknownCrawl if it has no item."""
        if state not in jobs.STATES:
            raise ValueError(f"crawl state must be one of {', '.join(jobs.STATES)}, not {state!r}")
        try:
            self.connection.client("dynamodb").update_item(
                TableName=self.name,
                Key=clients.key(crawl_id=crawl_id),
                UpdateExpression="SET #s = :s",
                ConditionExpression="attribute_exists(crawl_id)",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues=clients.values(s=state),
            )
        except ClientError as exc:
            if clients.is_conditional_failure(exc):
                raise jobs.UnknownCrawl(crawl_id) from exc
            raise
        with self._lock:
            self._cache.pop(crawl_id, None)

    def count_logged(self, crawl_id: str, counts: dict[str, int]) -> None:
        """Add ``counts`` (outcome -> tries) to the crawl item's ``logged_<outcome>`` counters.

        Once per crawl per flush: the outcomes the crawl log alone holds
        (``crawlstack.fetch.outcomes.logged_only``), which ``crawlstack
        status`` adds to the urls table's.  As with the page budget, the
        write stores its token (an attribute of its own) and its condition
        refuses a second add by the same call, so a retry after a lost
        reply does not count twice; a refused condition is that earlier
        success.
        """
        counts = {outcome: n for outcome, n in counts.items() if n}
        if not counts:
            return
        names = {"#t": LOGGED_TOKEN} | {f"#c{i}": f"{settings.LOGGED_COUNTER_PREFIX}{o}" for i, o in enumerate(counts)}
        clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=clients.key(crawl_id=crawl_id),
            UpdateExpression="SET #t = :tok ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(counts))),
            ConditionExpression="attribute_not_exists(#t) OR #t <> :tok",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=clients.values(
                tok=clients.new_token(), **{f"c{i}": n for i, n in enumerate(counts.values())}
            ),
        )

    def count_page(self, crawl_id: str, max_pages: int) -> bool:
        """Take one page from the budget; False once it is spent (``take_pages`` of 1)."""
        return self.take_pages(crawl_id, max_pages, 1) is not None

    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None:
        """Take ``pages`` of the budget at once; the pages admitted since, or None if fewer are left.

        The counter is not idempotent by itself: a retry after a lost reply
        would add again (and, at the end of the budget, fail and drop a page
        that was admitted).  So the write also stores its token, and the
        condition refuses a second add by the same call; its failure with our
        token in place is the earlier attempt's success.  Only if another
        admission lands between the attempt and its retry do the pages count
        twice (the budget then admits that many fewer).
        """
        return clients.take_from_counter(self.connection, self.name, clients.key(crawl_id=crawl_id), pages, max_pages)

    def items(self, crawl_id: str | None = None) -> dict[str, dict[str, Any]]:
        """Crawl items by id, with their state and page budget counter (``crawlstack status``).

        One crawl's is read whole; every crawl's is a Scan projecting what
        ``status`` prints.
        """
        if crawl_id is not None:
            with aws_errors(f"read {self.name}"):
                ddb = self.connection.client("dynamodb")
                item = ddb.get_item(TableName=self.name, Key=clients.key(crawl_id=crawl_id)).get("Item")
            return {crawl_id: clients.unmarshal(item)} if item else {}
        counters = ", ".join(f"{settings.LOGGED_COUNTER_PREFIX}{o}" for o in settings.LOGGED_OUTCOMES)
        projection = {
            "ProjectionExpression": f"crawl_id, #s, max_pages, pages_admitted, {counters}",
            "ExpressionAttributeNames": {"#s": "state"},
        }
        found = {}
        for item in clients.scan(self.connection, TableName=self.name, **projection):
            data = clients.unmarshal(item)
            found[str(data["crawl_id"])] = data
        return found
