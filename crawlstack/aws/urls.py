"""The urls table: one item per crawl and URL (dedupe, fetch state, outcome)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.ports import Claim, UrlState


def note_url(
    connection: Connection, table: str, crawl_id: str, fp: str, url: str, depth: int, state: str, reason: str
) -> bool:
    """Note a URL the crawl passed over (``state`` with ``reason``), only if the crawl has no item for it yet.

    The note is ``claimable``: a later ``claim`` takes it over.  False when
    an item was there already (a retried call finding its own note is True).
    """
    now = time.time()
    token = clients.new_token()
    item = {
        "pk": f"{crawl_id}#{fp}",
        "crawl_id": crawl_id,
        "url": url,
        "depth": depth,
        "state": state,
        "reason": reason,
        "claimable": True,
        "seen_at": now,
        "finished_at": now,
        clients.WRITE_TOKEN: token,
    }
    return clients.conditional_write(
        connection,
        "put_item",
        token=token,
        TableName=table,
        Item=clients.marshal(item),
        ConditionExpression="attribute_not_exists(pk)",
    )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float | Decimal) and not isinstance(value, bool) else None


def _lost_claim(data: dict[str, Any]) -> Claim | None:
    """What ``seen`` says of an item: a lost claim, or None if it may be claimed (``claimable``)."""
    if data.get("claimable") is True:
        return None
    return Claim(False, _int(data.get("depth")), data.get("state"), data.get("claimed_by"))


class UrlStore:
    """The urls table: one item per crawl and URL, written once (dedupe), then its outcome."""

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    @staticmethod
    def key(crawl_id: str, fp: str) -> dict[str, Any]:
        return clients.key(pk=f"{crawl_id}#{fp}")

    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> Claim:
        """Record a URL as seen; a lost claim (falsy) if this crawl has seen it already, with that item's depth.

        ``claimer`` (the SQS message id) lets a redelivered message claim its
        own URL again, so a dispatcher that died after the claim loses nothing.
        An item marked ``claimable`` (skipped for a complete record, never
        fetched: ``note_skip``, ``unclaim``) is taken over.  ``record_id`` is
        kept so that only that record may ``unclaim`` the URL.
        """
        token = clients.new_token()
        item: dict[str, Any] = {
            "pk": f"{crawl_id}#{fp}",
            "crawl_id": crawl_id,
            "url": url,
            "depth": depth,
            "state": "queued",
            "seen_at": time.time(),
            clients.WRITE_TOKEN: token,
        }
        if record_id:
            item["record_id"] = record_id
        condition = "attribute_not_exists(pk) OR claimable = :yes"
        values: dict[str, Any] = {"yes": True}
        kwargs: dict[str, Any] = {}
        if claimer:
            # Only while the table holds no outcome: a redelivery must not wipe a
            # retry's state or a failure.  A page fetched on its first try keeps
            # "queued" (its outcome is the crawl log's), so a redelivery's copy
            # of it may be fetched again (ARCHITECTURE.md, Where an outcome lives).
            item["claimed_by"] = claimer
            condition += " OR (claimed_by = :me AND #s = :queued)"
            values |= {"me": claimer, "queued": "queued"}
            kwargs = {"ExpressionAttributeNames": {"#s": "state"}}
        try:
            self.connection.client("dynamodb").put_item(
                TableName=self.name,
                Item=clients.marshal(item),
                ConditionExpression=condition,
                ExpressionAttributeValues=clients.values(**values),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **kwargs,
            )
        except ClientError as exc:
            if not clients.is_conditional_failure(exc):
                raise
            found = clients.failed_item(exc)
            if clients.holds_token(found, token):
                return Claim(True)  # an earlier attempt of this call claimed it; its reply was lost
            seen = clients.unmarshal(found)
            return Claim(False, _int(seen.get("depth")), seen.get("state"))
        return Claim(True)

    def seen_many(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Claim | None]:
        """``seen`` of each key: one BatchGetItem per 100 keys (a half read unit each, found or not)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, str], Claim | None] = dict.fromkeys(wanted)
        for raw in clients.batch_get(
            self.connection,
            self.name,
            [self.key(crawl_id, fp) for crawl_id, fp in wanted],
            ProjectionExpression="pk, #d, #s, claimable, claimed_by",
            ExpressionAttributeNames={"#d": "depth", "#s": "state"},
        ):
            data = clients.unmarshal(raw)
            crawl_id, _, fp = str(data["pk"]).rpartition("#")
            found[(crawl_id, fp)] = _lost_claim(data)
        return found

    def seen(self, crawl_id: str, fp: str) -> Claim | None:
        item = (
            self.connection.client("dynamodb")
            .get_item(
                TableName=self.name,
                Key=self.key(crawl_id, fp),
                ProjectionExpression="#d, #s, claimable, claimed_by",
                ExpressionAttributeNames={"#d": "depth", "#s": "state"},
            )
            .get("Item")
        )
        return _lost_claim(clients.unmarshal(item)) if item else None

    def lower_depth(self, crawl_id: str, fp: str, depth: int) -> bool:
        """Give a URL not yet fetched the smaller ``depth`` it was found at again; False if it is fetched or shallower.

        Extract reads the stored depth (``depths``), so the page's links are
        followed from its shortest path however it was first found.
        """
        return clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET #d = :d",
            ConditionExpression="#d > :d AND #s IN (:queued, :retrying, :fetching)",
            ExpressionAttributeNames={"#s": "state", "#d": "depth"},
            ExpressionAttributeValues=clients.values(
                d=depth, queued="queued", retrying="retrying", fetching="fetching"
            ),
        )

    def depths(self, crawl_id: str, fps: Iterable[str]) -> dict[str, int]:
        """The stored depth of each URL (by fingerprint) the crawl has an item for: one batched read per 100."""
        keys = list(dict.fromkeys(fps))
        found: dict[str, int] = {}
        prefix = f"{crawl_id}#"
        for raw in clients.batch_get(
            self.connection,
            self.name,
            [self.key(crawl_id, fp) for fp in keys],
            ProjectionExpression="pk, #d",
            ExpressionAttributeNames={"#d": "depth"},
        ):
            item = clients.unmarshal(raw)
            depth = _int(item.get("depth"))
            if depth is not None and str(item["pk"]).startswith(prefix):
                found[str(item["pk"])[len(prefix) :]] = depth
        return found

    def fetch_states(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], UrlState]:
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, str], UrlState] = {}
        for raw in clients.batch_get(
            self.connection,
            self.name,
            [self.key(crawl_id, fp) for crawl_id, fp in wanted],
            ProjectionExpression="pk, #s, attempt, retry_at",
            ExpressionAttributeNames={"#s": "state"},
            ConsistentRead=True,
        ):
            item = clients.unmarshal(raw)
            crawl_id, _, fp = str(item["pk"]).rpartition("#")  # a fingerprint is hex: no "#"
            found[(crawl_id, fp)] = UrlState(
                item.get("state"), _int(item.get("attempt")) or 1, float(item.get("retry_at") or 0.0)
            )
        return found

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None:
        present = {"state": outcome, "finished_at": time.time(), **{k: v for k, v in fields.items() if v is not None}}
        # Names go through placeholders: several (status, state) are reserved words.
        names = {f"#a{i}": name for i, name in enumerate(present)}
        values = {f":a{i}": value for i, value in enumerate(present.values())}
        self.connection.client("dynamodb").update_item(
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(present))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=clients.marshal(values),
        )

    def add_note(self, crawl_id: str, fp: str, note: str) -> None:
        """What the URL's crawl-log line should say about its page beyond its outcome (values cut, timeouts)."""
        # Only on an item that exists: a note never makes a URL the crawl did not claim.
        clients.conditional_write(
            self.connection,
            "update_item",
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET note = :n",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=clients.values(n=note[: clients.NOTE_MAX_CHARS]),
        )

    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        """Record a URL skipped without claiming it, only if the crawl has no item for it yet.

        The item is ``claimable``: a later ``claim`` takes it over.
        """
        return note_url(self.connection, self.name, crawl_id, fp, url, depth, "skipped", reason)

    def unclaim(self, crawl_id: str, fp: str, record_id: str, reason: str, stale_before: float) -> bool:
        """Record a claimed, unfetched URL as skipped and ``claimable`` again.

        Only while ``record_id`` holds the claim and the URL is queued or
        waiting for a retry (or being fetched since before ``stale_before``, by
        a fetcher that died), so a page fetched or being fetched is never
        offered a second time.
        """
        token = clients.new_token()
        return clients.conditional_write(
            self.connection,
            "update_item",
            token=token,
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET #s = :skipped, #r = :reason, finished_at = :now, claimable = :yes, #t = :tok",
            ConditionExpression=(
                "record_id = :rid AND (#s IN (:queued, :retrying) OR (#s = :fetching AND started_at < :stale))"
            ),
            ExpressionAttributeNames={"#s": "state", "#r": "reason", "#t": clients.WRITE_TOKEN},
            ExpressionAttributeValues=clients.values(
                tok=token,
                skipped="skipped",
                reason=reason,
                now=time.time(),
                yes=True,
                rid=record_id,
                queued="queued",
                retrying="retrying",
                fetching="fetching",
                stale=stale_before,
            ),
        )

    def state(self, crawl_id: str, fp: str) -> str | None:
        item = (
            self.connection.client("dynamodb")
            .get_item(
                TableName=self.name,
                Key=self.key(crawl_id, fp),
                ConsistentRead=True,
                ProjectionExpression="#s",
                ExpressionAttributeNames={"#s": "state"},
            )
            .get("Item")
        )
        state: str | None = clients.attribute(item, "state")
        return state

    def scan_crawl(self, crawl_id: str) -> Iterator[dict[str, Any]]:
        paginator = self.connection.client("dynamodb").get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.name,
            FilterExpression="crawl_id = :c",
            ExpressionAttributeValues=clients.values(c=crawl_id),
        ):
            for item in page.get("Items", []):
                yield clients.unmarshal(item)

    def count_states(self, crawl_id: str | None = None) -> dict[str, Counter[str]]:
        """URLs per crawl and state (``crawlstack status``): one Scan reading every item (there is no counter)."""
        projection = {"ProjectionExpression": "crawl_id, #s", "ExpressionAttributeNames": {"#s": "state"}}
        counts: dict[str, Counter[str]] = {}
        for item in clients.scan(self.connection, TableName=self.name, **projection, **clients.of_crawl(crawl_id)):
            crawl = item.get("crawl_id", {}).get("S", "?")
            counts.setdefault(crawl, Counter())[item.get("state", {}).get("S", "queued")] += 1
        return counts
