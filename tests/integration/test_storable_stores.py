"""The results and resolved tables on the embedded emulator (moto) with values DynamoDB cannot hold as they are.

Every record is stored: NaN and infinities as null, numbers out of
DynamoDB's range or precision as text, and a value too large for an item
as the ``crawlstack.records.storable.omitted`` marker.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from botocore.exceptions import ClientError

from crawlstack import aws, settings
from crawlstack.records.storable import OMITTED_PREFIX, omitted, size

CRAWL = "itest"
HUGE = "x" * 720_000


def refusing(ddb: Any) -> aws.Connection:
    """The environment's connection, but for ``ddb`` as its DynamoDB client."""

    class Refusing(aws.Connection):
        def client(self, service: str) -> Any:
            return ddb if service == "dynamodb" else aws.client(service)

    return Refusing()


def stored_result(fp: str) -> dict[str, Any]:
    resp = aws.client("dynamodb").get_item(
        TableName=settings.TABLES["results"].name, Key={"pk": {"S": f"{CRAWL}#{fp}"}}, ConsistentRead=True
    )
    return aws.unmarshal(resp["Item"])


def record(fp: str, **fields: Any) -> dict[str, Any]:
    return {
        "mapping": "m",
        "url": f"http://a.test/{fp}",
        "fields": fields,
        "depth": 0,
        "crawl_id": CRAWL,
        "fp": fp,
        "fetched_at": 1_700_000_000.123456789,
    }


# --- results -----------------------------------------------------------------------------------
def test_result_store_stores_every_kind_of_value_a_page_can_give(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    store = aws.ResultStore(stack_names.results)
    fields = {
        "nan": math.nan,
        "inf": [math.inf, -math.inf],
        "far": 1e300,
        "tiny": 1e-200,
        "long_int": 2**200,
        "round_int": 10**40,
        "exact": 0.1,
        "small": 1e-7,
        "text": "\ud800 lone surrogate",
        "nested": {"list": [1e300, {"n": math.nan}], "ok": [1, "a", None, True]},
    }
    store.put(record("f1", **fields))
    item = stored_result("f1")
    assert item["fields"] == {
        "nan": None,
        "inf": [None, None],
        "far": "1e+300",
        "tiny": "1e-200",
        "long_int": str(2**200),
        "round_int": 10**40,
        "exact": 0.1,
        "small": 1e-7,
        "text": "\ufffd lone surrogate",
        "nested": {"list": ["1e+300", {"n": None}], "ok": [1, "a", None, True]},
    }
    assert item["fetched_at"] == 1_700_000_000.123456789  # not rounded as the tables' own timestamps are
    assert item["pk"] == f"{CRAWL}#f1" and item["url"] == "http://a.test/f1"


def test_result_store_stores_a_record_with_a_720kb_field_with_a_marker(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    store = aws.ResultStore(stack_names.results)
    store.put(record("f2", title="t", body=HUGE, tail=[1, 2]))
    fields = stored_result("f2")["fields"]
    assert fields == {"title": "t", "body": omitted(size(HUGE)), "tail": [1, 2]}


def test_result_store_gives_way_sooner_when_dynamodb_still_finds_the_item_too_large(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    real = aws.client("dynamodb")
    puts: list[dict[str, Any]] = []

    class Refusing:
        """Refuses the first put as too large, as DynamoDB would if the estimate ran short."""

        def put_item(self, **kwargs: Any) -> Any:
            puts.append(kwargs)
            if len(puts) == 1:
                error = {"Code": "ValidationException", "Message": "Item size has exceeded the maximum allowed size"}
                raise ClientError({"Error": error}, "PutItem")
            return real.put_item(**kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    aws.ResultStore(stack_names.results, connection=refusing(Refusing())).put(
        record("f3", body="y" * 200_000, title="t")
    )
    assert len(puts) == 2
    assert stored_result("f3")["fields"] == {"body": omitted(200_000), "title": "t"}


def test_result_store_still_raises_other_errors(stack: dict[str, str]) -> None:
    with pytest.raises(ClientError):
        aws.ResultStore("no-such-table").put(record("f4", title="t"))


# --- resolved ------------------------------------------------------------------------------------
def test_merge_stores_a_huge_value_as_a_marker_and_leaves_nan_out(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    store = aws.ResolvedStore(stack_names.resolved)
    fields = {"body": HUGE, "far": 1e300, "nan": math.nan, "list": [math.inf, 2**200]}
    merged = store.merge(CRAWL, "r1", ("body", "far", "nan"), fields, "http://a.test/1")
    assert merged.fields == {"body": omitted(size(HUGE)), "far": "1e+300", "list": [None, str(2**200)]}
    assert merged.sources == dict.fromkeys(merged.fields, "http://a.test/1")
    assert not merged.complete  # nan was not found
    assert store.get_many(CRAWL, ["r1"])["r1"] == merged


def test_merge_into_an_item_earlier_pages_filled_gives_the_new_value_a_marker(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    store = aws.ResolvedStore(stack_names.resolved)
    want = ("a", "b", "c")
    first = store.merge(CRAWL, "r2", want, {"a": "a" * 300_000}, "http://a.test/1")
    assert first.fields == {"a": "a" * 300_000}
    # Fits a new item, not this one: DynamoDB refuses, and the refit stores the marker.
    second = store.merge(CRAWL, "r2", want, {"a": "other", "b": "b" * 300_000, "c": 3}, "http://a.test/2")
    assert second.fields == {"a": "a" * 300_000, "b": omitted(300_000), "c": 3}
    assert second.sources == {"a": "http://a.test/1", "b": "http://a.test/2", "c": "http://a.test/2"}
    assert second.complete
    assert store.get_many(CRAWL, ["r2"])["r2"] == second


def test_merge_makes_every_new_value_a_marker_when_refits_keep_failing(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    real = aws.client("dynamodb")
    refused: list[str] = []

    class Refusing:
        """Refuses merges as too large while any value is over 1 KB (as if other merges kept filling the item)."""

        def update_item(self, **kwargs: Any) -> Any:
            values = kwargs.get("ExpressionAttributeValues", {})
            if any(len(v.get("S", "")) > 1000 for v in values.values()):
                refused.append(kwargs["UpdateExpression"])
                error = {
                    "Code": "ValidationException",
                    "Message": "Item size to update has exceeded the maximum allowed size",
                }
                raise ClientError({"Error": error}, "UpdateItem")
            return real.update_item(**kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    merged = aws.ResolvedStore(stack_names.resolved, connection=refusing(Refusing())).merge(
        CRAWL, "r3", ("a", "b"), {"a": "a" * 5000, "b": "b"}, "http://a.test/1"
    )
    assert len(refused) == 2
    assert merged.fields == {"a": omitted(5000), "b": "b"} and merged.fields["a"].startswith(OMITTED_PREFIX)
