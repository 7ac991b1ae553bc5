"""A deployed watch's sources' schedule state and each check's yield, in the watch table.

Items (``pk`` / ``sk``):

* ``source`` / id (``crawlstack.aws.sources``): with the schedule state
  beside the settings: ``priority``, ``tokens``, ``history``, the last
  check's ``etag``, ``last_modified`` and ``highest_id``, the day ``planned`` last, the day's
  ``next_checks``, counters ``checks_done`` and ``items_found``, and a
  ``version`` that every change of state compares and moves on;
* ``check#<source>`` / slot: a check's new items per page (``page_<n>``)
  and whether it ended (``done``).

A check's end changes its source's state once: one transaction with the
check's ``done``.  The day's plan is ``crawlstack.aws.plan``'s, sending its
checks ``crawlstack.aws.due``'s, and items seen ``crawlstack.aws.seen``'s.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.aws.blobs import BlobStore
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.day import expiry
from crawlstack.aws.due import DueChecks
from crawlstack.aws.plan import DayPlan
from crawlstack.aws.seen import SeenItems
from crawlstack.aws.sources import DynamoSources, source_key
from crawlstack.watch.check import Validators
from crawlstack.watch.plan_clock import PlanClock
from crawlstack.watch.schedule import Check, SourceState

_STATE_RETRIES = 8


def state_of(item: dict[str, Any], first: SourceState | None = None) -> SourceState | None:
    """A source item's schedule state; ``first`` when it has none yet."""
    if "priority" not in item:
        return first
    history = tuple(Check(float(at), int(n)) for at, n in item.get("history") or ())
    return SourceState(float(item["priority"]), float(item["tokens"]), history)


def validators_of(item: dict[str, Any]) -> Validators | None:
    validators = Validators(item.get("etag"), item.get("last_modified"), item.get("highest_id"))
    return validators if validators != Validators() else None


