"""The hosts table's robots.txt cache (kind "robots"); its run items are ``crawlstack.aws.runs``."""

from __future__ import annotations

from typing import Any

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.fetch.robots_txt import pack_body, unpack_body
from crawlstack.ports import RobotsRecord


class HostStore:
    """The hosts table's robots.txt cache: one item per origin (key ``{"host": origin, "kind": "robots"}``)."""

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    @staticmethod
    def _key(host: str, kind: str) -> dict[str, Any]:
        return clients.key(host=host, kind=kind)

    def get_robots(self, origin: str) -> RobotsRecord | None:
        item = (
            self.connection.client("dynamodb")
            .get_item(TableName=self.name, Key=self._key(origin, "robots"), ConsistentRead=True)
            .get("Item")
        )
        if not item or "robots_kind" not in item:
            return None
        data = clients.unmarshal(item)
        record = RobotsRecord(
            origin=origin,
            kind=data["robots_kind"],
            body=unpack_body(bytes(data["body_gz"])) if "body_gz" in data else data.get("body", ""),
            status=int(data["status"]) if data.get("status") is not None else None,
            fetched_at=float(data["fetched_at"]),
            expires_at=float(data["expires_at"]),
            reason=data.get("reason", ""),
        )
        return None if record.expired() else record

    def put_robots(self, record: RobotsRecord) -> None:
        item: dict[str, Any] = {
            "host": record.origin,
            "kind": "robots",
            "robots_kind": record.kind,
            # Gzipped: a 500 KiB robots.txt must fit a 400 KB item.
            "body_gz": pack_body(record.body),
            "fetched_at": record.fetched_at,
            "expires_at": int(record.expires_at),
            "reason": record.reason,
        }
        if record.status is not None:
            item["status"] = record.status
        self.connection.client("dynamodb").put_item(TableName=self.name, Item=clients.marshal(item))
