"""Extract with values a page can hold but DynamoDB or strict JSON cannot: every record is kept."""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

from fakes import FakeBlobs, FakeCrawls, FakeResolved, FakeResults

from crawlstack.config import CrawlConfig
from crawlstack.extract import Extractor
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.records.storable import OMITTED_PREFIX, omitted, size
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.urls import fingerprint

KEY = "pages/dt=2024-01-02/abc.warc.gz"
HUGE = "x" * 720_000


def jsonpath(name: str, expression: str) -> dict[str, Any]:
    return {"name": name, "processors": [{"type": "jsonpath", "parameters": {"expression": expression}}]}


# Field names out of alphabetical order: records keep the mapping's order.
API = compile_mapping(
    "api.json",
    {
        "name": "api",
        "url_patterns": [{"type": "regex", "pattern": r"^http://api\.example/"}],
        "fields": [jsonpath("title", "$.title"), jsonpath("body", "$.body"), jsonpath("amount", "$.amount")],
    },
)


class Stub:
    """A mapping whose fields are given, whatever the page (values the rules engine may not give itself)."""

    name = "stub"
    url_parsers = ()
    items = None

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def extract(self, page: Any) -> dict[str, Any]:
        return dict(self.fields)

    def extract_items(self, page: Any) -> list[dict[str, Any]]:
        return [self.extract(page)]

    def match(self, url: str, content_type: str | None = None) -> Stub:
        return self


def exchange(url: str, body: bytes, **meta: Any) -> Exchange:
    metadata = {"crawl_id": "c", "depth": 0, "fp": fingerprint(url), "fetched_at": 1_700_000_000.5, **meta}
    return Exchange(url, "GET", [], 200, "OK", [("Content-Type", "application/json")], body, metadata=metadata)


def run(rules: Any, *exchanges: Exchange) -> tuple[list[str], FakeResults, FakeResolved, Any]:
    blobs, results, resolved = FakeBlobs(), FakeResults(), FakeResolved()
    config = CrawlConfig(crawl_id="c", max_depth=0, seed_hosts=frozenset({"api.example"}))
    extractor = Extractor(FakeCrawls(config), results, blobs, rules, resolved=resolved)
    blobs.put(KEY, write_warc(list(exchanges)), "application/warc")
    out = extractor.extract_object(blobs.bucket, KEY)
    lines = gzip.decompress(blobs.get(out.records_key)).decode("utf-8").splitlines()
    return lines, results, resolved, out


def test_a_huge_field_and_a_number_dynamodb_cannot_hold_keep_their_records() -> None:
    big = json.dumps({"title": "big", "body": HUGE, "amount": 1}).encode()
    far = json.dumps({"title": "far", "body": "b", "amount": 1e300}).encode()
    lines, results, _, out = run(
        RuleSet((API,)), exchange("http://api.example/big", big), exchange("http://api.example/far", far)
    )
    # The S3 records object keeps both records whole, fields in mapping order.
    parsed = [json.loads(line) for line in lines]
    assert [p["fields"] for p in parsed] == [
        {"title": "big", "body": HUGE, "amount": 1},
        {"title": "far", "body": "b", "amount": 1e300},
    ]
    assert all(list(p["fields"]) == ["title", "body", "amount"] for p in parsed)
    assert list(parsed[0]) == ["mapping", "url", "fields", "numbers", "depth", "crawl_id", "fp", "fetched_at"]
    # Numbers as numbers beside the fields, for queries that compare them.
    assert [p["numbers"] for p in parsed] == [{"amount": 1}, {"amount": 1e300}]
    # The results table has both: the huge value as a marker, the number as text.
    stored = {item["url"]: item["fields"] for item in results.items.values()}
    assert stored["http://api.example/big"] == {"title": "big", "body": omitted(size(HUGE)), "amount": 1}
    assert stored["http://api.example/far"] == {"title": "far", "body": "b", "amount": "1e+300"}
    assert len(out.records) == 2


def test_nan_infinities_and_lone_surrogates_are_strict_json_in_the_records_object() -> None:
    fields = {"z": math.nan, "a": [math.inf, -math.inf, 1.5], "m": {"s": "\ud800!"}}
    lines, results, _, out = run(Stub(fields), exchange("http://api.example/x", b"{}"))
    [line] = lines
    parsed = json.loads(line, parse_constant=refuse)
    assert parsed["fields"] == {"z": None, "a": [None, None, 1.5], "m": {"s": "\ufffd!"}}
    assert list(parsed["fields"]) == ["z", "a", "m"]
    [item] = results.items.values()
    assert item["fields"] == parsed["fields"]
    assert out.records[0]["fields"] == parsed["fields"]


def test_a_resolved_record_gets_a_marker_for_a_value_too_large_and_nan_is_not_found() -> None:
    page = exchange("http://api.example/x", b"{}", record_id="r1", want=["body", "z", "n"])
    _, _, resolved, _ = run(Stub({"body": HUGE, "z": math.nan, "n": 1e300}), page)
    [record] = resolved.scan_crawl("c")
    assert record.fields == {"body": omitted(size(HUGE)), "n": "1e+300"}
    assert record.fields["body"].startswith(OMITTED_PREFIX) and not record.complete


def refuse(constant: str) -> Any:
    raise AssertionError(f"not strict JSON: {constant}")
