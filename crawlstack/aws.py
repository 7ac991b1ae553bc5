"""Small adapters over SQS, DynamoDB and S3; the only module that imports boto3.

Clients are created lazily, on first use, so moto can patch botocore before
any exist, and they use botocore's standard retry mode.  Physical names come
from the ``CRAWLSTACK_*`` environment variables (``settings.ENV_*``); an
``AWS_ENDPOINT_URL`` in the environment points every client at an
AWS-compatible endpoint (moto server, LocalStack), as boto3 itself supports.

A retried call may have succeeded already: when a reply is lost, botocore
sends the call again, and a conditional write then meets its own earlier
write and fails its condition.  Conditional writes whose failure the caller
acts on therefore write a token unique to the call (``WRITE_TOKEN``, a new
one per call, the same across botocore's retries of it) and read the item
back on failure (``ReturnValuesOnConditionCheckFailure=ALL_OLD``): holding
our token, the write did happen (``_conditional_write``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from crawlstack import jobs, settings, storable
from crawlstack.config import CrawlConfig
from crawlstack.politeness import Blocked, HostSlot
from crawlstack.resolution import ResolvedRecord
from crawlstack.robots import RobotsRecord, pack_body, unpack_body

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=50)
_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def client(service: str) -> Any:
    with _clients_lock:
        if service not in _clients:
            _clients[service] = boto3.session.Session().client(service, config=_CONFIG)  # type: ignore[call-overload]
        return _clients[service]


def reset_clients() -> None:
    """Forget cached clients (tests and local mode start a fresh emulator)."""
    with _clients_lock:
        _clients.clear()


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"environment variable {name} is not set")
    return value


# The attribute a conditional write stores its call's token in (see the module docstring).
WRITE_TOKEN = "write_token"
# A crawl-log note is a sentence or two; bounded so no page can grow an item.
NOTE_MAX_CHARS = 1000


def new_token() -> str:
    return uuid.uuid4().hex


def _conditional_write(operation: str, token: str | None = None, **request: Any) -> bool:
    """Run one conditional DynamoDB write (``put_item``, ``update_item``...); False when its condition failed.

    With ``token`` (which the request writes to ``WRITE_TOKEN``), a failed
    condition on an item that holds that token means an earlier attempt of
    this same call did the write and its reply was lost: True.
    """
    if token is not None:
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    try:
        getattr(client("dynamodb"), operation)(**request)
    except ClientError as exc:
        if _is_conditional_failure(exc):
            return token is not None and _holds_token(_failed_item(exc), token)
        raise
    return True


def _take_from_counter(table: str, key: dict[str, Any], pages: int, cap: int) -> int | None:
    """Add ``pages`` to the item's ``pages_admitted`` if that stays within ``cap``: the new count, or None.

    A retry after a lost reply would add again, so the write stores its
    token and the condition refuses a second add by the same call; its
    failure with our token in place is the earlier attempt's success (the
    count is then read from the item the failure returns).
    """
    if pages > cap:
        return None
    token = new_token()
    try:
        resp = client("dynamodb").update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #t = :tok ADD pages_admitted :n",
            ConditionExpression="(attribute_not_exists(pages_admitted) OR pages_admitted <= :room) "
            "AND (attribute_not_exists(#t) OR #t <> :tok)",
            ExpressionAttributeNames={"#t": WRITE_TOKEN},
            ExpressionAttributeValues={
                ":n": {"N": str(pages)},
                ":room": {"N": str(cap - pages)},
                ":tok": {"S": token},
            },
            ReturnValues="UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        item = resp.get("Attributes")
    except ClientError as exc:
        if not _is_conditional_failure(exc):
            raise
        item = _failed_item(exc)
        if not _holds_token(item, token):
            return None
    admitted = (item or {}).get("pages_admitted", {}).get("N")
    return int(admitted) if admitted is not None else pages


def _holds_token(item: dict[str, Any] | None, token: str) -> bool:
    return item is not None and item.get(WRITE_TOKEN, {}).get("S") == token


def _is_conditional_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _too_large(exc: ClientError) -> bool:
    """DynamoDB refused an item over its size limit (PutItem and UpdateItem say so alike)."""
    error = exc.response.get("Error", {})
    return error.get("Code") == "ValidationException" and "exceeded the maximum allowed size" in error.get(
        "Message", ""
    )


def _failed_item(exc: ClientError) -> dict[str, Any] | None:
    """The item a conditional write found (ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    item = exc.response.get("Item")  # type: ignore[typeddict-item]
    return item if isinstance(item, dict) else None


def _num(value: float) -> Decimal:
    return Decimal(repr(round(value, 6)))


class SendFailed(RuntimeError):
    pass


class Queue:
    """An SQS queue that messages are sent to in batches of ten."""

    def __init__(self, key: str) -> None:
        self.key = key

    @property
    def url(self) -> str:
        return _env(settings.ENV_QUEUE_URL[self.key])

    def send(self, messages: Iterable[tuple[str, int]]) -> int:
        """Send (body, delay_seconds) pairs with SendMessageBatch; return how many."""
        batch: list[dict[str, Any]] = []
        sent = 0
        for body, delay in messages:
            wait = max(0, min(delay, settings.MAX_SQS_DELAY_SECONDS))
            batch.append({"Id": str(len(batch)), "MessageBody": body, "DelaySeconds": wait})
            if len(batch) == settings.SQS_BATCH_SIZE:
                sent += self._send_batch(batch)
                batch = []
        if batch:
            sent += self._send_batch(batch)
        return sent

    def _send_batch(self, entries: list[dict[str, Any]]) -> int:
        pending = entries
        for attempt in range(4):
            resp = client("sqs").send_message_batch(QueueUrl=self.url, Entries=pending)
            failed = {f["Id"] for f in resp.get("Failed", [])}
            if not failed:
                return len(entries)
            pending = [e for e in pending if e["Id"] in failed]
            time.sleep(0.05 * 2**attempt)
        raise SendFailed(f"{len(pending)} messages could not be sent to the {self.key} queue")


class CrawlStore:
    """The crawls table: config, seed hosts and the page budget counter."""

    table_key = "crawls"

    def __init__(self, cache_seconds: float | None = None) -> None:
        # The cache bounds how long a stop takes to reach this container.
        self.cache_seconds = jobs.STATE_CACHE_SECONDS if cache_seconds is None else cache_seconds
        self._cache: dict[str, tuple[float, CrawlConfig]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        max_age = self.cache_seconds if max_age is None else max_age
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(crawl_id)
        if cached and now - cached[0] < max_age:
            return cached[1]
        item = (
            client("dynamodb")
            .get_item(TableName=self.name, Key={"crawl_id": {"S": crawl_id}}, ConsistentRead=True)
            .get("Item")
        )
        defaults = CrawlConfig.defaults_from_env(crawl_id)
        config = CrawlConfig.from_item(_unmarshal(item), defaults) if item else defaults
        with self._lock:
            self._cache[crawl_id] = (now, config)
        return config

    def put(self, config: CrawlConfig) -> None:
        client("dynamodb").put_item(TableName=self.name, Item=_marshal(config.to_item()))

    def add_seed_host(self, crawl_id: str, host: str) -> None:
        client("dynamodb").update_item(
            TableName=self.name,
            Key={"crawl_id": {"S": crawl_id}},
            UpdateExpression="ADD seed_hosts :h",
            ExpressionAttributeValues={":h": {"SS": [host]}},
        )
        with self._lock:
            self._cache.pop(crawl_id, None)

    def set_state(self, crawl_id: str, state: str) -> None:
        """Set a crawl ``running`` or ``stopped`` (``crawlstack.jobs``); UnknownCrawl if it has no item."""
        if state not in jobs.STATES:
            raise ValueError(f"crawl state must be one of {', '.join(jobs.STATES)}, not {state!r}")
        try:
            client("dynamodb").update_item(
                TableName=self.name,
                Key={"crawl_id": {"S": crawl_id}},
                UpdateExpression="SET #s = :s",
                ConditionExpression="attribute_exists(crawl_id)",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={":s": {"S": state}},
            )
        except ClientError as exc:
            if _is_conditional_failure(exc):
                raise jobs.UnknownCrawl(crawl_id) from exc
            raise
        with self._lock:
            self._cache.pop(crawl_id, None)

    def count_page(self, crawl_id: str, max_pages: int) -> bool:
        """Take one page from the budget; False once it is spent (``take_pages`` of 1)."""
        return self.take_pages(crawl_id, max_pages, 1) is not None

    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None:
        """Take ``pages`` of the budget at once; the pages admitted since, or None if fewer are left.

        The counter is not idempotent by itself: a retry after a lost reply
        would add again (and, at the end of the budget, fail and drop a page
        that was admitted).  So the write also stores its token, and the
        condition refuses a second add by the same call; its failure with our
        token in place is the earlier attempt's success.  Only if another
        admission lands between the attempt and its retry do the pages count
        twice (the budget then admits that many fewer).
        """
        return _take_from_counter(self.name, {"crawl_id": {"S": crawl_id}}, pages, max_pages)


def _note_url(table: str, crawl_id: str, fp: str, url: str, depth: int, state: str, reason: str) -> bool:
    """Note a URL the crawl passed over (``state`` with ``reason``), only if the crawl has no item for it yet.

    The note is ``claimable``: a later ``claim`` takes it over.  False when
    an item was there already (a retried call finding its own note is True).
    """
    now = str(_num(time.time()))
    token = new_token()
    item = {
        "pk": {"S": f"{crawl_id}#{fp}"},
        "crawl_id": {"S": crawl_id},
        "url": {"S": url},
        "depth": {"N": str(depth)},
        "state": {"S": state},
        "reason": {"S": reason},
        "claimable": {"BOOL": True},
        "seen_at": {"N": now},
        "finished_at": {"N": now},
        WRITE_TOKEN: {"S": token},
    }
    return _conditional_write(
        "put_item", token=token, TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)"
    )


class UrlStore:
    """The urls table: one item per crawl and URL, written once (dedupe), then its outcome."""

    table_key = "urls"

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    @staticmethod
    def key(crawl_id: str, fp: str) -> dict[str, Any]:
        return {"pk": {"S": f"{crawl_id}#{fp}"}}

    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> bool:
        """Record a URL as seen; False if this crawl has seen it already.

        ``claimer`` (the SQS message id) lets a redelivered message claim its
        own URL again, so a dispatcher that died after the claim loses nothing.
        An item marked ``claimable`` (skipped for a complete record, never
        fetched: ``note_skip``, ``unclaim``) is taken over.  ``record_id`` is
        kept so that only that record may ``unclaim`` the URL.
        """
        token = new_token()
        item = {
            "pk": {"S": f"{crawl_id}#{fp}"},
            "crawl_id": {"S": crawl_id},
            "url": {"S": url},
            "depth": {"N": str(depth)},
            "state": {"S": "queued"},
            "seen_at": {"N": str(_num(time.time()))},
            WRITE_TOKEN: {"S": token},
        }
        if record_id:
            item["record_id"] = {"S": record_id}
        condition = "attribute_not_exists(pk) OR claimable = :yes"
        values: dict[str, Any] = {":yes": {"BOOL": True}}
        kwargs: dict[str, Any] = {}
        if claimer:
            # Only while nothing has happened to the URL yet: a redelivery must
            # not wipe an outcome, or fetch the page a second time.
            item["claimed_by"] = {"S": claimer}
            condition += " OR (claimed_by = :me AND #s = :queued)"
            values |= {":me": {"S": claimer}, ":queued": {"S": "queued"}}
            kwargs = {"ExpressionAttributeNames": {"#s": "state"}}
        return _conditional_write(
            "put_item",
            token=token,
            TableName=self.name,
            Item=item,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
            **kwargs,
        )

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None:
        present = {"state": outcome, "finished_at": time.time(), **{k: v for k, v in fields.items() if v is not None}}
        # Names go through placeholders: several (status, state) are reserved words.
        names = {f"#a{i}": name for i, name in enumerate(present)}
        values = {f":a{i}": value for i, value in enumerate(present.values())}
        client("dynamodb").update_item(
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(present))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=_marshal(values),
        )

    def add_note(self, crawl_id: str, fp: str, note: str) -> None:
        """What the URL's crawl-log line should say about its page beyond its outcome (values cut, timeouts)."""
        # Only on an item that exists: a note never makes a URL the crawl did not claim.
        _conditional_write(
            "update_item",
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET note = :n",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":n": {"S": note[:NOTE_MAX_CHARS]}},
        )

    def start_fetch(self, crawl_id: str, fp: str, now: float, stale_before: float, attempt: int = 1) -> bool:
        """Mark the URL as being fetched by try ``attempt``; False if that try is not the URL's next one.

        Attempt 1 needs the URL ``queued``, a retry needs it ``retrying`` after
        the try before (``crawlstack.fetcher``); either may take over its own
        try's ``fetching`` mark older than ``stale_before`` (a fetcher that died).

        A retry whose reply was lost finds its own mark (its token) and is
        True: else the page would never be fetched.
        """
        token = new_token()
        values: dict[str, Any] = {
            ":fetching": {"S": "fetching"},
            ":now": {"N": str(_num(now))},
            ":stale": {"N": str(_num(stale_before))},
            ":n": {"N": str(attempt)},
            ":tok": {"S": token},
        }
        if attempt <= 1:
            # Items from before retries carry no attempt.
            condition = (
                "#s = :queued OR (#s = :fetching AND started_at < :stale"
                " AND (attribute_not_exists(attempt) OR attempt = :n))"
            )
            values[":queued"] = {"S": "queued"}
        else:
            condition = (
                "(#s = :retrying AND attempt = :prev) OR (#s = :fetching AND started_at < :stale AND attempt = :n)"
            )
            values |= {":retrying": {"S": "retrying"}, ":prev": {"N": str(attempt - 1)}}
        return _conditional_write(
            "update_item",
            token=token,
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET #s = :fetching, started_at = :now, attempt = :n, #t = :tok",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#s": "state", "#t": WRITE_TOKEN},
            ExpressionAttributeValues=values,
        )

    def retrying(self, crawl_id: str, fp: str) -> tuple[int, float] | None:
        """(the try that failed, when the next may start) while the URL waits for a retry, else None."""
        item = (
            client("dynamodb")
            .get_item(TableName=self.name, Key=self.key(crawl_id, fp), ConsistentRead=True)
            .get("Item")
        )
        data = _unmarshal(item)
        if data.get("state") != "retrying":
            return None
        return int(data.get("attempt", 1)), float(data.get("retry_at", 0.0))

    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        """Record a URL skipped without claiming it, only if the crawl has no item for it yet.

        The item is ``claimable``: a later ``claim`` takes it over.
        """
        return _note_url(self.name, crawl_id, fp, url, depth, "skipped", reason)

    def unclaim(self, crawl_id: str, fp: str, record_id: str, reason: str, stale_before: float) -> bool:
        """Record a claimed, unfetched URL as skipped and ``claimable`` again.

        Only while ``record_id`` holds the claim and the URL is queued or
        waiting for a retry (or being fetched since before ``stale_before``, by
        a fetcher that died), so a page fetched or being fetched is never
        offered a second time.
        """
        token = new_token()
        return _conditional_write(
            "update_item",
            token=token,
            TableName=self.name,
            Key=self.key(crawl_id, fp),
            UpdateExpression="SET #s = :skipped, #r = :reason, finished_at = :now, claimable = :yes, #t = :tok",
            ConditionExpression=(
                "record_id = :rid AND (#s IN (:queued, :retrying) OR (#s = :fetching AND started_at < :stale))"
            ),
            ExpressionAttributeNames={"#s": "state", "#r": "reason", "#t": WRITE_TOKEN},
            ExpressionAttributeValues={
                ":tok": {"S": token},
                ":skipped": {"S": "skipped"},
                ":reason": {"S": reason},
                ":now": {"N": str(_num(time.time()))},
                ":yes": {"BOOL": True},
                ":rid": {"S": record_id},
                ":queued": {"S": "queued"},
                ":retrying": {"S": "retrying"},
                ":fetching": {"S": "fetching"},
                ":stale": {"N": str(_num(stale_before))},
            },
        )

    def state(self, crawl_id: str, fp: str) -> str | None:
        item = (
            client("dynamodb")
            .get_item(
                TableName=self.name,
                Key=self.key(crawl_id, fp),
                ConsistentRead=True,
                ProjectionExpression="#s",
                ExpressionAttributeNames={"#s": "state"},
            )
            .get("Item")
        )
        return item["state"]["S"] if item and "state" in item else None

    def scan_crawl(self, crawl_id: str) -> Iterator[dict[str, Any]]:
        paginator = client("dynamodb").get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.name,
            FilterExpression="crawl_id = :c",
            ExpressionAttributeValues={":c": {"S": crawl_id}},
        ):
            for item in page.get("Items", []):
                yield _unmarshal(item)


