"""Record values as JSON and DynamoDB can hold them, so no page can make its record unstorable.

Pure and boto3-free: ``crawlstack.aws`` fits every results and resolved
table write with it, the extractor and local mode write JSON with
``json_safe``, and the unit tests' fakes apply the same functions.

* NaN and infinite floats become None (JSON null): strict JSON has no
  such numbers and DynamoDB refuses them.
* Lone surrogates (what a JSON page's ``"\\ud800"`` decodes to) cannot be
  UTF-8 encoded; each becomes U+FFFD.
* Containers nested deeper than ``MAX_VALUE_DEPTH`` are kept as their JSON
  text, so converting a value never recurses without bound.
* For DynamoDB only: a number it cannot hold (more than 38 significant
  digits, or a magnitude outside 1E-130 .. 9.9999999999999999999999999999999999999E+125)
  is stored as its string form (``"1e+300"``); containers nested deeper
  than its 32 levels are stored as their JSON text; and an item that would
  exceed its 400 KB gets its largest field values, largest first, replaced
  by ``omitted(size)``, a short string.  The records/ object in S3 keeps the
  full record.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

# DynamoDB's 400 KB item limit (409,600 bytes), less room for where these
# estimates run short.
ITEM_LIMIT = 400_000
# DynamoDB allows 32 levels; an item's own attributes take the first, a
# results record's "fields" map the second.
MAX_NESTING = 30
OMITTED_PREFIX = "[omitted for size: "
# A record's field values nest at most this deep in records/ and records.jsonl;
# a deeper value is kept as its JSON text.  Page JSON is already cut at
# crawlstack.rules.page.MAX_JSON_DEPTH; this bounds values however they were built.
MAX_VALUE_DEPTH = 100

# boto3's own number context (boto3.dynamodb.types.DYNAMODB_CONTEXT), except
# that rounding away zeros is allowed (10**40 is 1E+40, exactly): what
# passes here passes boto3's serializer.
_NUMBERS = decimal.Context(
    prec=38,
    Emin=-128,
    Emax=126,
    traps=[decimal.Clamped, decimal.Overflow, decimal.Inexact, decimal.Underflow, decimal.InvalidOperation],
)


def omitted(size: int) -> str:
    """The marker that stands for a field value too large for a DynamoDB item."""
    return f"{OMITTED_PREFIX}{size} bytes, over DynamoDB's item limit; the full record is in the records/ object in S3]"


def json_safe(value: Any, levels: int = MAX_VALUE_DEPTH) -> Any:
    """``value`` with NaN and infinities as None and lone surrogates as U+FFFD, for strict JSON.

    Containers ``levels`` deep are kept as their JSON text (``deep_as_text``),
    so no value, however it was built, can exhaust the stack here.
    """
    if isinstance(value, float | Decimal):
        return value if _finite(value) else None
    if isinstance(value, str):
        return _valid_text(value)
    if isinstance(value, dict | list | tuple) and levels <= 0:
        return deep_as_text(value)
    if isinstance(value, dict):
        return {_valid_text(str(k)): json_safe(v, levels - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, levels - 1) for v in value]
    return value


def deep_as_text(value: Any) -> str | None:
    """A container as its JSON text (lone surrogates as U+FFFD); None if too deep even for that."""
    try:
        return _valid_text(json.dumps(value, ensure_ascii=False, default=str))
    except (RecursionError, ValueError):
        return None


def depth(value: Any) -> int:
    """How deep containers nest in ``value`` (a scalar is 0), walked without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list | tuple) else []
    while stack:
        container, level = stack.pop()
        deepest = max(deepest, level)
        children = container.values() if isinstance(container, dict) else container
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list | tuple))
    return deepest


