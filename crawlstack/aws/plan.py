"""Planning a deployed watch's day on the watch table (``crawlstack.aws.day``'s items).

While a plan is applied, the day item holds ``planning`` (the plan's
object key), its holder and the time it last moved (``planning_by``,
``planning_at``) and the chunks of sources ``applied``.

Planning takes the day with a conditional write (one planner a day), writes
the drawn plan to the bucket, then applies it a chunk of sources at a time,
noting each chunk done: a planner that died is followed, once its lease is
stale, by one that applies the rest as drawn.  Each source's tokens change
once for the day (its condition names the plan).  Sources added since get
their first checks (``plan_first``), noted on the day item so that no tick
lists every source to find them.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.blobs import BlobStore
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.day import DayItem, minute, plan_item
from crawlstack.aws.sources import DAY_KEY, source_key
from crawlstack.fetch.crawllog import iso_time
from crawlstack.watch.schedule import SourceState

# Sources a planning chunk applies, its progress noted after each: 100,000 sources are 100 notes.
PLAN_CHUNK = 1000
# Concurrent writes while applying a chunk.
PLAN_WRITERS = 16
# A planner silent this long is dead: twice the schedule function's timeout.
PLAN_LEASE_SECONDS = 2.0 * settings.FUNCTIONS["schedule"].timeout_seconds


class DayPlan(DayItem):
    def __init__(self, table: str, blobs: BlobStore, *, connection: Connection = ENVIRONMENT) -> None:
        super().__init__(table, connection=connection)
        self.blobs = blobs
        # The additions the last ``unplanned`` saw, which ``plan_first`` then marks planned.
        self._added_seen: Any = None

    # --- planning -----------------------------------------------------------------
    def plan(
        self, checks: list[tuple[str, float]], tokens: dict[str, float], first: dict[str, SourceState], day_end: float
    ) -> None:
        """Take the day (nothing if another planner has), write the drawn plan, apply it."""
        key = f"{settings.WATCH_PLANS_PREFIX}{iso_time(day_end)}.json"
        me = clients.new_token()
        # Planned already (a second scheduler drew it too), or being planned: not twice.  The token
        # tells this call's own write, met again by botocore's retry after a lost reply.
        if not clients.conditional_write(
            self.connection,
            "update_item",
            me,
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression="SET planning = :k, planning_by = :me, planning_at = :now, applied = :zero, #t = :me",
            ConditionExpression="attribute_not_exists(planning) AND (attribute_not_exists(day_end) OR day_end < :end)",
            ExpressionAttributeNames={"#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(k=key, me=me, now=time.time(), zero=0, end=day_end),
        ):
            return
        drawn = {
            "checks": [(sid, round(at, 3)) for sid, at in checks],  # to the millisecond: keys are made from it
            "tokens": tokens,
            "first": {sid: [st.priority, st.tokens] for sid, st in first.items()},
            "day_end": day_end,
        }
        self.blobs.put(key, json.dumps(drawn).encode(), "application/json")
        self._apply(key, drawn, me, 0)

    def resume_plan(self) -> int | None:
        """Finish a plan its planner left (its lease stale): its checks; 0 while a live one works; None: none."""
        day = self.day()
        if not day.get("planning"):
            return None
        if float(day.get("planning_at", 0)) > time.time() - PLAN_LEASE_SECONDS:
            return 0
        me = clients.new_token()
        if not self._move(me, "planning_by = :old", old=day.get("planning_by", "")):
            return 0
        try:
            drawn = json.loads(self.blobs.get(day["planning"]))
        except ClientError:
            # Taken but never written: nothing of it was applied, and the next tick draws the day afresh.
            self._set_day_if(me, "REMOVE planning, planning_by, planning_at, applied")
            return 0
        self._apply(day["planning"], drawn, me, int(day.get("applied", 0)))
        return len(drawn["checks"])

    def _apply(self, key: str, drawn: dict[str, Any], me: str, done: int) -> None:
        times: dict[str, list[float]] = {}
        for source_id, at in drawn["checks"]:
            times.setdefault(source_id, []).append(at)
        order = sorted(drawn["tokens"])
        with ThreadPoolExecutor(PLAN_WRITERS) as pool:
            for n in range(done, -(-len(order) // PLAN_CHUNK)):
                chunk = order[n * PLAN_CHUNK : (n + 1) * PLAN_CHUNK]
                spend = lambda sid: self._spend(sid, key, drawn["tokens"][sid], drawn["first"][sid], times.get(sid, []))  # noqa: E731
                list(pool.map(spend, chunk))
                items = [plan_item(sid, at) for sid in chunk for at in times.get(sid, [])]
                list(pool.map(self._put_items, [items[i : i + 25] for i in range(0, len(items), 25)]))
                if not self._move(me, "planning_by = :me", applied=n + 1):
                    return  # taken over: the new holder applies the rest
        first = min((minute(at) for _, at in drawn["checks"]), default=None)
        if first is not None:
            self._rewind("send_from", first)
            self._rewind("settle_from", first)
        self._set_day_if(me, "SET day_end = :e REMOVE planning, planning_by, planning_at, applied", e=drawn["day_end"])

    def _spend(self, source_id: str, key: str, change: float, first: list[float], times: list[float]) -> None:
        """A source's tokens for the day, once (the condition names the plan), and its day's check times."""
        clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=source_key(source_id),
            UpdateExpression="SET tokens = if_not_exists(tokens, :t0) + :c, priority = if_not_exists(priority, :p0), "
            "planned = :k, next_checks = :times, version = if_not_exists(version, :zero) + :one",
            ConditionExpression="attribute_exists(sk) AND (attribute_not_exists(planned) OR planned <> :k)",
            ExpressionAttributeValues=clients.values(
                t0=first[1], c=change, p0=first[0], k=key, times=sorted(times), zero=0, one=1
            ),
        )

    def _put_items(self, items: list[dict[str, Any]]) -> None:
        request = {self.name: [{"PutRequest": {"Item": clients.marshal(i)}} for i in items]}
        while request:
            request = (
                self.connection.client("dynamodb").batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
            )

    def _move(self, me: str, condition: str, **named: Any) -> bool:
        """Note this planner's progress (``applied``, or taking the lease) if ``condition`` holds."""
        sets = ", ".join(f"{k} = :{k}" for k in named if k != "old")
        return clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression=f"SET planning_by = :me, planning_at = :now{', ' + sets if sets else ''}",
            ConditionExpression=condition,
            ExpressionAttributeValues=clients.values(me=me, now=time.time(), **named),
        )

    def _set_day_if(self, me: str, expression: str, **named: Any) -> None:
        clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression=expression,
            ConditionExpression="planning_by = :me",
            ExpressionAttributeValues=clients.values(me=me, **named),
        )

    # --- sources added since the plan --------------------------------------------------
    def unplanned(self) -> bool:
        """Whether sources were added (``sources_added_at``) since their first checks were last planned."""
        day = self.day()
        self._added_seen = day.get("sources_added_at")
        return self._added_seen is not None and float(self._added_seen) > float(day.get("first_checks_at", -1))

    def plan_first(self, checks: list[tuple[str, float]], states: dict[str, SourceState]) -> list[str]:
        """Each never-planned source's state and first checks; then the additions seen are marked planned."""
        times: dict[str, list[float]] = {}
        for source_id, at in checks:
            times.setdefault(source_id, []).append(round(at, 3))
        planned = [sid for sid, state in states.items() if self._first(sid, state, times.get(sid, []))]
        items = [plan_item(sid, at) for sid in planned for at in times.get(sid, [])]
        for start in range(0, len(items), 25):
            self._put_items(items[start : start + 25])
        if items:
            first = min(minute(float(i["at"])) for i in items)
            self._rewind("send_from", first)
            self._rewind("settle_from", first)
        added = self._added_seen
        if added is not None:
            # The additions this plan saw; one made since is later, and the next tick plans it.
            self._note_first_checks(float(added))
        return planned

    def _first(self, source_id: str, state: SourceState, times: list[float]) -> bool:
        return clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=source_key(source_id),
            UpdateExpression="SET priority = :p, tokens = :t, history = :h, planned = :k, next_checks = :times, "
            "version = if_not_exists(version, :zero) + :one",
            ConditionExpression="attribute_exists(sk) AND attribute_not_exists(planned)",
            ExpressionAttributeValues=clients.values(
                p=state.priority, t=state.tokens, h=[], k="first", times=sorted(times), zero=0, one=1
            ),
        )

    def _note_first_checks(self, added: float) -> None:
        clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=clients.key(**DAY_KEY),
            UpdateExpression="SET first_checks_at = :a",
            ConditionExpression="attribute_not_exists(first_checks_at) OR first_checks_at < :a",
            ExpressionAttributeValues=clients.values(a=added),
        )
