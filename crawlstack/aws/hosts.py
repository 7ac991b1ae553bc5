"""The hosts table: politeness slots and the robots.txt cache."""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.politeness import Blocked, HostSlot
from crawlstack.robots import RobotsRecord, pack_body, unpack_body


class HostStore:
    """The hosts table: politeness slots (kind "slot") and robots.txt cache (kind "robots")."""

    def __init__(self, table: str) -> None:
        self.name = table

    @staticmethod
    def _key(host: str, kind: str) -> dict[str, Any]:
        return clients.key(host=host, kind=kind)

    # -- politeness ------------------------------------------------------------
    def read_slot(self, host: str) -> HostSlot:
        item = (
            clients.client("dynamodb")
            .get_item(TableName=self.name, Key=self._key(host, "slot"), ConsistentRead=True)
            .get("Item")
        )
        return _slot_from(host, item)

    def reserve(self, host: str, fp: str, expected: HostSlot, new_next: float | None, window: int) -> HostSlot | None:
        """Add ``fp`` to the host's window and move next_slot, if nobody else moved it.

        The slot was spaced by the adaptive delay read with ``expected``, so
        that must be unchanged too.  ``new_next`` None (no delay): only a
        place in the window, whatever next_slot says, so concurrent
        admissions to a host crawled without a delay do not conflict.
        Returns None on success, else the host's current state (the caller retries).
        """
        values: dict[str, Any] = {"fp": {fp}, "cap": window}
        conds = []
        if new_next is not None:
            values["new"] = new_next
            if expected.exists:
                conds.append("next_slot = :old")
                values["old"] = expected.next_slot
            else:
                conds.append("attribute_not_exists(next_slot)")
        if expected.adaptive_delay:
            conds.append("adaptive_delay = :ad")
            values["ad"] = expected.adaptive_delay
        else:
            conds.append("attribute_not_exists(adaptive_delay)")
        conds.append("(attribute_not_exists(#w) OR (size(#w) < :cap AND NOT contains(#w, :fpv)))")
        cond = " AND ".join(conds)
        values["fpv"] = fp
        done, item = self._update_slot(
            host,
            UpdateExpression="ADD #w :fp" if new_next is None else "SET next_slot = :new ADD #w :fp",
            ConditionExpression=cond,
            ExpressionAttributeNames={"#w": "window"},
            ExpressionAttributeValues=clients.values(**values),
        )
        if done:
            return None
        if item is not None and _reserved(item, fp, new_next):
            return None  # our own reservation, its reply lost and the call retried
        return _slot_from(host, item) if item is not None else self.read_slot(host)

    def _update_slot(self, host: str, **request: Any) -> tuple[bool, dict[str, Any] | None]:
        """A conditional update of the host's slot item: (True, None), or (False, the item as it stood, if known)."""
        try:
            clients.client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host, "slot"),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **request,
            )
        except ClientError as exc:
            if not clients.is_conditional_failure(exc):
                raise
            return False, clients.failed_item(exc)
        return True, None

    def mark_parked(self, host: str, window: int, stamp: float) -> bool:
        """Flag the host as having parked URLs, only while its window is full.

        The window being full at this moment means some request of the host
        is still to finish, and its release will look in the parked table.
        """
        return clients.conditional_write(
            "update_item",
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression="SET parked_at = :stamp",
            # attribute_exists first: false either way on DynamoDB, but moto
            # raises on size() of a missing attribute (an empty window).
            ConditionExpression="attribute_exists(#w) AND size(#w) >= :cap",
            ExpressionAttributeNames={"#w": "window"},
            ExpressionAttributeValues=clients.values(stamp=stamp, cap=window),
        )

    def clear_parked(self, host: str, stamp: float) -> None:
        """Drop the flag, unless somebody parked again since ``stamp`` was read."""
        clients.conditional_write(
            "update_item",
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression="REMOVE parked_at",
            ConditionExpression="parked_at = :stamp",
            ExpressionAttributeValues=clients.values(stamp=stamp),
        )

    def claim(self, host: str, now: float, lease_until: float) -> Blocked | None:
        """Take the host for one request; None on success, else what holds it.

        The claim carries a token: a retry that finds its own claim (its first
        attempt's reply was lost) holds the host, rather than waiting for a
        lease nobody will release.
        """
        token = clients.new_token()
        try:
            clients.client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host, "slot"),
                UpdateExpression="SET free_at = :lease, busy = :one, #t = :tok",
                ConditionExpression="attribute_not_exists(free_at) OR free_at <= :now",
                ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
                ExpressionAttributeValues=clients.values(lease=lease_until, now=now, one=1, tok=token),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not clients.is_conditional_failure(exc):
                raise
            item = clients.failed_item(exc)
            if clients.holds_token(item, token):
                return None
            slot = _slot_from(host, item) if item is not None else self.read_slot(host)
            return Blocked(free_at=slot.free_at, in_flight=slot.busy)
        return None

    def release(self, host: str, fp: str, free_at: float | None) -> HostSlot:
        """Leave the window (and the host, from ``free_at``); returns the new state."""
        values: dict[str, Any] = {"fp": {fp}}
        update = "DELETE #w :fp"
        if free_at is not None:
            update = "SET free_at = :free, busy = :zero " + update
            values |= {"free": free_at, "zero": 0}
        resp = clients.client("dynamodb").update_item(
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression=update,
            ExpressionAttributeNames={"#w": "window"},
            ExpressionAttributeValues=clients.values(**values),
            ReturnValues="ALL_NEW",
        )
        return _slot_from(host, resp.get("Attributes"))

    def set_adaptive(self, host: str, expected: float, adaptive: float | None) -> HostSlot | None:
        """Set (or, with None, remove) the host's adaptive delay if it is still ``expected`` (0: absent).

        None on success, else the host's current state.
        """
        values: dict[str, Any] = {}
        if expected:
            cond = "adaptive_delay = :old"
            values["old"] = expected
        else:
            cond = "attribute_not_exists(adaptive_delay)"
        if adaptive is None:
            update = "REMOVE adaptive_delay"
        else:
            update = "SET adaptive_delay = :new"
            values["new"] = adaptive
        done, item = self._update_slot(
            host,
            UpdateExpression=update,
            ConditionExpression=cond,
            **({"ExpressionAttributeValues": clients.values(**values)} if values else {}),
        )
        if done:
            return None
        return _slot_from(host, item) if item is not None else self.read_slot(host)

    def push_back(self, host: str, free_at: float) -> None:
        """Give back a claim taken for a robots.txt fetch: the host is free from ``free_at``.

        Two independent "at least" updates: no slot may start before
        ``free_at`` either, whatever the other attribute holds.
        """
        clients.client("dynamodb").update_item(
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression="SET free_at = :f, busy = :zero",
            ExpressionAttributeValues=clients.values(f=free_at, zero=0),
        )
        clients.conditional_write(
            "update_item",
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression="SET next_slot = :f",
            ConditionExpression="attribute_not_exists(next_slot) OR next_slot < :f",
            ExpressionAttributeValues=clients.values(f=free_at),
        )

    # -- robots.txt ------------------------------------------------------------
    def get_robots(self, origin: str) -> RobotsRecord | None:
        item = (
            clients.client("dynamodb")
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

    def lock_robots(self, origin: str, until: float) -> bool:
        """Become the one fetcher of this origin's robots.txt (until a lease ends)."""
        now = time.time()
        token = clients.new_token()
        # With a token: a retried lock that finds its own lock must not think
        # another dispatcher holds it (its origin would wait out the lease).
        return clients.conditional_write(
            "update_item",
            token=token,
            TableName=self.name,
            Key=self._key(origin, "robots"),
            UpdateExpression="SET robots_lock = :until, expires_at = if_not_exists(expires_at, :until), #t = :tok",
            ConditionExpression="attribute_not_exists(robots_lock) OR robots_lock < :now",
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(until=until, now=now, tok=token),
        )

    def unlock_robots(self, origin: str) -> None:
        clients.client("dynamodb").update_item(
            TableName=self.name, Key=self._key(origin, "robots"), UpdateExpression="REMOVE robots_lock"
        )

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
        clients.client("dynamodb").put_item(TableName=self.name, Item=clients.marshal(item))


def _reserved(item: dict[str, Any], fp: str, next_slot: float | None) -> bool:
    """The host item holds the reservation ``reserve`` writes: ``fp`` in the window, ``next_slot`` its value.

    Only that reservation puts ``fp`` there (a window entry is one crawl's
    URL, admitted once), so finding both is finding our own write.  The
    value is compared as written: rounded by ``clients.num``.
    """
    data = clients.unmarshal(item)
    if fp not in data.get("window", ()):
        return False
    return next_slot is None or data.get("next_slot") == float(clients.num(next_slot))


def _slot_from(host: str, item: dict[str, Any] | None) -> HostSlot:
    if not item:
        return HostSlot(host=host)
    data = clients.unmarshal(item)

    def number(name: str) -> float | None:
        return float(data[name]) if name in data else None

    return HostSlot(
        host=host,
        exists="next_slot" in data,
        next_slot=number("next_slot") or 0.0,
        free_at=number("free_at") or 0.0,
        busy=data.get("busy") == 1,
        window=frozenset(data.get("window", ())),
        parked_at=number("parked_at"),
        adaptive_delay=number("adaptive_delay") or 0.0,
    )