class DynamoWatch:
    """``watch.scheduler.PlanStore`` and the check half of ``watch.pages.WatchStore`` on the watch table."""

    def __init__(
        self,
        table: str,
        blobs: BlobStore,
        seen: SeenItems | None = None,
        *,
        connection: Connection = ENVIRONMENT,
    ) -> None:
        """``seen``: the items seen and their events (extract's side); the scheduler needs none."""
        self.connection = connection
        self.name = table
        self.seen = seen
        self.sources = DynamoSources(table, connection=connection)
        self.plans = DayPlan(table, blobs, connection=connection)
        self.due = DueChecks(table, connection=connection)

    # --- state ------------------------------------------------------------------
    def states(self) -> dict[str, tuple[SourceState, Validators | None]]:
        return {
            item["sk"]: (state, validators_of(item))
            for item in self.sources.items(consistent=True)
            if (state := state_of(item)) is not None
        }

    def validators(self, source_ids: Sequence[str]) -> dict[str, Validators]:
        keys = [source_key(sid) for sid in source_ids]
        items = (
            clients.unmarshal(raw)
            for raw in clients.batch_get(
                self.connection, self.name, keys, ProjectionExpression="sk, etag, last_modified, highest_id"
            )
        )
        return {item["sk"]: known for item in items if (known := validators_of(item)) is not None}

    def set_validators(self, source_id: str, validators: Validators, first: SourceState) -> None:
        """Keep the last check's validators; nothing for a source removed meanwhile."""
        clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=source_key(source_id),
            UpdateExpression="SET etag = :e, last_modified = :m, highest_id = :h",
            ConditionExpression="attribute_exists(sk)",
            ExpressionAttributeValues=clients.values(
                e=validators.etag, m=validators.last_modified, h=validators.highest_id
            ),
        )

    # --- a check's pages and its end ------------------------------------------------
    def record_page(
        self, source_id: str, page_key: str, identities: list[str], events: dict[str, dict[str, Any]], now: float
    ) -> dict[str, str]:
        if self.seen is None:
            raise RuntimeError("this DynamoWatch keeps no items seen: give it a SeenItems")
        return self.seen.record_page(source_id, page_key, identities, events, now)

    def page_done(self, source_id: str, slot: str, page: int, new_items: int) -> None:
        self.connection.client("dynamodb").update_item(
            TableName=self.name,
            Key=clients.key(pk=f"check#{source_id}", sk=slot),
            UpdateExpression="SET #p = :n, expires_at = :x",
            ExpressionAttributeNames={"#p": f"page_{page}"},
            ExpressionAttributeValues=clients.values(n=new_items, x=expiry(time.time())),
        )

    def finish_check(
        self, source_id: str, slot: str, update: Callable[[SourceState, int], SourceState], first: SourceState
    ) -> bool:
        """Apply a check's end once: its ``done`` and its source's new state in one transaction.

        False when it had ended already, or its source is gone.  A change of the
        source's state meanwhile (another check, the day's plan) moves its
        ``version``: the transaction is refused and tried again on the new state.
        """
        ddb = self.connection.client("dynamodb")
        check_key = clients.key(pk=f"check#{source_id}", sk=slot)
        for attempt in range(_STATE_RETRIES):
            raw = ddb.get_item(TableName=self.name, Key=source_key(source_id), ConsistentRead=True).get("Item")
            if raw is None:
                return False
            item = clients.unmarshal(raw)
            check = clients.unmarshal(ddb.get_item(TableName=self.name, Key=check_key, ConsistentRead=True).get("Item"))
            if check.get("done"):
                return False
            found = sum(int(v) for k, v in check.items() if k.startswith("page_"))
            state = update(state_of(item, first) or first, found)
            actions = [
                {
                    "Update": {
                        "TableName": self.name,
                        "Key": check_key,
                        "UpdateExpression": "SET done = :t, expires_at = :x",
                        "ConditionExpression": "attribute_not_exists(done)",
                        "ExpressionAttributeValues": clients.values(t=True, x=expiry(time.time())),
                    }
                },
                {
                    "Update": {
                        "TableName": self.name,
                        "Key": source_key(source_id),
                        "UpdateExpression": "SET priority = :p, tokens = :k, history = :h, version = :next "
                        "ADD checks_done :one, items_found :n",
                        "ConditionExpression": "version = :v",
                        "ExpressionAttributeValues": clients.values(
                            p=state.priority,
                            k=state.tokens,
                            h=[[c.at, c.new_items] for c in state.history],
                            next=int(item.get("version", 0)) + 1,
                            v=int(item.get("version", 0)),
                            one=1,
                            n=found,
                        ),
                    }
                },
            ]
            try:
                ddb.transact_write_items(TransactItems=actions, ClientRequestToken=uuid.uuid4().hex)
                return True
            except ClientError as exc:
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]  # type: ignore[typeddict-item]
                if not reasons:
                    raise
                if reasons[0] == "ConditionalCheckFailed":
                    return False  # ended meanwhile
                if not set(reasons) <= {"None", None, "ConditionalCheckFailed", "TransactionConflict"}:
                    raise  # throttled, invalid: not a change of state to read again
                time.sleep(random.uniform(0, 0.05 * 2**attempt))
        raise RuntimeError(f"source {source_id!r}: its state kept changing; check {slot} not applied")

    # --- the day's plan and its checks (crawlstack.aws.plan, crawlstack.aws.due) ------------
    def day_end(self) -> float | None:
        return self.plans.day_end()

    def plan_clock(self) -> PlanClock:
        return self.plans.plan_clock()

    def move_plan_clock(self, old: PlanClock, new: PlanClock) -> bool:
        return self.plans.move_plan_clock(old, new)

    def plan(
        self, checks: list[tuple[str, float]], tokens: dict[str, float], first: dict[str, SourceState], day_end: float
    ) -> None:
        self.plans.plan(checks, tokens, first, day_end)

    def resume_plan(self) -> int | None:
        return self.plans.resume_plan()

    def unplanned(self) -> bool:
        return self.plans.unplanned()

    def plan_first(self, checks: list[tuple[str, float]], states: dict[str, SourceState]) -> list[str]:
        return self.plans.plan_first(checks, states)

    def claim_due(self, now: float, wall: float, limit: int | None = None) -> list[tuple[str, float]]:
        return self.due.claim_due(now, wall, limit)

    def mark_sent(self, checks: list[tuple[str, float]], wall: float) -> None:
        self.due.mark_sent(checks, wall)

    def oldest_unsent(self, now: float, claimable_at: float | None = None) -> float | None:
        return self.due.oldest_unsent(now, claimable_at)

    def settle(self, sent_before: float, slot: Callable[[float], str], end: Callable[[str, str], object]) -> int:
        return self.due.settle(sent_before, slot, end)
