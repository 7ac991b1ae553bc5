"""A deployed watch's schedule in the watch table: each source's state, the day's plan and each check's yield.

Items (``pk`` / ``sk``):

* ``source`` / id (``crawlstack.aws.sources``): with the schedule state
  beside the settings: ``priority``, ``tokens``, ``history``, the last
  ``etag`` and ``last_modified``, the day ``planned`` last, the day's
  ``next_checks``, counters ``checks_done`` and ``items_found``, and a
  ``version`` that every change of state compares and moves on;
* ``day`` / ``current``: the planned day's end, the plan being applied
  (``planning``), and the minutes the scheduler looks from: ``send_from``
  (the first with a check unsent) and ``settle_from`` (unsettled);
* ``plan#<minute>`` / ``<time>#<source>``: a planned check, claimed
  (``claimed_at``), sent (``sent_at``), settled; expiring after
  ``settings.WATCH_ITEM_DAYS``;
* ``check#<source>`` / slot: a check's new items per page (``page_<n>``)
  and whether it ended (``done``).

Planning writes the day's plan to the bucket before applying it: a planning
cut short is finished as drawn, never drawn again over tokens half spent.
Each source's tokens change once a day (its condition names the day), and a
check's end changes its source's state once (one transaction with the
check's ``done``).  Items seen are in ``crawlstack.aws.seen``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.aws.blobs import BlobStore
from crawlstack.aws.seen import SeenItems
from crawlstack.aws.sources import DynamoSources, source_key
from crawlstack.crawllog import iso_time
from crawlstack.watch.check import Validators
from crawlstack.watch.schedule import Check, SourceState

DAY_KEY = {"pk": "day", "sk": "current"}
# Minutes of plan one tick looks through at most (a scheduler long down catches up over several ticks).
MAX_SCAN_MINUTES = 24 * 60
# Concurrent writes while applying a day's plan: 100,000 sources' updates in well under a minute.
PLAN_WRITERS = 16
_STATE_RETRIES = 8


def minute(at: float) -> int:
    return int(at // 60)


def state_of(item: dict[str, Any], first: SourceState | None = None) -> SourceState | None:
    """A source item's schedule state; ``first`` when it has none yet."""
    if "priority" not in item:
        return first
    history = tuple(Check(float(at), int(n)) for at, n in item.get("history") or ())
    return SourceState(float(item["priority"]), float(item["tokens"]), history)


def validators_of(item: dict[str, Any]) -> Validators | None:
    etag, modified = item.get("etag"), item.get("last_modified")
    return Validators(etag, modified) if etag or modified else None


