"""The watch table's ``day`` / ``current`` item, which the day's plan and the sending of its checks share.

It holds the planned day's end, a plan being applied, how the plan's
times map to the watch's (``plan_anchor``, ``plan_at``, ``plan_rate``:
a stall re-spreads the rest of the day), and the minutes the scheduler looks from:
``send_from`` (the first with a check unsent) and ``settle_from`` (the
first with one unsettled).  The cursors only move
forward from the value read, by conditional writes that a planner's rewind
wins, so no check is left behind them.  Planned checks are items
``plan#<minute>`` / ``<time>#<source>`` (``plan_item``).
"""

from __future__ import annotations

from typing import Any

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.sources import DAY_KEY
from crawlstack.fetch.crawllog import iso_time
from crawlstack.watch.plan_clock import PlanClock

# Minutes of plan one scan looks through at most (a scheduler long down catches up over several ticks).
MAX_SCAN_MINUTES = 24 * 60


def minute(at: float) -> int:
    return int(at // 60)


def expiry(at: float) -> int:
    """When an item about time ``at`` expires (the table's TTL attribute)."""
    return int(at + settings.WATCH_ITEM_DAYS * 86_400)


class DayItem:
    """Reads the day item, and moves its cursors."""

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    def day(self) -> dict[str, Any]:
        raw = (
            self.connection.client("dynamodb")
            .get_item(TableName=self.name, Key=clients.key(**DAY_KEY), ConsistentRead=True)
            .get("Item")
        )
        return clients.unmarshal(raw)

    def day_end(self) -> float | None:
        day = self.day()
        return float(day["day_end"]) if "day_end" in day else None

    def plan_clock(self) -> PlanClock:
        day = self.day()
        if "plan_rate" not in day:
            return PlanClock()
        return PlanClock(float(day["plan_anchor"]), float(day["plan_at"]), float(day["plan_rate"]))

    def move_plan_clock(self, old: PlanClock, new: PlanClock) -> bool:
        """Set the plan's clock to ``new``, unless another scheduler moved it from ``old`` meanwhile.

        Its numbers are stored as DynamoDB rounds them (``clients.num``), so
        ``old``, read back, compares equal; ``new`` is read back rounded too.
        """
        token = clients.new_token()  # a retry after a lost reply finds its own write: moved, once
        same = "plan_anchor = :a0 AND plan_at = :t0 AND plan_rate = :r0"
        condition = f"attribute_not_exists(plan_rate) OR ({same})" if old == PlanClock() else same
        return clients.conditional_write(
            self.connection,
            "update_item",
            token,
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression="SET plan_anchor = :a, plan_at = :t, plan_rate = :r, #t = :tok",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(
                a=new.anchor, t=new.at, r=new.rate, a0=old.anchor, t0=old.at, r0=old.rate, tok=token
            ),
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
            self.connection,
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
