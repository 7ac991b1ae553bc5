"""The watch table's sources: one item each, ``pk = "source"``, ``sk`` = the source's id.

The item holds the source's settings (``source``, a map) and, once it has
some, its schedule state (``crawlstack.aws.watch``): removing the item
forgets both, so a source added again under its id starts a new schedule.
Its items seen (``crawlstack.aws.seen``) are kept: added again, it does not
announce again what it announced before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.errors import aws_errors
from crawlstack.watch.sources import DuplicateSource, Source

SOURCE_PK = "source"
# The watch's day item (crawlstack.aws.day); adding sources notes the time there for the scheduler.
DAY_KEY = {"pk": "day", "sk": "current"}
# A source's standing, as ``crawlstack status`` shows it: id, priority, tokens, next check, checks ended, items found.
Standing = tuple[str, float | None, float | None, float | None, int, int]
# TransactWriteItems takes at most 100 actions.
_TRANSACTION = 100


def source_key(source_id: str) -> dict[str, Any]:
    return clients.key(pk=SOURCE_PK, sk=source_id)


class DynamoSources:
    """``watch.sources.SourceStore`` on the watch table."""

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    @property
    def ddb(self) -> Any:
        return self.connection.client("dynamodb")

    def add_all(self, sources: list[Source]) -> None:
        """Every source or none: 100 to a transaction; a later batch refused undoes the earlier ones."""
        ids = [s.id for s in sources]
        twice = next((i for n, i in enumerate(ids) if i in ids[:n]), None)
        if twice is not None:
            raise DuplicateSource(twice)
        added: list[str] = []
        try:
            for start in range(0, len(sources), _TRANSACTION):
                batch = sources[start : start + _TRANSACTION]
                self._put_batch(batch)
                added.extend(s.id for s in batch)
        except BaseException:
            for source_id in added:
                self.ddb.delete_item(TableName=self.name, Key=source_key(source_id))
            raise
        # The scheduler plans new sources' first checks at its next tick (watch.scheduler).
        self.ddb.update_item(
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression="SET sources_added_at = :now",
            ExpressionAttributeValues=clients.values(now=time.time()),
        )

    def _put_batch(self, batch: list[Source]) -> None:
        actions = [
            {
                "Put": {
                    "TableName": self.name,
                    "Item": clients.marshal({"pk": SOURCE_PK, "sk": s.id, "source": s.to_item(), "version": 0}),
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            }
            for s in batch
        ]
        try:
            # The token makes botocore's retry after a lost reply the same transaction, not a refused second one.
            self.ddb.transact_write_items(TransactItems=actions, ClientRequestToken=uuid.uuid4().hex)
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []  # type: ignore[typeddict-item]
            taken = [s.id for s, r in zip(batch, reasons, strict=False) if r.get("Code") == "ConditionalCheckFailed"]
            if taken:
                raise DuplicateSource(taken[0]) from None
            raise

    def get(self, source_id: str) -> Source | None:
        item = (
            self.ddb
            .get_item(
                TableName=self.name,
                Key=source_key(source_id),
                ConsistentRead=True,
                ProjectionExpression="#s",
                ExpressionAttributeNames={"#s": "source"},
            )
            .get("Item")
        )
        return Source.from_item(clients.unmarshal(item)["source"]) if item else None

    def list(self) -> list[Source]:
        return [Source.from_item(item["source"]) for item in self.items()]

    def items(self, consistent: bool = False) -> Iterator[dict[str, Any]]:
        """Every source's whole item (settings and state), by id; ``consistent``: as of now (planning reads so)."""
        paginator = self.ddb.get_paginator("query")
        pages = paginator.paginate(
            TableName=self.name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=clients.values(pk=SOURCE_PK),
            ConsistentRead=consistent,
        )
        for page in pages:
            for item in page.get("Items", []):
                yield clients.unmarshal(item)

    def standings(self, now: float) -> Iterator[Standing]:
        """Each source's standing, its next check the first after ``now`` (epoch); a failure is one line."""
        with aws_errors(f"sources in {self.name}"):
            for item in self.items():
                upcoming = [float(t) for t in item.get("next_checks") or () if float(t) > now]
                priority, tokens = item.get("priority"), item.get("tokens")
                yield (
                    str(item["sk"]),
                    float(priority) if priority is not None else None,
                    float(tokens) if tokens is not None else None,
                    min(upcoming) if upcoming else None,
                    int(item.get("checks_done", 0)),
                    int(item.get("items_found", 0)),
                )

    def remove(self, source_id: str) -> bool:
        old = (
            self.ddb
            .delete_item(TableName=self.name, Key=source_key(source_id), ReturnValues="ALL_OLD")
            .get("Attributes")
        )
        return bool(old)
