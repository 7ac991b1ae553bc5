"""Sending a watch's planned checks and settling them, on the watch table (``crawlstack.aws.day``'s items).

A due check is claimed with a conditional write (unsent, and no claim or
one older than ``settings.WATCH_CLAIM_SECONDS``), sent, then marked sent;
one sent long ago that no extract ended is settled.  ``send_from`` and
``settle_from`` move on past what is done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.day import MAX_SCAN_MINUTES, DayItem, minute
from crawlstack.fetch.crawllog import iso_time


class DueChecks(DayItem):
    def claim_due(self, now: float, wall: float, limit: int | None = None) -> list[tuple[str, float]]:
        """Claim due checks not sent, nor claimed within ``settings.WATCH_CLAIM_SECONDS``; at most ``limit``."""
        day = self.day()
        if "send_from" not in day:
            return []
        claimed: list[tuple[str, float]] = []
        start = int(day["send_from"])
        first_unsent = None
        for m, item in self._scan(start, minute(now)):
            if "sent_at" in item:
                continue
            first_unsent = m if first_unsent is None else first_unsent
            at = float(item["at"])
            if at <= now and self._claim(item, wall):
                claimed.append((item["source_id"], at))
                if limit is not None and len(claimed) >= limit:
                    break
        # Claimed checks count as unsent until marked: a send that fails leaves them for a later claim.
        scanned = min(minute(now), start + MAX_SCAN_MINUTES)
        self._advance("send_from", start, first_unsent if first_unsent is not None else scanned)
        return claimed

    def _claim(self, item: dict[str, Any], wall: float) -> bool:
        token = clients.new_token()
        return clients.conditional_write(
            self.connection,
            "update_item",
            token,
            TableName=self.name,
            Key=clients.key(pk=item["pk"], sk=item["sk"]),
            UpdateExpression="SET claimed_at = :w, #t = :tok",
            ConditionExpression="attribute_not_exists(sent_at) AND "
            "(attribute_not_exists(claimed_at) OR claimed_at < :old)",
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(w=wall, old=wall - settings.WATCH_CLAIM_SECONDS, tok=token),
        )

    def mark_sent(self, checks: list[tuple[str, float]], wall: float) -> None:
        for source_id, at in checks:
            clients.conditional_write(
                self.connection,
                "update_item",
                TableName=self.name,
                Key=clients.key(pk=f"plan#{minute(at)}", sk=f"{iso_time(at)}#{source_id}"),
                UpdateExpression="SET sent_at = :w",
                ConditionExpression="attribute_exists(sk)",  # expired meanwhile: never a key-only item
                ExpressionAttributeValues=clients.values(w=wall),
            )

    def oldest_unsent(self, now: float, claimable_at: float | None = None) -> float | None:
        day = self.day()
        if "send_from" not in day:
            return None
        for _, item in self._scan(int(day["send_from"]), minute(now)):
            if "sent_at" in item or float(item["at"]) > now:
                continue
            if claimable_at is None or float(item.get("claimed_at", 0)) < claimable_at - settings.WATCH_CLAIM_SECONDS:
                return float(item["at"])
        return None

    def settle(self, sent_before: float, slot: Callable[[float], str], end: Callable[[str, str], object]) -> int:
        day = self.day()
        if "settle_from" not in day:
            return 0
        start, settled, open_from = int(day["settle_from"]), 0, None
        last = minute(sent_before)
        for m, item in self._scan(start, last):
            if item.get("settled"):
                continue
            if "sent_at" not in item or float(item["sent_at"]) >= sent_before:
                open_from = m if open_from is None else open_from
                continue
            end(item["source_id"], slot(float(item["at"])))
            self.connection.client("dynamodb").update_item(
                TableName=self.name,
                Key=clients.key(pk=item["pk"], sk=item["sk"]),
                UpdateExpression="SET settled = :t",
                ExpressionAttributeValues=clients.values(t=True),
            )
            settled += 1
        if last >= start:
            scanned = min(last + 1, start + MAX_SCAN_MINUTES)
            self._advance("settle_from", start, open_from if open_from is not None else scanned)
        return settled

    def _scan(self, start: int, last: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each planned check of the minutes ``start`` to ``last`` (at most ``MAX_SCAN_MINUTES``), in time order."""
        paginator = self.connection.client("dynamodb").get_paginator("query")
        for m in range(start, min(last, start + MAX_SCAN_MINUTES - 1) + 1):
            for page in paginator.paginate(
                TableName=self.name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=clients.values(pk=f"plan#{m}"),
                ConsistentRead=True,
            ):
                for item in page.get("Items", []):
                    yield m, clients.unmarshal(item)
