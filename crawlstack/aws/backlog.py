"""Each host's waiting fetch tasks, in bundles: the ``Backlog`` port (``crawlstack.runs.ports``) on DynamoDB.

The backlog lives in the parked table (``host`` hash key, ``order`` range
key), beside the held store's rows, which live in partitions
``held#<crawl>``, never a host name.  A bundle is one item:

* ``host``; ``order``, the bundle's key (``crawlstack.runs.bundles.order_key``),
  so a Query ascending serves the shallowest depth first and, within one
  depth, bundles in the order they were added;
* ``tasks``: binary, the bundle's tasks as ``crawlstack.runs.bundles.encode``
  packs them (the fields they share once, the rest by column, zlib);
* ``n``: how many tasks.

Why bundles: DynamoDB bills a write unit per KB of an item, and deleting an
item costs its size again.  One item per URL costs a unit to add and one to
delete whatever its size; a bundle costs its KB.  Measured (500 tasks of
one host): 97-byte news URLs, ``to_json()`` ~306 bytes a task, stored ~62
(16 a KB: 32 write units to add, not 500); 300-byte URLs of random words,
~512 and ~202 (5 a KB: 104 units).  Without zlib the shared-field form
takes about twice as much; a list of ``to_json()`` five times.
``settings.BACKLOG_BUNDLE_BYTES`` caps ``tasks`` (the keys add under 300
bytes), far under the 400 KB item limit; ``add`` splits a longer list.

``add`` is not idempotent: a redelivered dispatch adds its tasks again
under new keys.  Callers add only the URLs they claimed (deduped by
fingerprint in the URL table), so a copy is only a redelivery's, and a
run serving both fetches the URL once.  No task is ever dropped: items
DynamoDB leaves unprocessed are retried, and ``add`` raises if they stay so.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.messages import FetchTask
from crawlstack.runs.bundles import decode, encode, order_key, pack
from crawlstack.runs.ports import Bundle

BATCH_SIZE = 25  # BatchWriteItem's most items per request
BATCH_ATTEMPTS = 8  # backoff 0.05 s doubling to 1 s: ~4 s before giving up


class BacklogUnwritten(Exception):
    """DynamoDB left bundles unprocessed after every retry; the caller's message must be retried."""


class BacklogStore:
    """The ``Backlog`` port on the parked table (see the module docstring)."""

    def __init__(
        self,
        table: str,
        bundle_bytes: int = settings.BACKLOG_BUNDLE_BYTES,
        *,
        connection: Connection = ENVIRONMENT,
    ) -> None:
        self.connection = connection
        self.name = table
        self.bundle_bytes = bundle_bytes

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        if not tasks:
            return []
        keys: list[str] = []
        requests = []
        for part, blob in pack(tasks, self.bundle_bytes):
            keys.append(order_key(depth))
            requests.append({"PutRequest": {"Item": self._item(host, keys[-1], part, blob)}})
        for i in range(0, len(requests), BATCH_SIZE):
            self._write_batch(requests[i : i + BATCH_SIZE])
        return keys

    def peek(self, host: str, limit: int, after: str | None = None, consistent: bool = True) -> list[Bundle]:
        bundles: list[Bundle] = []
        request: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": "host"},
            "ExpressionAttributeValues": clients.values(h=host),
            "ConsistentRead": consistent,
            "ScanIndexForward": True,
        }
        if after is not None:
            request["ExclusiveStartKey"] = clients.key(host=host, order=after)
        while len(bundles) < limit:  # more than one page only past the 1 MB a Query returns
            resp = self.connection.client("dynamodb").query(**request, Limit=limit - len(bundles))
            items = [clients.unmarshal(i) for i in resp.get("Items", []) if "tasks" in i]
            bundles += [Bundle(host, i["order"], decode(bytes(i["tasks"]))) for i in items]
            if "LastEvaluatedKey" not in resp:
                break
            request["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return bundles[:limit]

    def replace(self, host: str, key: str, tasks: Sequence[FetchTask]) -> None:
        """Rewrite the bundle with ``tasks``, only while it exists: one a later holder served stays gone."""
        if not tasks:
            self.delete(host, key)
            return
        clients.conditional_write(
            self.connection,
            "put_item",
            TableName=self.name,
            Item=self._item(host, key, tasks, encode(tasks)),
            ConditionExpression="attribute_exists(#h)",
            ExpressionAttributeNames={"#h": "host"},
        )

    def delete(self, host: str, key: str) -> None:
        self.connection.client("dynamodb").delete_item(TableName=self.name, Key=clients.key(host=host, order=key))

    def waiting(self) -> int:
        """Tasks waiting in every backlog, and held rows (a Scan: for a local crawl's summary, not a Lambda)."""
        total = 0
        pages = (
            self.connection.client("dynamodb")
            .get_paginator("scan")
            .paginate(TableName=self.name, ProjectionExpression="n")
        )
        for page in pages:
            total += sum(int(clients.unmarshal(item).get("n", 1)) for item in page.get("Items", []))
        return total

    @staticmethod
    def _item(host: str, key: str, tasks: Sequence[FetchTask], blob: bytes) -> dict[str, Any]:
        return clients.marshal({"host": host, "order": key, "tasks": blob, "n": len(tasks)})

    def _write_batch(self, requests: list[dict[str, Any]]) -> None:
        pending: dict[str, Any] = {self.name: requests}
        for attempt in range(BATCH_ATTEMPTS):
            if attempt:
                time.sleep(min(1.0, 0.05 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0))
            resp = self.connection.client("dynamodb").batch_write_item(RequestItems=pending)
            pending = resp.get("UnprocessedItems") or {}
            if not pending.get(self.name):
                return
        left = len(pending[self.name])
        raise BacklogUnwritten(f"{left} backlog bundles unwritten after {BATCH_ATTEMPTS} attempts")
