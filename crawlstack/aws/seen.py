"""Items a watched source has shown, in the watch table: ``pk = "seen#<source>"``, ``sk`` = the item's identity.

An item is new on the page that first saw it: its item holds that page
(``first_page``, the check's slot and page number), written only where none
is (a conditional put), so a redelivered page gets the same answer.  Its
event is put on the bus (``crawlstack.aws.events``) and the item then marked
``published``: a page delivered again publishes only what had not gone.

Identities longer than ``MAX_KEY_BYTES`` are keyed by their SHA-256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from crawlstack.aws import clients

# A sort key may hold 1,024 bytes; longer identities (a long URL) are keyed by their hash.
MAX_KEY_BYTES = 512


def seen_key(source_id: str, identity: str) -> dict[str, Any]:
    sk = identity if len(identity.encode("utf-8")) <= MAX_KEY_BYTES else "sha256:" + _digest(identity)
    return clients.key(pk=f"seen#{source_id}", sk=sk)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SeenItems:
    def __init__(self, table: str, publish: Callable[[list[dict[str, Any]]], object]) -> None:
        self.name = table
        self.publish = publish

    def record_page(
        self, source_id: str, page_key: str, identities: list[str], events: dict[str, dict[str, Any]], now: float
    ) -> set[str]:
        """The page's items first seen on this page; their events published once each."""
        wanted = list(dict.fromkeys(identities))
        known = self._read(source_id, wanted)
        new: set[str] = set()
        unpublished: list[str] = []
        for identity in wanted:
            item = known.get(identity)
            if item is None:
                item = self._first_sight(source_id, identity, page_key, now)
            if item.get("first_page") != page_key:
                continue
            new.add(identity)
            if not item.get("published"):
                unpublished.append(identity)
        going = [i for i in unpublished if i in events]
        if going:
            self.publish([events[i] for i in going])
            for identity in going:
                clients.client("dynamodb").update_item(
                    TableName=self.name,
                    Key=seen_key(source_id, identity),
                    UpdateExpression="SET published = :t",
                    ExpressionAttributeValues=clients.values(t=True),
                )
        return new

    def _first_sight(self, source_id: str, identity: str, page_key: str, now: float) -> dict[str, Any]:
        """Write the item as first seen on ``page_key`` unless it is there already; the item as it now is."""
        key = seen_key(source_id, identity)
        item = {"first_page": page_key, "first_seen": now, "identity": identity}
        if clients.conditional_write(
            "put_item",
            TableName=self.name,
            Item={**key, **clients.marshal(item)},
            ConditionExpression="attribute_not_exists(sk)",
        ):
            return item
        raw = clients.client("dynamodb").get_item(TableName=self.name, Key=key, ConsistentRead=True).get("Item")
        return clients.unmarshal(raw)

    def _read(self, source_id: str, identities: list[str]) -> dict[str, dict[str, Any]]:
        """The items already seen among ``identities``, read consistently (100 to a BatchGetItem)."""
        found: dict[str, dict[str, Any]] = {}
        by_sk = {clients.unmarshal(seen_key(source_id, i))["sk"]: i for i in identities}
        keys = [seen_key(source_id, i) for i in identities]
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {self.name: {"Keys": keys[start : start + 100], "ConsistentRead": True}}
            while request:
                resp = clients.client("dynamodb").batch_get_item(RequestItems=request)
                for raw in resp.get("Responses", {}).get(self.name, []):
                    item = clients.unmarshal(raw)
                    found[by_sk[item["sk"]]] = item
                request = resp.get("UnprocessedKeys") or {}
        return found
