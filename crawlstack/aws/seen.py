"""Items a watched source has shown, in the watch table: ``pk = "seen#<source>"``, ``sk`` = the item's identity.

An item is new on the page that first saw it: its item holds that page
(``first_page``, the check's slot and page number), written only where none
is (a conditional put), so a redelivered page gets the same answer.  The
extract that writes it holds its publishing lease; it puts the event on the
bus (``crawlstack.aws.events``) and marks the item ``published`` as each put
succeeds.  A page delivered again publishes only what had not gone, and
only once the lease of an extract that died holding it is stale; the same
page read twice at once publishes once.  So duplicates come only from a
PutEvents whose reply was lost (botocore sends it again), or from a holder
that died between its put and its mark.

Identities longer than ``MAX_KEY_BYTES`` are keyed by their SHA-256.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection

# A sort key may hold 1,024 bytes; longer identities (a long URL) are keyed by their hash.
MAX_KEY_BYTES = 512
# An extract holds an item's publishing this long: twice its function's timeout, so only a dead holder's is taken.
PUBLISH_LEASE_SECONDS = 2.0 * settings.FUNCTIONS["extract"].timeout_seconds
Publish = Callable[[list[dict[str, Any]], Callable[[list[dict[str, Any]]], object]], object]


def seen_key(source_id: str, identity: str) -> dict[str, Any]:
    sk = identity if len(identity.encode("utf-8")) <= MAX_KEY_BYTES else "sha256:" + _digest(identity)
    return clients.key(pk=f"seen#{source_id}", sk=sk)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SeenItems:
    def __init__(self, table: str, publish: Publish, *, connection: Connection = ENVIRONMENT) -> None:
        """``publish(events, went)``: puts events on the bus, telling ``went`` each put that succeeded."""
        self.connection = connection
        self.name = table
        self.publish = publish

    def record_page(
        self, source_id: str, page_key: str, identities: list[str], events: dict[str, dict[str, Any]], now: float
    ) -> dict[str, str]:
        """Each of the page's items and the page that first saw it (``page_key``: new); each event by one extract."""
        wanted = list(dict.fromkeys(identities))
        known = self._read(source_id, wanted)
        first_pages: dict[str, str] = {}
        publishing: list[str] = []
        for identity in wanted:
            item = known.get(identity)
            if item is None:
                taken, item = self._first_sight(source_id, identity, page_key, now)
                if taken:
                    first_pages[identity] = page_key
                    publishing.append(identity)
                    continue
            first_pages[identity] = str(item.get("first_page") or "")
            if first_pages[identity] != page_key:
                continue
            if not item.get("published") and self._take_lease(source_id, identity):
                publishing.append(identity)
        going = [events[i] for i in publishing if i in events]
        if going:
            by_event = {id(events[i]): i for i in publishing if i in events}
            self.publish(going, lambda put: self._mark_published(source_id, [by_event[id(e)] for e in put]))
        return first_pages

    def _first_sight(self, source_id: str, identity: str, page_key: str, now: float) -> tuple[bool, dict[str, Any]]:
        """Write the item as first seen on ``page_key``, holding the publishing lease, unless it is there already.

        (whether this call wrote it, the item as it now is).  The call's token
        tells its own write from another's when a lost reply made botocore retry it.
        """
        key = seen_key(source_id, identity)
        token = clients.new_token()
        item = {"first_page": page_key, "first_seen": now, "identity": identity, "publishing_at": time.time()}
        if clients.conditional_write(
            self.connection,
            "put_item",
            token,
            TableName=self.name,
            Item={**key, **clients.marshal({**item, clients.WRITE_TOKEN: token})},
            ConditionExpression="attribute_not_exists(sk)",
        ):
            return True, item
        ddb = self.connection.client("dynamodb")
        raw = ddb.get_item(TableName=self.name, Key=key, ConsistentRead=True).get("Item")
        return False, clients.unmarshal(raw)

    def _take_lease(self, source_id: str, identity: str) -> bool:
        """Take an unpublished item's publishing lease, free or stale (its holder died before marking it)."""
        token, now = clients.new_token(), time.time()
        return clients.conditional_write(
            self.connection,
            "update_item",
            token,
            TableName=self.name,
            Key=seen_key(source_id, identity),
            UpdateExpression="SET publishing_at = :now, #t = :tok",
            ConditionExpression="attribute_not_exists(published) AND "
            "(attribute_not_exists(publishing_at) OR publishing_at < :stale)",
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(now=now, stale=now - PUBLISH_LEASE_SECONDS, tok=token),
        )

    def _mark_published(self, source_id: str, identities: list[str]) -> None:
        for identity in identities:
            self.connection.client("dynamodb").update_item(
                TableName=self.name,
                Key=seen_key(source_id, identity),
                UpdateExpression="SET published = :t",
                ExpressionAttributeValues=clients.values(t=True),
            )
    def _read(self, source_id: str, identities: list[str]) -> dict[str, dict[str, Any]]:
        """The items already seen among ``identities``, read consistently."""
        keys = {identity: seen_key(source_id, identity) for identity in identities}
        by_sk = {key["sk"]["S"]: identity for identity, key in keys.items()}
        found: dict[str, dict[str, Any]] = {}
        for raw in clients.batch_get(self.connection, self.name, list(keys.values()), ConsistentRead=True):
            item = clients.unmarshal(raw)
            found[by_sk[item["sk"]]] = item
        return found
