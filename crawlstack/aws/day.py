"""The watch table's ``day`` / ``current`` item, which the day's plan and the sending of its checks share.

It holds the planned day's end, a plan being applied, how far the plan's
clock lags the watch's (``plan_lag``: checks found late move the plan), and the
minutes the scheduler looks from: ``send_from`` (the first with a check unsent) and
``settle_from`` (the first with one unsettled).  The cursors only move
forward from the value read, by conditional writes that a planner's rewind
wins, so no check is left behind them.  Planned checks are items
``plan#<minute>`` / ``<time>#<source>`` (``plan_item``).
"""

from __future__ import annotations

from typing import Any

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.sources import DAY_KEY
from crawlstack.crawllog import iso_time

# Minutes of plan one scan looks through at most (a scheduler long down catches up over several ticks).
MAX_SCAN_MINUTES = 24 * 60


def minute(at: float) -> int:
    return int(at // 60)


def expiry(at: float) -> int:
    """When an item about time ``at`` expires (the table's TTL attribute)."""
    return int(at + settings.WATCH_ITEM_DAYS * 86_400)


class DayItem:
    """Reads the day item, and moves its cursors."""

    def __init__(self, table: str) -> None:
        self.name = table

    def day(self) -> dict[str, Any]:
        raw = (
            clients.client("dynamodb")
            .get_item(TableName=self.name, Key=clients.key(**DAY_KEY), ConsistentRead=True)
            .get("Item")
        )
        return clients.unmarshal(raw)

    def day_end(self) -> float | None:
        day = self.day()
        return float(day["day_end"]) if "day_end" in day else None

    def lag(self) -> float:
        return float(self.day().get("plan_lag", 0))

    def add_lag(self, old: float, late: float) -> bool:
        """Move the plan's clock ``late`` later, unless another scheduler moved it since ``old`` was read."""
        token = clients.new_token()  # a retry after a lost reply finds its own write: moved, once
        return clients.conditional_write(
            "update_item",
            token,
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression="SET plan_lag = :new, #t = :tok",
            ConditionExpression="plan_lag = :old" if old else "attribute_not_exists(plan_lag) OR plan_lag = :old",
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(new=old + late, old=old, tok=token),
        )

    def _rewind(self, cursor: str, to: int) -> None:
        """Move a cursor back to ``to`` (a planner's new checks), unless it is there already."""
        self._set_cursor(cursor, to, f"attribute_not_exists({cursor}) OR {cursor} > :new")

    def _advance(self, cursor: str, old: int, new: int) -> None:
        """Move a cursor on, unless a planner moved it meanwhile (its rewind wins)."""
        if new != old:
            self._set_cursor(cursor, new, f"{cursor} = :old", old=old)

    def _set_cursor(self, cursor: str, new: int, condition: str, **named: Any) -> None:
        clients.conditional_write(
            "update_item",
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression=f"SET {cursor} = :new",
            ConditionExpression=condition,
            ExpressionAttributeValues=clients.values(new=new, **named),
        )


def plan_item(source_id: str, at: float) -> dict[str, Any]:
    return {
        "pk": f"plan#{minute(at)}",
        "sk": f"{iso_time(at)}#{source_id}",
        "source_id": source_id,
        "at": at,
        "expires_at": expiry(at),
    }
