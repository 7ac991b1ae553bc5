"""Local crawls whose pages give values DynamoDB cannot hold as they are: every record kept, the crawl a success."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from webs import Crawl, host_pattern, read_jsonl

from crawlstack import aws, settings
from crawlstack.demo.server import LoopbackWeb, Response
from crawlstack.records.storable import omitted, size

A = "127.0.0.2"
HUGE = "x" * 720_000
JSON = "application/json"


def jsonpath(name: str, expression: str) -> dict[str, Any]:
    return {"name": name, "processors": [{"type": "jsonpath", "parameters": {"expression": expression}}]}


# Field names out of alphabetical order: records.jsonl keeps the mapping's.
API = {
    "name": "api",
    "url_patterns": [{"type": "regex", "pattern": host_pattern(A, r"/api/.*")}],
    "fields": [jsonpath("title", "$.title"), jsonpath("body", "$.body"), jsonpath("amount", "$.amount")],
}


def test_a_huge_field_and_a_number_out_of_range_in_one_batch_keep_every_record(
    crawl: Crawl, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = {
        "/api/big.json": {"title": "big", "body": HUGE, "amount": 1},
        "/api/far.json": {"title": "far", "body": "b", "amount": 1e300},
        "/api/plain.json": {"title": "plain", "body": "p", "amount": 2.5},
    }
    web.add_host(A, {path: Response(json.dumps(data), content_type=JSON) for path, data in pages.items()})
    # What the results table holds, read back as each record is put.
    stored: dict[str, dict[str, Any]] = {}
    real_put = aws.ResultStore.put

    def put(self: aws.ResultStore, record: dict[str, Any]) -> None:
        real_put(self, record)
        key = {"pk": {"S": f"{record['crawl_id']}#{record['fp']}"}}
        item = self.connection.client("dynamodb").get_item(TableName=self.name, Key=key, ConsistentRead=True)["Item"]
        stored[record["url"]] = aws.unmarshal(item)["fields"]

    monkeypatch.setattr(aws.ResultStore, "put", put)
    urls = [web.url(A, path) for path in pages]
    # On the AWS adapters (moto): DynamoDB's item limit is what this is about.
    result = crawl(*urls, rules=[API], delay=0, max_depth=0, extra=["--emulate-aws"])  # exit 0, no dead letters

    assert result.summary is not None and result.summary["dead_letter"] == dict.fromkeys(settings.QUEUES, 0)
    assert result.summary["records"] == 3 and not result.summary["handler_errors"]
    # The embedded emulator's own count: each page is at least its URL's claim, start and outcome.
    emulated = result.summary["emulator"]
    assert emulated["calls"] >= 3 * 3 and emulated["seconds"] > 0
    assert len(result.warc_files) == 1, "the three pages were meant to share one fetch batch, so one extract batch"
    by_url = {r["url"]: r for r in result.records}
    assert {url: by_url[url]["fields"] for url in urls} == dict(zip(urls, pages.values(), strict=True))
    assert all(list(r["fields"]) == ["title", "body", "amount"] for r in result.records)
    assert list(result.records[0]) == ["mapping", "url", "fields", "numbers", "depth", "crawl_id", "fetched_at"]
    assert stored == {
        urls[0]: {"title": "big", "body": omitted(size(HUGE)), "amount": 1},
        urls[1]: {"title": "far", "body": "b", "amount": "1e+300"},
        urls[2]: {"title": "plain", "body": "p", "amount": 2.5},
    }


@pytest.mark.parametrize("backend", [["--emulate-aws"], []], ids=["moto", "local"])
def test_a_resolved_record_with_a_huge_field_is_whole_in_resolved_jsonl(
    crawl: Crawl, web: LoopbackWeb, tmp_path: Path, backend: list[str]
) -> None:
    body = json.dumps({"title": "big", "body": HUGE, "amount": 1e300})
    web.add_host(A, {"/api/big.json": Response(body, content_type=JSON)})
    seeds = tmp_path / "seeds.jsonl"
    seed = {"url": web.url(A, "/api/big.json"), "record_id": "r1", "want": ["title", "body", "amount"]}
    seeds.write_text(json.dumps(seed) + "\n", encoding="utf-8")
    result = crawl(rules=[API], delay=0, max_depth=0, seeds_file=seeds, extra=backend)
    # DynamoDB's resolved table holds a marker; resolved.jsonl has the value from the page's record.
    [line] = read_jsonl(result.out / "resolved.jsonl")
    # DynamoDB holds no number past 1e125, so the AWS adapter keeps it as text; SQLite keeps the number.
    amount = "1e+300" if backend else 1e300
    assert line["fields"] == {"amount": amount, "body": HUGE, "title": "big"} and line["complete"]