class DynamoWatch:
    """``watch.scheduler.PlanStore`` and the check half of ``watch.pages.WatchStore`` on the watch table."""

    def __init__(self, table: str, blobs: BlobStore, seen: SeenItems | None = None) -> None:
        """``seen``: the items seen and their events (extract's side); the scheduler needs none."""
        self.name = table
        self.blobs = blobs
        self.seen = seen
        self.sources = DynamoSources(table)
        self._unsent: set[tuple[str, float]] = set()

    # --- state ------------------------------------------------------------------
    def states(self) -> dict[str, tuple[SourceState, Validators | None]]:
        return {
            item["sk"]: (state, validators_of(item))
            for item in self.sources.items()
            if (state := state_of(item)) is not None
        }

    def validators(self, source_ids: Sequence[str]) -> dict[str, Validators]:
        found: dict[str, Validators] = {}
        for start in range(0, len(source_ids), 100):
            keys = [source_key(sid) for sid in source_ids[start : start + 100]]
            request = {self.name: {"Keys": keys, "ProjectionExpression": "sk, etag, last_modified"}}
            while request:
                resp = clients.client("dynamodb").batch_get_item(RequestItems=request)
                for raw in resp.get("Responses", {}).get(self.name, []):
                    item = clients.unmarshal(raw)
                    if (known := validators_of(item)) is not None:
                        found[item["sk"]] = known
                request = resp.get("UnprocessedKeys") or {}
        return found

    def set_validators(self, source_id: str, validators: Validators, first: SourceState) -> None:
        """Keep the last response's validators; nothing for a source removed meanwhile."""
        clients.conditional_write(
            "update_item",
            TableName=self.name,
            Key=source_key(source_id),
            UpdateExpression="SET etag = :e, last_modified = :m",
            ConditionExpression="attribute_exists(sk)",
            ExpressionAttributeValues=clients.values(e=validators.etag, m=validators.last_modified),
        )

    # --- a check's pages and its end ------------------------------------------------
    def record_page(
        self, source_id: str, page_key: str, identities: list[str], events: dict[str, dict[str, Any]], now: float
    ) -> set[str]:
        if self.seen is None:
            raise RuntimeError("this DynamoWatch keeps no items seen: give it a SeenItems")
        return self.seen.record_page(source_id, page_key, identities, events, now)

    def page_done(self, source_id: str, slot: str, page: int, new_items: int) -> None:
        clients.client("dynamodb").update_item(
            TableName=self.name,
            Key=clients.key(pk=f"check#{source_id}", sk=slot),
            UpdateExpression="SET #p = :n, expires_at = :x",
            ExpressionAttributeNames={"#p": f"page_{page}"},
            ExpressionAttributeValues=clients.values(n=new_items, x=_expiry(time.time())),
        )

    def finish_check(
        self, source_id: str, slot: str, update: Callable[[SourceState, int], SourceState], first: SourceState
    ) -> bool:
        """Apply a check's end once: its ``done`` and its source's new state in one transaction.

        False when it had ended already, or its source is gone.  A change of the
        source's state meanwhile (another check, the day's plan) moves its
        ``version``: the transaction is refused and tried again on the new state.
        """
        ddb = clients.client("dynamodb")
        check_key = clients.key(pk=f"check#{source_id}", sk=slot)
        for _ in range(_STATE_RETRIES):
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
                        "ExpressionAttributeValues": clients.values(t=True, x=_expiry(time.time())),
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
        raise RuntimeError(f"source {source_id!r}: its state kept changing; check {slot} not applied")

    # --- the day's plan -----------------------------------------------------------
    def day(self) -> dict[str, Any]:
        raw = (
            clients.client("dynamodb")
            .get_item(TableName=self.name, Key=clients.key(**DAY_KEY), ConsistentRead=True)
            .get("Item")
        )
        return clients.unmarshal(raw)

    def day_end(self) -> float | None:
        day = self.day()
        # A plan still being applied: its day is not planned yet, and the next tick finishes it.
        return None if day.get("planning") or "day_end" not in day else float(day["day_end"])

    def plan(
        self, checks: list[tuple[str, float]], tokens: dict[str, float], first: dict[str, SourceState], day_end: float
    ) -> None:
        """Store the day's plan, then apply it: tokens once per source, the checks, the day's end.

        A plan found half applied (``planning``) is finished as it was drawn,
        whatever this call brings.
        """
        day = self.day()
        key = day.get("planning")
        if key:
            drawn = json.loads(self.blobs.get(key))
        else:
            key = f"{settings.WATCH_PLANS_PREFIX}{iso_time(day_end)}.json"
            drawn = {
                "checks": checks,
                "tokens": tokens,
                "first": {sid: [st.priority, st.tokens] for sid, st in first.items()},
                "day_end": day_end,
            }
            self.blobs.put(key, json.dumps(drawn).encode(), "application/json")
            self._set_day(planning=key)
        self._apply(key, drawn)

    def _apply(self, key: str, drawn: dict[str, Any]) -> None:
        # Times to the millisecond: a check's keys and slot are made from its time read back.
        drawn["checks"] = [(sid, round(float(at), 3)) for sid, at in drawn["checks"]]
        times: dict[str, list[float]] = {}
        for source_id, at in drawn["checks"]:
            times.setdefault(source_id, []).append(at)
        with ThreadPoolExecutor(PLAN_WRITERS) as pool:
            list(
                pool.map(
                    lambda sid: self._spend(sid, key, drawn["tokens"][sid], drawn["first"][sid], times.get(sid, [])),
                    drawn["tokens"],
                )
            )
        items = [
            {
                "pk": f"plan#{minute(at)}",
                "sk": f"{iso_time(at)}#{sid}",
                "source_id": sid,
                "at": at,
                "expires_at": _expiry(at),
            }
            for sid, at in drawn["checks"]
        ]
        _batch_put(self.name, items)
        first = min((minute(at) for _, at in drawn["checks"]), default=None)
        day = self.day()
        starts = {
            name: min(int(day[name]), first) if name in day and first is not None else day.get(name, first)
            for name in ("send_from", "settle_from")
        }
        self._set_day(day_end=drawn["day_end"], send_from=starts["send_from"], settle_from=starts["settle_from"])
        clients.client("dynamodb").update_item(
            TableName=self.name, Key=clients.key(**DAY_KEY), UpdateExpression="REMOVE planning"
        )

    def _spend(self, source_id: str, key: str, change: float, first: list[float], times: list[float]) -> None:
        """A source's tokens for the day, once (the condition names the plan), and its day's check times."""
        clients.conditional_write(
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

    def _set_day(self, **named: Any) -> None:
        """Set the day item's attributes given (None: left as they are)."""
        given = {k: v for k, v in named.items() if v is not None}
        if given:
            clients.client("dynamodb").update_item(
                TableName=self.name,
                Key=clients.key(**DAY_KEY),
                UpdateExpression="SET " + ", ".join(f"{k} = :{k}" for k in given),
                ExpressionAttributeValues=clients.values(**given),
            )

    # --- sending and settling -----------------------------------------------------
    def claim_due(self, now: float, wall: float) -> list[tuple[str, float]]:
        """Claim each due check not sent, and not claimed within ``settings.WATCH_CLAIM_SECONDS``."""
        day = self.day()
        claimed: list[tuple[str, float]] = []
        unsent: list[tuple[int, float]] = []  # (minute, time) of each check not sent, due or not
        due: set[tuple[str, float]] = set()
        last = minute(now)
        start = int(day.get("send_from", last))
        scanned_to = min(last, start + MAX_SCAN_MINUTES - 1)
        for m in range(start, scanned_to + 1):
            for item in self._bucket(m):
                if "sent_at" in item:
                    continue
                at = float(item["at"])
                unsent.append((m, at))
                if at <= now:
                    due.add((item["source_id"], at))
                    if self._claim(item, wall):
                        claimed.append((item["source_id"], at))
        # Claimed checks count as unsent until mark_sent: a send that fails leaves them for a later claim.
        self._set_day(send_from=min((m for m, _ in unsent), default=scanned_to))
        # A scan cut short leaves due checks past it: the oldest waits since its minute at least.
        self._unsent = due | ({("", start * 60.0)} if scanned_to < last else set())
        return claimed

    def _claim(self, item: dict[str, Any], wall: float) -> bool:
        token = clients.new_token()
        return clients.conditional_write(
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
        self._unsent -= set(checks)
        for source_id, at in checks:
            clients.client("dynamodb").update_item(
                TableName=self.name,
                Key=_plan_key(source_id, at),
                UpdateExpression="SET sent_at = :w",
                ExpressionAttributeValues=clients.values(w=wall),
            )

    def oldest_unsent(self, now: float) -> float | None:
        """The oldest due check the last ``claim_due`` found unsent and no ``mark_sent`` has sent since."""
        return min((at for _, at in self._unsent), default=None)

    def settle(self, sent_before: float, slot: Callable[[float], str], end: Callable[[str, str], object]) -> int:
        day = self.day()
        if "settle_from" not in day:
            return 0
        start, last = int(day["settle_from"]), min(minute(sent_before), int(day["settle_from"]) + MAX_SCAN_MINUTES)
        settled, open_from = 0, None
        for m in range(start, last + 1):
            for item in self._bucket(m):
                if item.get("settled"):
                    continue
                if "sent_at" not in item or float(item["sent_at"]) >= sent_before:
                    open_from = m if open_from is None else min(open_from, m)
                    continue
                end(item["source_id"], slot(float(item["at"])))
                clients.client("dynamodb").update_item(
                    TableName=self.name,
                    Key=clients.key(pk=item["pk"], sk=item["sk"]),
                    UpdateExpression="SET settled = :t",
                    ExpressionAttributeValues=clients.values(t=True),
                )
                settled += 1
        if last >= start:
            self._set_day(settle_from=open_from if open_from is not None else last + 1)
        return settled

    def _bucket(self, m: int) -> Iterator[dict[str, Any]]:
        paginator = clients.client("dynamodb").get_paginator("query")
        for page in paginator.paginate(
            TableName=self.name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=clients.values(pk=f"plan#{m}"),
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                yield clients.unmarshal(item)


def _plan_key(source_id: str, at: float) -> dict[str, Any]:
    return clients.key(pk=f"plan#{minute(at)}", sk=f"{iso_time(at)}#{source_id}")


def _expiry(at: float) -> int:
    return int(at + settings.WATCH_ITEM_DAYS * 86_400)


def _batch_put(table: str, items: list[dict[str, Any]]) -> None:
    ddb = clients.client("dynamodb")
    for start in range(0, len(items), 25):
        request = {table: [{"PutRequest": {"Item": clients.marshal(i)}} for i in items[start : start + 25]]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