def bounded_fields(fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(``fields`` with each value nested over ``MAX_VALUE_DEPTH`` as its JSON text, the names of those fields)."""
    deep = [name for name, value in fields.items() if isinstance(value, dict | list) and depth(value) > MAX_VALUE_DEPTH]
    if not deep:
        return fields, []
    return {name: deep_as_text(value) if name in deep else value for name, value in fields.items()}, deep


def dynamo_number(value: int | float | Decimal) -> Decimal | None:
    """``value`` as a DynamoDB number, exactly, or None when DynamoDB cannot hold it."""
    if not _finite(value):
        return None
    try:
        number = _NUMBERS.create_decimal(repr(value) if isinstance(value, float) else value)
    except decimal.DecimalException:
        return None
    if not number.is_finite() or (number and not -130 <= number.adjusted() <= 125):
        return None
    return number


def storable(value: Any, levels: int = MAX_NESTING) -> Any:
    """``json_safe(value)`` as DynamoDB can hold it: numbers it cannot hold as text, deep nesting as JSON text."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | Decimal):
        if not _finite(value):
            return None
        if dynamo_number(value) is not None:
            return value
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return _valid_text(value)
    if isinstance(value, dict | list | tuple):
        if levels <= 0:
            return json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False, default=str)
        if isinstance(value, dict):
            return {_valid_text(str(k)): storable(v, levels - 1) for k, v in value.items()}
        return [storable(v, levels - 1) for v in value]
    return value


def size(value: Any) -> int:
    """Bytes a ``storable`` value takes in a DynamoDB item, estimated on the high side."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, int | float | Decimal):
        return len(str(dynamo_number(value) or value)) + 1
    if isinstance(value, dict):
        return 3 + sum(1 + len(str(k).encode("utf-8")) + size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(1 + size(v) for v in value)
    return len(str(value).encode("utf-8"))


def item_size(item: Mapping[str, Any]) -> int:
    """Bytes of an item of ``storable`` values: attribute names and values."""
    return sum(len(name.encode("utf-8")) + size(value) for name, value in item.items() if value is not None)


def fit(values: Mapping[str, Any], budget: int) -> dict[str, Any]:
    """``values`` (``storable`` already), the largest replaced by ``omitted`` until their sizes total ``budget``.

    Only values larger than their marker are replaced; if those alone cannot
    make room, every one of them is.
    """
    sizes = {name: size(value) for name, value in values.items()}
    total = sum(sizes.values())
    out = dict(values)
    for name in sorted(sizes, key=lambda n: sizes[n], reverse=True):
        if total <= budget:
            break
        marker = omitted(sizes[name])
        if len(marker) >= sizes[name]:
            break
        out[name] = marker
        total -= sizes[name] - len(marker)
    return out


def fit_record(record: Mapping[str, Any], limit: int = ITEM_LIMIT) -> dict[str, Any]:
    """A results item, storable and within ``limit`` bytes: too large, its largest ``fields`` values give way."""
    item = storable(dict(record))
    fields = item.get("fields")
    if isinstance(fields, dict):
        rest = item_size({k: v for k, v in item.items() if k != "fields"}) + len("fields") + 3
        names = sum(1 + len(name.encode("utf-8")) for name in fields)
        item["fields"] = fit(fields, limit - rest - names)
    return item


def fit_merge(values: Mapping[str, Any], source_url: str, used: int, name_overhead: int) -> dict[str, Any]:
    """Found fields to merge into a resolved item of ``used`` bytes, storable and fitted to what is left.

    Each field takes its value, its source URL beside it and its name twice
    (plus ``name_overhead`` bytes of attribute name prefixes).  A value that
    becomes None (NaN) counts as not found and is left out.
    """
    found = {name: value for name, value in storable(dict(values)).items() if value is not None}
    cost = sum(2 * len(name.encode("utf-8")) + name_overhead + size(source_url) for name in found)
    return fit(found, ITEM_LIMIT - used - cost)


def _finite(number: int | float | Decimal) -> bool:
    if isinstance(number, float):
        return math.isfinite(number)
    return not isinstance(number, Decimal) or number.is_finite()


def _valid_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text
