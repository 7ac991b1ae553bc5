"""The results table: one contract on DynamoDB (moto) and on local mode's SQLite, for what both can hold.

DynamoDB's own number limits (``tests/integration/test_storable_stores.py``)
are its alone; here, what a record of ordinary values reads back as, and
that a later record of a page replaces the earlier one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeResults

from crawlstack import aws
from crawlstack.local.sqlite import SqliteResults, StateDb

CRAWL = "results-port"


@dataclass
class Impl:
    results: Any
    read: Callable[[str], dict[str, Any]]  # a page's record, by fingerprint


@pytest.fixture(params=["moto", "sqlite", "fake"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Impl:
    if request.param == "fake":
        fake = FakeResults()
        return Impl(fake, lambda fp: fake.items[f"{CRAWL}#{fp}"])
    if request.param == "sqlite":
        local = SqliteResults(StateDb(tmp_path / "state.sqlite"))
        return Impl(local, lambda fp: next(r for r in local.scan_crawl(CRAWL) if r["fp"] == fp))
    names: aws.StackNames = request.getfixturevalue("stack_names")

    def read(fp: str) -> dict[str, Any]:
        item = aws.client("dynamodb").get_item(TableName=names.results, Key={"pk": {"S": f"{CRAWL}#{fp}"}})["Item"]
        found: dict[str, Any] = aws.unmarshal(item)
        found.pop("pk")
        return found

    return Impl(aws.ResultStore(names.results), read)


def record(fp: str, **fields: Any) -> dict[str, Any]:
    return {"mapping": "m", "url": f"http://a.test/{fp}", "fields": fields, "depth": 1, "crawl_id": CRAWL, "fp": fp}


def test_a_record_reads_back_with_its_values_made_storable(impl: Impl) -> None:
    impl.results.put(record("r1", title="Emma", n=3, tags=["a", "b"], nan=math.nan, text="\ud800 lone"))
    got = impl.read("r1")
    assert got["fields"] == {"title": "Emma", "n": 3, "tags": ["a", "b"], "nan": None, "text": "\ufffd lone"}
    assert (got["mapping"], got["url"], got["depth"]) == ("m", "http://a.test/r1", 1)


def test_a_pages_later_record_replaces_the_earlier(impl: Impl) -> None:
    impl.results.put(record("r2", title="first"))
    impl.results.put(record("r2", title="second"))
    assert impl.read("r2")["fields"] == {"title": "second"}
