"""crawlstack.records.storable: record values fitted to what JSON and a DynamoDB item can hold."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from fakes import FakeResolved, FakeResults

from crawlstack.records.storable import (
    ITEM_LIMIT,
    OMITTED_PREFIX,
    dynamo_number,
    fit,
    fit_merge,
    fit_record,
    item_size,
    json_safe,
    omitted,
    size,
    storable,
)

HUGE = "x" * 720_000


def record(**fields: Any) -> dict[str, Any]:
    return {"mapping": "m", "url": "http://a.test/p", "fields": fields, "crawl_id": "c", "fp": "f", "depth": 0}


# --- json_safe ----------------------------------------------------------------
def test_json_safe_turns_nan_and_infinities_into_null_at_any_depth() -> None:
    value = {"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": (Decimal("NaN"), 2)}
    safe = json_safe(value)
    assert safe == {"a": None, "b": [1.5, None, {"c": None}], "d": [None, 2]}
    json.dumps(safe, allow_nan=False)


def test_json_safe_replaces_lone_surrogates_only() -> None:
    assert json_safe({"\ud800k": ["a\udc80b", "ok 😀"]}) == {"\ufffdk": ["a\ufffdb", "ok 😀"]}


# --- numbers ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, Decimal(0)),
        (12.5, Decimal("12.5")),
        (0.1, Decimal("0.1")),  # exactly what repr says, not rounded to 6 places
        (1e-7, Decimal("1E-7")),
        (10**40, Decimal("1.0000000000000000000000000000000000000E+40")),  # trailing zeros are no precision
        (1e125, Decimal("1E+125")),
        (Decimal("1E-130"), Decimal("1E-130")),
        (1e300, None),
        (1e-200, None),
        (Decimal("1E+126"), None),
        (Decimal("1E-131"), None),
        (2**200, None),  # 61 significant digits
        (math.nan, None),
        (-math.inf, None),
        (Decimal("Infinity"), None),
    ],
)
def test_dynamo_number(value: Any, expected: Decimal | None) -> None:
    assert dynamo_number(value) == expected


def test_storable_keeps_numbers_dynamodb_holds_and_stores_the_rest_as_text() -> None:
    value = [1, 2.5, True, None, 1e300, -1e300, 2**200, 10**40, math.nan, math.inf, 1e-200]
    assert storable(value) == [1, 2.5, True, None, "1e+300", "-1e+300", str(2**200), 10**40, None, None, "1e-200"]


def test_storable_fixes_values_nested_in_lists_and_maps() -> None:
    value = {"list": [{"n": 1e300, "s": "\ud800"}, [math.nan]], "map": {"deep": {"x": 2**200}}}
    assert storable(value) == {"list": [{"n": "1e+300", "s": "\ufffd"}, [None]], "map": {"deep": {"x": str(2**200)}}}


def test_storable_stores_nesting_deeper_than_dynamodb_allows_as_json_text() -> None:
    deep: Any = 1
    for _ in range(40):
        deep = {"a": deep}
    value = storable(deep)
    levels = 0
    while isinstance(value, dict):
        value, levels = value["a"], levels + 1
    assert levels == 30 and json.loads(value) == {"a": {"a": {"a": {"a": {"a": {"a": {"a": {"a": {"a": {"a": 1}}}}}}}}}}


# --- sizes and fitting -----------------------------------------------------------
def test_size_counts_utf8_bytes_and_container_overheads() -> None:
    assert size("é") == 2
    assert size(None) == size(True) == 1
    assert size(12345) == 6
    assert size([1, "ab"]) == 3 + (1 + 2) + (1 + 2)
    assert size({"k": "v"}) == 3 + 1 + 1 + 1
    assert item_size({"pk": "ab", "n": 1, "gone": None}) == 2 + 2 + 1 + 2


def test_fit_replaces_the_largest_values_first_and_only_as_many_as_needed() -> None:
    values = {"small": "s" * 100, "big": "b" * 5000, "bigger": "B" * 9000}
    fitted = fit(values, 6000)
    assert fitted["bigger"] == omitted(9000) and fitted["big"] == values["big"] and fitted["small"] == values["small"]
    assert fit(values, 20_000) == values


def test_fit_leaves_values_smaller_than_their_marker() -> None:
    values = {"n": 12, "s": "short"}
    assert fit(values, 0) == values


def test_the_marker_says_what_happened_and_where_the_full_record_is() -> None:
    marker = omitted(720_000)
    assert marker.startswith(OMITTED_PREFIX) and "720000 bytes" in marker and "records/" in marker and "S3" in marker
    assert len(marker) < 200


def test_fit_record_keeps_a_record_that_fits_as_it_is() -> None:
    rec = record(title="t", price=9.5, tags=["a", "b"], empty=None)
    assert fit_record(rec) == rec


def test_fit_record_stores_a_720kb_field_as_a_marker_and_keeps_the_others_in_mapping_order() -> None:
    rec = record(title="t", body=HUGE, price=1e300, n=math.nan)
    item = fit_record({"pk": "c#f", **rec})
    assert item["fields"] == {"title": "t", "body": omitted(size(HUGE)), "price": "1e+300", "n": None}
    assert list(item["fields"]) == ["title", "body", "price", "n"]
    assert item_size(item) < ITEM_LIMIT
    assert rec["fields"]["body"] == HUGE  # the record itself is untouched: S3 keeps it whole


def test_fit_record_with_many_large_fields_gives_up_only_enough_of_them() -> None:
    rec = record(**{f"f{i}": str(i) * 150_000 for i in range(5)})
    fields = fit_record(rec)["fields"]
    kept = [name for name, value in fields.items() if not value.startswith(OMITTED_PREFIX)]
    assert len(kept) == 2, kept
    assert item_size(fit_record(rec)) < ITEM_LIMIT


def test_fit_record_fits_a_huge_nested_list_as_a_whole() -> None:
    rec = record(items=[{"text": "y" * 1000} for _ in range(600)], title="t")
    fields = fit_record(rec)["fields"]
    assert fields["title"] == "t" and fields["items"].startswith(OMITTED_PREFIX)


def test_fit_merge_leaves_out_values_that_become_null_and_fits_to_the_room_left() -> None:
    fitted = fit_merge({"a": math.nan, "b": "x" * 1000, "c": 1e300}, "http://a.test/p", used=0, name_overhead=13)
    assert fitted == {"b": "x" * 1000, "c": "1e+300"}
    full = fit_merge({"b": "x" * 1000}, "http://a.test/p", used=ITEM_LIMIT - 500, name_overhead=13)
    assert full == {"b": omitted(1000)}


# --- the fakes fit as the adapters do ----------------------------------------------
def test_fake_results_store_what_the_results_table_would() -> None:
    results = FakeResults()
    results.put(record(body=HUGE, price=1e300, n=math.inf))
    assert results.items["c#f"]["fields"] == {"body": omitted(size(HUGE)), "price": "1e+300", "n": None}


def test_fake_resolved_gives_a_value_too_large_for_the_item_left_a_marker() -> None:
    store = FakeResolved()
    first = store.merge("c", "r", ("a", "b"), {"a": "a" * 300_000}, "http://a.test/1")
    assert first.fields == {"a": "a" * 300_000}
    # Both fit no item: the second page's value is the marker, and still counts as found.
    second = store.merge("c", "r", ("a", "b"), {"a": "other", "b": "b" * 300_000}, "http://a.test/2")
    assert second.fields == {"a": "a" * 300_000, "b": omitted(300_000)}
    assert second.sources == {"a": "http://a.test/1", "b": "http://a.test/2"}
    assert second.complete
