"""The adapters' shared part: conditional writes, reads and (de)serialisation, through a connection.

Every adapter makes its calls through a ``Connection``
(``crawlstack.aws.connection``), and so do these helpers.  Physical names
are the adapters' constructor arguments (``crawlstack.aws.names``).

A retried call may have succeeded already: when a reply is lost, botocore
sends the call again, and a conditional write then meets its own earlier
write and fails its condition.  Conditional writes whose failure the caller
acts on therefore write a token unique to the call (``WRITE_TOKEN``, a new
one per call, the same across botocore's retries of it) and read the item
back on failure (``ReturnValuesOnConditionCheckFailure=ALL_OLD``): holding
our token, the write did happen (``conditional_write``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from crawlstack import settings
from crawlstack.aws.connection import Connection
from crawlstack.aws.errors import aws_errors
from crawlstack.records import storable

# The attribute a conditional write stores its call's token in (see the module docstring).
WRITE_TOKEN = "write_token"
NOTE_MAX_CHARS = settings.NOTE_MAX_CHARS


def new_token() -> str:
    return uuid.uuid4().hex


def conditional_write(connection: Connection, operation: str, token: str | None = None, **request: Any) -> bool:
    """Run one conditional DynamoDB write (``put_item``, ``update_item``...); False when its condition failed.

    With ``token`` (which the request writes to ``WRITE_TOKEN``), a failed
    condition on an item that holds that token means an earlier attempt of
    this same call did the write and its reply was lost: True.
    """
    if token is not None:
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    try:
        getattr(connection.client("dynamodb"), operation)(**request)
    except ClientError as exc:
        if is_conditional_failure(exc):
            return token is not None and holds_token(failed_item(exc), token)
        raise
    return True


def take_from_counter(connection: Connection, table: str, key: dict[str, Any], pages: int, cap: int) -> int | None:
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
        resp = connection.client("dynamodb").update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #t = :tok ADD pages_admitted :n",
            ConditionExpression="(attribute_not_exists(pages_admitted) OR pages_admitted <= :room) "
            "AND (attribute_not_exists(#t) OR #t <> :tok)",
            ExpressionAttributeNames={"#t": WRITE_TOKEN},
            ExpressionAttributeValues=values(n=pages, room=cap - pages, tok=token),
            ReturnValues="UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        item = resp.get("Attributes")
    except ClientError as exc:
        if not is_conditional_failure(exc):
            raise
        item = failed_item(exc)
        if not holds_token(item, token):
            return None
    admitted = attribute(item, "pages_admitted")
    return int(admitted) if admitted is not None else pages


# BatchGetItem takes at most 100 keys; keys it leaves unprocessed (throttled) are asked again this many times.
BATCH_GET_KEYS = 100
BATCH_GET_ATTEMPTS = 8


def batch_get(
    connection: Connection, table: str, keys: Sequence[dict[str, Any]], **options: Any
) -> Iterator[dict[str, Any]]:
    """Each item of ``keys`` that exists, as DynamoDB returns it, 100 keys a BatchGetItem.

    ``options`` go into each request (``ConsistentRead``,
    ``ProjectionExpression``, ``ExpressionAttributeNames``).  Unprocessed
    keys are asked again with backoff, as AWS advises; still unprocessed
    after ``BATCH_GET_ATTEMPTS``, RuntimeError.
    """
    for start in range(0, len(keys), BATCH_GET_KEYS):
        request: dict[str, Any] = {table: {"Keys": list(keys[start : start + BATCH_GET_KEYS]), **options}}
        for attempt in range(BATCH_GET_ATTEMPTS):
            resp = connection.client("dynamodb").batch_get_item(RequestItems=request)
            yield from resp.get("Responses", {}).get(table, [])
            request = resp.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))
        else:
            raise RuntimeError(f"table {table}: keys still unprocessed after {BATCH_GET_ATTEMPTS} tries")


def scan(connection: Connection, **request: Any) -> Iterator[dict[str, Any]]:
    """Every item a Scan gives, page by page, as DynamoDB gives it; for the CLI's reads.

    A failure is a ``DeployedError`` naming the table (``aws_errors``).
    """
    with aws_errors(f"scan {request['TableName']}"):
        for page in connection.client("dynamodb").get_paginator("scan").paginate(**request):
            yield from page.get("Items", [])


def of_crawl(crawl_id: str | None) -> dict[str, Any]:
    """A Scan's filter to one crawl's items (their ``crawl_id``); none for every crawl's."""
    if crawl_id is None:
        return {}
    return {"FilterExpression": "crawl_id = :c", "ExpressionAttributeValues": values(c=crawl_id)}


def holds_token(item: dict[str, Any] | None, token: str) -> bool:
    return item is not None and attribute(item, WRITE_TOKEN) == token


def is_conditional_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def too_large(exc: ClientError) -> bool:
    """DynamoDB refused an item over its size limit (PutItem and UpdateItem say so alike)."""
    error = exc.response.get("Error", {})
    return error.get("Code") == "ValidationException" and "exceeded the maximum allowed size" in error.get(
        "Message", ""
    )


def failed_item(exc: ClientError) -> dict[str, Any] | None:
    """The item a conditional write found (ReturnValuesOnConditionCheckFailure=ALL_OLD)."""
    item = exc.response.get("Item")  # type: ignore[typeddict-item]
    return item if isinstance(item, dict) else None


def num(value: float) -> Decimal:
    return Decimal(repr(round(value, 6)))


# --- marshalling ----------------------------------------------------------------
# boto3's TypeSerializer and TypeDeserializer, made on first use: importing
# boto3.dynamodb.types is left out of a handler's cold start.
_serializer: Any = None
_deserializer: Any = None


def _serialize(value: Any) -> dict[str, Any]:
    global _serializer
    if _serializer is None:
        from boto3.dynamodb.types import TypeSerializer

        _serializer = TypeSerializer()
    result: dict[str, Any] = _serializer.serialize(value)
    return result


def serialize(value: Any) -> dict[str, Any]:
    """One attribute value in DynamoDB's form: a float as ``num`` rounds it, an int as is, a set of str as SS."""
    return _serialize(_to_dynamo(value))


def key(**parts: Any) -> dict[str, Any]:
    """An item's key, by attribute name: ``key(host=host, kind="slot")``."""
    return {name: serialize(value) for name, value in parts.items()}


def values(**named: Any) -> dict[str, Any]:
    """``ExpressionAttributeValues``: ``values(now=t)`` is ``{":now": serialize(t)}``."""
    return {f":{name}": serialize(value) for name, value in named.items()}


def marshal(item: dict[str, Any]) -> dict[str, Any]:
    return {k: serialize(v) for k, v in item.items() if v is not None}


def marshal_exact(item: dict[str, Any]) -> dict[str, Any]:
    """``marshal`` for record values: fitted by ``crawlstack.records.storable`` and stored exactly, not rounded."""
    return {k: _serialize(_exact(v)) for k, v in item.items() if v is not None}


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


def unmarshal(item: dict[str, Any] | None) -> dict[str, Any]:
    global _deserializer
    if _deserializer is None:
        from boto3.dynamodb.types import TypeDeserializer

        _deserializer = TypeDeserializer()
    return {k: _from_dynamo(_deserializer.deserialize(v)) for k, v in (item or {}).items()}


def attribute(item: dict[str, Any] | None, name: str) -> Any:
    """One attribute of a DynamoDB item, unmarshalled (None if absent), without unmarshalling the rest."""
    if not item or name not in item:
        return None
    return unmarshal({name: item[name]})[name]


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return num(value)
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