class HostStore:
    """The hosts table: politeness slots (kind "slot") and robots.txt cache (kind "robots")."""

    table_key = "hosts"

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    @staticmethod
    def _key(host: str, kind: str) -> dict[str, Any]:
        return {"host": {"S": host}, "kind": {"S": kind}}

    # -- politeness ------------------------------------------------------------
    def read_slot(self, host: str) -> HostSlot:
        item = (
            client("dynamodb")
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
        values: dict[str, Any] = {":fp": {"SS": [fp]}, ":cap": {"N": str(window)}}
        conds = []
        if new_next is not None:
            values[":new"] = {"N": str(_num(new_next))}
            if expected.exists:
                conds.append("next_slot = :old")
                values[":old"] = {"N": str(_num(expected.next_slot))}
            else:
                conds.append("attribute_not_exists(next_slot)")
        if expected.adaptive_delay:
            conds.append("adaptive_delay = :ad")
            values[":ad"] = {"N": str(_num(expected.adaptive_delay))}
        else:
            conds.append("attribute_not_exists(adaptive_delay)")
        conds.append("(attribute_not_exists(#w) OR (size(#w) < :cap AND NOT contains(#w, :fpv)))")
        cond = " AND ".join(conds)
        values[":fpv"] = {"S": fp}
        done, item = self._update_slot(
            host,
            UpdateExpression="ADD #w :fp" if new_next is None else "SET next_slot = :new ADD #w :fp",
            ConditionExpression=cond,
            ExpressionAttributeNames={"#w": "window"},
            ExpressionAttributeValues=values,
        )
        if done:
            return None
        if item is not None and _reserved(item, fp, values[":new"]["N"] if new_next is not None else None):
            return None  # our own reservation, its reply lost and the call retried
        return _slot_from(host, item) if item is not None else self.read_slot(host)

    def _update_slot(self, host: str, **request: Any) -> tuple[bool, dict[str, Any] | None]:
        """A conditional update of the host's slot item: (True, None), or (False, the item as it stood, if known)."""
        try:
            client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host, "slot"),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **request,
            )
        except ClientError as exc:
            if not _is_conditional_failure(exc):
                raise
            return False, _failed_item(exc)
        return True, None

    def mark_parked(self, host: str, window: int, stamp: float) -> bool:
        """Flag the host as having parked URLs, only while its window is full.

        The window being full at this moment means some request of the host
        is still to finish, and its release will look in the parked table.
        """
        return _conditional_write(
            "update_item",
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression="SET parked_at = :stamp",
            # attribute_exists first: false either way on DynamoDB, but moto
            # raises on size() of a missing attribute (an empty window).
            ConditionExpression="attribute_exists(#w) AND size(#w) >= :cap",
            ExpressionAttributeNames={"#w": "window"},
            ExpressionAttributeValues={":stamp": {"N": str(_num(stamp))}, ":cap": {"N": str(window)}},
        )

    def clear_parked(self, host: str, stamp: float) -> None:
        """Drop the flag, unless somebody parked again since ``stamp`` was read."""
        try:
            client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host, "slot"),
                UpdateExpression="REMOVE parked_at",
                ConditionExpression="parked_at = :stamp",
                ExpressionAttributeValues={":stamp": {"N": str(_num(stamp))}},
            )
        except ClientError as exc:
            if not _is_conditional_failure(exc):
                raise

    def claim(self, host: str, now: float, lease_until: float) -> Blocked | None:
        """Take the host for one request; None on success, else what holds it.

        The claim carries a token: a retry that finds its own claim (its first
        attempt's reply was lost) holds the host, rather than waiting for a
        lease nobody will release.
        """
        token = new_token()
        try:
            client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host, "slot"),
                UpdateExpression="SET free_at = :lease, busy = :one, #t = :tok",
                ConditionExpression="attribute_not_exists(free_at) OR free_at <= :now",
                ExpressionAttributeNames={"#t": WRITE_TOKEN},
                ExpressionAttributeValues={
                    ":lease": {"N": str(_num(lease_until))},
                    ":now": {"N": str(_num(now))},
                    ":one": {"N": "1"},
                    ":tok": {"S": token},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _is_conditional_failure(exc):
                raise
            item = _failed_item(exc)
            if _holds_token(item, token):
                return None
            slot = _slot_from(host, item) if item is not None else self.read_slot(host)
            return Blocked(free_at=slot.free_at, in_flight=slot.busy)
        return None

    def release(self, host: str, fp: str, free_at: float | None) -> HostSlot:
        """Leave the window (and the host, from ``free_at``); returns the new state."""
        values: dict[str, Any] = {":fp": {"SS": [fp]}}
        update = "DELETE #w :fp"
        if free_at is not None:
            update = "SET free_at = :free, busy = :zero " + update
            values[":free"] = {"N": str(_num(free_at))}
            values[":zero"] = {"N": "0"}
        resp = client("dynamodb").update_item(
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression=update,
            ExpressionAttributeNames={"#w": "window"},
            ExpressionAttributeValues=values,
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
            values[":old"] = {"N": str(_num(expected))}
        else:
            cond = "attribute_not_exists(adaptive_delay)"
        if adaptive is None:
            update = "REMOVE adaptive_delay"
        else:
            update = "SET adaptive_delay = :new"
            values[":new"] = {"N": str(_num(adaptive))}
        done, item = self._update_slot(
            host,
            UpdateExpression=update,
            ConditionExpression=cond,
            **({"ExpressionAttributeValues": values} if values else {}),
        )
        if done:
            return None
        return _slot_from(host, item) if item is not None else self.read_slot(host)

    def push_back(self, host: str, free_at: float) -> None:
        """Give back a claim taken for a robots.txt fetch: the host is free from ``free_at``.

        Two independent "at least" updates: no slot may start before
        ``free_at`` either, whatever the other attribute holds.
        """
        client("dynamodb").update_item(
            TableName=self.name,
            Key=self._key(host, "slot"),
            UpdateExpression="SET free_at = :f, busy = :zero",
            ExpressionAttributeValues={":f": {"N": str(_num(free_at))}, ":zero": {"N": "0"}},
        )
        try:
            client("dynamodb").update_item(
                TableName=self.name,
                Key=self._key(host, "slot"),
                UpdateExpression="SET next_slot = :f",
                ConditionExpression="attribute_not_exists(next_slot) OR next_slot < :f",
                ExpressionAttributeValues={":f": {"N": str(_num(free_at))}},
            )
        except ClientError as exc:
            if not _is_conditional_failure(exc):
                raise

    # -- robots.txt ------------------------------------------------------------
    def get_robots(self, origin: str) -> RobotsRecord | None:
        item = (
            client("dynamodb")
            .get_item(TableName=self.name, Key=self._key(origin, "robots"), ConsistentRead=True)
            .get("Item")
        )
        if not item or "robots_kind" not in item:
            return None
        data = _unmarshal(item)
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
        token = new_token()
        # With a token: a retried lock that finds its own lock must not think
        # another dispatcher holds it (its origin would wait out the lease).
        return _conditional_write(
            "update_item",
            token=token,
            TableName=self.name,
            Key=self._key(origin, "robots"),
            UpdateExpression="SET robots_lock = :until, expires_at = if_not_exists(expires_at, :until), #t = :tok",
            ConditionExpression="attribute_not_exists(robots_lock) OR robots_lock < :now",
            ExpressionAttributeNames={"#t": WRITE_TOKEN},
            ExpressionAttributeValues={
                ":until": {"N": str(_num(until))},
                ":now": {"N": str(_num(now))},
                ":tok": {"S": token},
            },
        )

    def unlock_robots(self, origin: str) -> None:
        client("dynamodb").update_item(
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
        client("dynamodb").put_item(TableName=self.name, Item=_marshal(item))


class ParkStore:
    """The parked table: URLs waiting behind a host whose window is full, oldest first."""

    table_key = "frontier"

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    def put(self, host: str, order: str, body: str) -> None:
        client("dynamodb").put_item(
            TableName=self.name, Item={"host": {"S": host}, "order": {"S": order}, "body": {"S": body}}
        )

    def peek(self, host: str, limit: int, untaken_since: float | None = None) -> list[tuple[str, str]]:
        """The first ``limit`` rows; with ``untaken_since``, leaving out rows taken since then.

        Rows another unparker holds are read (a filter costs what it reads)
        but not returned, so a busy host's unparkers do not all try the same
        first rows; the read looks a window's worth of rows further for it.
        """
        request: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": "host"},
            "ExpressionAttributeValues": {":h": {"S": host}},
            "ConsistentRead": True,
            "Limit": limit,
        }
        if untaken_since is not None:
            request["Limit"] = limit + 2 * settings.DEFAULT_HOST_CONCURRENCY
            request["FilterExpression"] = "attribute_not_exists(taken_at) OR taken_at < :since"
            request["ExpressionAttributeValues"][":since"] = {"N": str(_num(untaken_since))}
        resp = client("dynamodb").query(**request)
        return [(i["order"]["S"], i["body"]["S"]) for i in resp.get("Items", []) if "body" in i][:limit]

    def take(self, host: str, order: str, stamp: float, stale_before: float) -> bool:
        """Become the one unparker of a row (unless another took it after ``stale_before``).

        A retried take that finds its own take (its token) took the row: else
        the row would sit taken by nobody until it goes stale.
        """
        token = new_token()
        return _conditional_write(
            "update_item",
            token=token,
            TableName=self.name,
            Key={"host": {"S": host}, "order": {"S": order}},
            UpdateExpression="SET taken_at = :stamp, #t = :tok",
            ConditionExpression="attribute_exists(body) AND (attribute_not_exists(taken_at) OR taken_at < :stale)",
            ExpressionAttributeNames={"#t": WRITE_TOKEN},
            ExpressionAttributeValues={
                ":stamp": {"N": str(_num(stamp))},
                ":stale": {"N": str(_num(stale_before))},
                ":tok": {"S": token},
            },
        )

    def exists(self, host: str, order: str) -> bool:
        """Whether the row is still parked (taken or not): a strongly consistent read."""
        item = (
            client("dynamodb")
            .get_item(
                TableName=self.name,
                Key={"host": {"S": host}, "order": {"S": order}},
                ConsistentRead=True,
                ProjectionExpression="#h",
                ExpressionAttributeNames={"#h": "host"},
            )
            .get("Item")
        )
        return item is not None

    def untake(self, host: str, order: str, stamp: float) -> None:
        try:
            client("dynamodb").update_item(
                TableName=self.name,
                Key={"host": {"S": host}, "order": {"S": order}},
                UpdateExpression="REMOVE taken_at",
                ConditionExpression="taken_at = :stamp",
                ExpressionAttributeValues={":stamp": {"N": str(_num(stamp))}},
            )
        except ClientError as exc:
            if not _is_conditional_failure(exc):
                raise

    def delete(self, host: str, order: str) -> None:
        client("dynamodb").delete_item(TableName=self.name, Key={"host": {"S": host}, "order": {"S": order}})

    def count(self) -> int:
        total = 0
        for page in client("dynamodb").get_paginator("scan").paginate(TableName=self.name, Select="COUNT"):
            total += page.get("Count", 0)
        return total


class ResultStore:
    """The results table: one record per mapped page."""

    table_key = "results"

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    def put(self, record: dict[str, Any]) -> None:
        """Store the record, fitted as ``crawlstack.storable`` says, so that a page's values never fail the write.

        Should the size estimate run short of DynamoDB's own, a smaller budget
        gives way to markers sooner.
        """
        for limit in (storable.ITEM_LIMIT, storable.ITEM_LIMIT // 4, 0):
            item = storable.fit_record({"pk": f"{record['crawl_id']}#{record['fp']}", **record}, limit)
            try:
                client("dynamodb").put_item(TableName=self.name, Item=_marshal_exact(item))
                return
            except ClientError as exc:
                if limit == 0 or not _too_large(exc):
                    raise


class ResolvedStore:
    """The resolved table: one merged record per crawl and record id (``crawlstack.resolution``).

    Each field is two flat top-level attributes, ``field.<name>`` (the value)
    and ``source.<name>`` (the URL it came from): ``if_not_exists`` on a
    nested map path fails while the parent map is missing, flat names
    need no parent.  Names go through placeholders, so dots and reserved
    words are literal.  Values are fitted as ``crawlstack.storable`` says:
    one too large for what is left of the item is stored as a marker.
    """

    table_key = "resolved"
    FIELD_PREFIX = "field."
    SOURCE_PREFIX = "source."
    # Fields per UpdateItem: about 55 characters of expression each keeps
    # the expression under DynamoDB's 4 KB limit.  Larger pages take
    # several updates, each atomic; first-wins holds per field either way.
    FIELDS_PER_UPDATE = 50
    # Keys per BatchGetItem (DynamoDB's limit).
    KEYS_PER_BATCH_GET = 100
    # Refits of one update that DynamoDB refused for the item's size.
    SIZE_RETRIES = 2
    _NAME_OVERHEAD = len(FIELD_PREFIX) + len(SOURCE_PREFIX)

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    @staticmethod
    def key(crawl_id: str, record_id: str) -> dict[str, Any]:
        return {"pk": {"S": f"{crawl_id}#{record_id}"}}

    def merge(
        self, crawl_id: str, record_id: str, want: Sequence[str], fields: Mapping[str, Any], source_url: str
    ) -> ResolvedRecord:
        # Fitted as if the item were new; a fuller item is refitted when DynamoDB refuses.
        base = {"pk": f"{crawl_id}#{record_id}", "crawl_id": crawl_id, "record_id": record_id, "want": list(want)}
        used = storable.item_size({**base, "complete": True})
        fitted = storable.fit_merge(fields, source_url, used, self._NAME_OVERHEAD)
        items = list(fitted.items())
        chunks = [items[i : i + self.FIELDS_PER_UPDATE] for i in range(0, len(items), self.FIELDS_PER_UPDATE)]
        attributes: dict[str, Any] = {}
        # No fields still creates the item: the record exists from its first page.
        for chunk in chunks or [[]]:
            attributes = self._update(crawl_id, record_id, want, dict(chunk), source_url)
        record = self._record(crawl_id, record_id, attributes)
        if record.complete and "complete" not in attributes:
            # For readers of the table; the crawler itself derives it from want and fields.
            client("dynamodb").update_item(
                TableName=self.name,
                Key=self.key(crawl_id, record_id),
                UpdateExpression="SET complete = :t",
                ExpressionAttributeValues={":t": {"BOOL": True}},
            )
        return record

    def _update(
        self, crawl_id: str, record_id: str, want: Sequence[str], chunk: dict[str, Any], source_url: str
    ) -> dict[str, Any]:
        """One atomic merge of ``chunk``; the item's new attributes."""
        attempt = 0
        while True:
            names = {"#want": "want"}
            values: dict[str, Any] = {":c": crawl_id, ":r": record_id, ":w": list(want)}
            sets = ["crawl_id = :c", "record_id = :r", "#want = if_not_exists(#want, :w)"]
            if chunk:
                values[":u"] = source_url
            for i, (name, value) in enumerate(chunk.items()):
                names[f"#f{i}"] = self.FIELD_PREFIX + name
                names[f"#s{i}"] = self.SOURCE_PREFIX + name
                values[f":v{i}"] = value
                sets.append(f"#f{i} = if_not_exists(#f{i}, :v{i})")
                sets.append(f"#s{i} = if_not_exists(#s{i}, :u)")
            try:
                resp = client("dynamodb").update_item(
                    TableName=self.name,
                    Key=self.key(crawl_id, record_id),
                    UpdateExpression="SET " + ", ".join(sets),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=_marshal_exact(values),
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if attempt == self.SIZE_RETRIES or not _too_large(exc):
                    raise
                attempt += 1
                chunk = self._refit(crawl_id, record_id, chunk, source_url, last=attempt == self.SIZE_RETRIES)
                continue
            attributes: dict[str, Any] = resp.get("Attributes", {})
            return attributes

    def _refit(
        self, crawl_id: str, record_id: str, chunk: dict[str, Any], source_url: str, last: bool
    ) -> dict[str, Any]:
        """``chunk``'s new fields fitted to the room the item has left (earlier pages filled it).

        Fields the item has already are left out: first-wins keeps them
        anyway.  The last time, every new value larger than its marker is
        one, so what other merges add meanwhile cannot make it fail again.
        """
        item = (
            client("dynamodb")
            .get_item(TableName=self.name, Key=self.key(crawl_id, record_id), ConsistentRead=True)
            .get("Item")
        )
        current = _unmarshal(item)
        new = {name: v for name, v in chunk.items() if self.FIELD_PREFIX + name not in current}
        used = storable.ITEM_LIMIT if last else storable.item_size({**current, "complete": True})
        return storable.fit_merge(new, source_url, used, self._NAME_OVERHEAD)

    def get_many(self, crawl_id: str, record_ids: Iterable[str]) -> dict[str, ResolvedRecord]:
        ids = list(dict.fromkeys(record_ids))
        out: dict[str, ResolvedRecord] = {}
        for start in range(0, len(ids), self.KEYS_PER_BATCH_GET):
            request: dict[str, Any] = {
                self.name: {
                    "Keys": [self.key(crawl_id, rid) for rid in ids[start : start + self.KEYS_PER_BATCH_GET]],
                    "ConsistentRead": True,
                }
            }
            for attempt in range(8):
                resp = client("dynamodb").batch_get_item(RequestItems=request)
                for item in resp.get("Responses", {}).get(self.name, []):
                    record = self._record(crawl_id, item["record_id"]["S"], item)
                    out[record.record_id] = record
                request = resp.get("UnprocessedKeys") or {}
                if not request:
                    break
                # Throttled keys come back unprocessed; back off as AWS advises.
                time.sleep(min(0.05 * 2**attempt, 1.0))
            else:
                raise RuntimeError(f"{self.table_key} table: keys still unprocessed after retries")
        return out

    def scan_crawl(self, crawl_id: str) -> Iterator[ResolvedRecord]:
        """Every record of a crawl (local mode's OUT/resolved.jsonl)."""
        paginator = client("dynamodb").get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.name,
            FilterExpression="crawl_id = :c",
            ExpressionAttributeValues={":c": {"S": crawl_id}},
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                yield self._record(crawl_id, item["record_id"]["S"], item)

    @classmethod
    def _record(cls, crawl_id: str, record_id: str, item: dict[str, Any]) -> ResolvedRecord:
        data = _unmarshal(item)
        fields = {k[len(cls.FIELD_PREFIX) :]: v for k, v in data.items() if k.startswith(cls.FIELD_PREFIX)}
        sources = {k[len(cls.SOURCE_PREFIX) :]: v for k, v in data.items() if k.startswith(cls.SOURCE_PREFIX)}
        return ResolvedRecord(crawl_id, record_id, tuple(data.get("want") or ()), fields, sources)


class BlobStore:
    """The pages bucket."""

    @property
    def bucket(self) -> str:
        return _env(settings.ENV_BUCKET)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        client("s3").put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    def get(self, key: str, bucket: str | None = None) -> bytes:
        body: bytes = client("s3").get_object(Bucket=bucket or self.bucket, Key=key)["Body"].read()
        return body

    def keys(self, prefix: str, since: float | None = None) -> Iterator[str]:
        """Keys under ``prefix``; with ``since`` (epoch seconds), only those written after it."""
        for page in client("s3").get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                if since is None or obj["LastModified"].timestamp() >= since:
                    yield obj["Key"]


class HeldStore:
    """Held work of stopped crawls (``crawlstack.jobs``), in the parked table under ``held#<crawl_id>``.

    No table of its own: the parked table already holds fetch tasks by
    partition and order, and a held partition is never a host's.
    """

    table_key = "frontier"

    @property
    def name(self) -> str:
        return _env(settings.ENV_TABLE[self.table_key])

    def hold(self, crawl_id: str, key: str, body: str) -> bool:
        """Write the row only while the crawl is stopped, in one transaction with that check.

        So no hold lands after ``resume`` set the crawl running and read the
        held rows: False then, and the caller carries on as for a running crawl.
        """
        try:
            client("dynamodb").transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": _env(settings.ENV_TABLE[CrawlStore.table_key]),
                            "Key": {"crawl_id": {"S": crawl_id}},
                            "ConditionExpression": "#s = :stopped",
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": {":stopped": {"S": jobs.STOPPED}},
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.name,
                            "Item": {
                                "host": {"S": jobs.held_host(crawl_id)},
                                "order": {"S": key},
                                "body": {"S": body},
                            },
                        }
                    },
                ]
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            reasons = exc.response.get("CancellationReasons", [])  # type: ignore[typeddict-item]
            cancelled = error.get("Code") == "TransactionCanceledException" and reasons
            if cancelled and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            raise
        return True

    def held(self, crawl_id: str, limit: int) -> list[tuple[str, str]]:
        resp = client("dynamodb").query(
            TableName=self.name,
            KeyConditionExpression="#h = :h",
            ExpressionAttributeNames={"#h": "host"},
            ExpressionAttributeValues={":h": {"S": jobs.held_host(crawl_id)}},
            ConsistentRead=True,
            Limit=limit,
        )
        return [(i["order"]["S"], i["body"]["S"]) for i in resp.get("Items", [])]

    def release(self, crawl_id: str, key: str) -> None:
        client("dynamodb").delete_item(
            TableName=self.name, Key={"host": {"S": jobs.held_host(crawl_id)}, "order": {"S": key}}
        )


# --- marshalling ----------------------------------------------------------------
_serializer = None
_deserializer = None


def _marshal(item: dict[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeSerializer

    global _serializer
    if _serializer is None:
        _serializer = TypeSerializer()
    return {k: _serializer.serialize(_to_dynamo(v)) for k, v in item.items() if v is not None}


def _marshal_exact(item: dict[str, Any]) -> dict[str, Any]:
    """``_marshal`` for record values: fitted by ``crawlstack.storable`` and stored exactly, not rounded."""
    from boto3.dynamodb.types import TypeSerializer

    global _serializer
    if _serializer is None:
        _serializer = TypeSerializer()
    return {k: _serializer.serialize(_exact(v)) for k, v in item.items() if v is not None}


def _exact(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return storable.dynamo_number(value)
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_exact(v) for v in value]
    return value


def _unmarshal(item: dict[str, Any] | None) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeDeserializer

    global _deserializer
    if _deserializer is None:
        _deserializer = TypeDeserializer()
    return {k: _from_dynamo(_deserializer.deserialize(v)) for k, v in (item or {}).items()}


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    if isinstance(value, set):
        return {_from_dynamo(v) for v in value}
    return value


def _reserved(item: dict[str, Any], fp: str, next_slot: str | None) -> bool:
    """The host item holds the reservation ``reserve`` writes: ``fp`` in the window, ``next_slot`` its value.

    Only that reservation puts ``fp`` there (a window entry is one crawl's
    URL, admitted once), so finding both is finding our own write.
    """
    if fp not in item.get("window", {}).get("SS", []):
        return False
    return next_slot is None or item.get("next_slot", {}).get("N") == next_slot


def _slot_from(host: str, item: dict[str, Any] | None) -> HostSlot:
    if not item:
        return HostSlot(host=host)
    return HostSlot(
        host=host,
        exists="next_slot" in item,
        next_slot=float(item["next_slot"]["N"]) if "next_slot" in item else 0.0,
        free_at=float(item["free_at"]["N"]) if "free_at" in item else 0.0,
        busy=item.get("busy", {}).get("N") == "1",
        window=frozenset(item.get("window", {}).get("SS", [])),
        parked_at=float(item["parked_at"]["N"]) if "parked_at" in item else None,
        adaptive_delay=float(item["adaptive_delay"]["N"]) if "adaptive_delay" in item else 0.0,
    )


class ScopeStore:
    """Dispatch's scope bookkeeping (``crawlstack.dispatcher.ScopeRecords``).

    * Per-host page counters: one item per host name and crawl in the hosts
      table, ``kind`` = ``pages#<crawl_id>``, beside the host's slot item.
    * Notes of dropped URLs in the urls table: state ``dropped``, a reason,
      ``claimable`` (like ``UrlStore.note_skip``), written only where the
      crawl has no item for the URL, so the crawl log says why it was dropped.
    """

    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool:
        """Take ``pages`` of the host's ``cap`` pages for the crawl at once; False if fewer are left.

        Guarded against a retried call as ``CrawlStore.count_page`` is: the
        token refuses a second add by the same call.
        """
        key = {"host": {"S": host}, "kind": {"S": f"pages#{crawl_id}"}}
        return _take_from_counter(_env(settings.ENV_TABLE["hosts"]), key, pages, cap) is not None

    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        """Record a URL dropped before dedupe, only if the crawl has no item for it yet."""
        return _note_url(_env(settings.ENV_TABLE["urls"]), crawl_id, fp, url, depth, "dropped", reason)
