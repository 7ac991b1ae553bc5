"""The parked table: URLs waiting behind a host whose window is full."""

from __future__ import annotations

from typing import Any

from crawlstack import settings
from crawlstack.aws import clients


class ParkStore:
    """The parked table: URLs waiting behind a host whose window is full, oldest first."""

    def __init__(self, table: str) -> None:
        self.name = table

    def put(self, host: str, order: str, body: str) -> None:
        clients.client("dynamodb").put_item(
            TableName=self.name, Item=clients.marshal({"host": host, "order": order, "body": body})
        )

    def peek(self, host: str, limit: int, untaken_since: float | None = None) -> list[tuple[str, str]]:
        """The first ``limit`` rows; with ``untaken_since``, leaving out rows taken since then.

        Rows another unparker holds are read (a filter costs what it reads)
        but not returned, so a busy host's unparkers do not all try the same
        first rows; the read looks a window's worth of rows further for it.
        """
        request: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": "host"},
            "ExpressionAttributeValues": clients.values(h=host),
            "ConsistentRead": True,
            "Limit": limit,
        }
        if untaken_since is not None:
            request["Limit"] = limit + 2 * settings.DEFAULT_HOST_CONCURRENCY
            request["FilterExpression"] = "attribute_not_exists(taken_at) OR taken_at < :since"
            request["ExpressionAttributeValues"] |= clients.values(since=untaken_since)
        resp = clients.client("dynamodb").query(**request)
        rows = [clients.unmarshal(i) for i in resp.get("Items", []) if "body" in i]
        return [(row["order"], row["body"]) for row in rows][:limit]

    def take(self, host: str, order: str, stamp: float, stale_before: float) -> bool:
        """Become the one unparker of a row (unless another took it after ``stale_before``).

        A retried take that finds its own take (its token) took the row: else
        the row would sit taken by nobody until it goes stale.
        """
        token = clients.new_token()
        return clients.conditional_write(
            "update_item",
            token=token,
            TableName=self.name,
            Key=clients.key(host=host, order=order),
            UpdateExpression="SET taken_at = :stamp, #t = :tok",
            ConditionExpression="attribute_exists(body) AND (attribute_not_exists(taken_at) OR taken_at < :stale)",
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(stamp=stamp, stale=stale_before, tok=token),
        )

    def exists(self, host: str, order: str) -> bool:
        """Whether the row is still parked (taken or not): a strongly consistent read."""
        item = (
            clients.client("dynamodb")
            .get_item(
                TableName=self.name,
                Key=clients.key(host=host, order=order),
                ConsistentRead=True,
                ProjectionExpression="#h",
                ExpressionAttributeNames={"#h": "host"},
            )
            .get("Item")
        )
        return item is not None

    def untake(self, host: str, order: str, stamp: float) -> None:
        clients.conditional_write(
            "update_item",
            TableName=self.name,
            Key=clients.key(host=host, order=order),
            UpdateExpression="REMOVE taken_at",
            ConditionExpression="taken_at = :stamp",
            ExpressionAttributeValues=clients.values(stamp=stamp),
        )

    def delete(self, host: str, order: str) -> None:
        clients.client("dynamodb").delete_item(TableName=self.name, Key=clients.key(host=host, order=order))

    def count(self) -> int:
        total = 0
        for page in clients.client("dynamodb").get_paginator("scan").paginate(TableName=self.name, Select="COUNT"):
            total += page.get("Count", 0)
        return total
