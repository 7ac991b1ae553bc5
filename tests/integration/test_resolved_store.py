"""The resolved table on the embedded emulator (moto): ``aws.ResolvedStore`` and the dispatch handler's skip."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeResolved
from test_handlers import sqs_event

from crawlstack import aws, settings
from crawlstack.config import CrawlConfig
from crawlstack.local.pump import LambdaContext
from crawlstack.local.sqlite import SqliteResolved, StateDb
from crawlstack.messages import FrontierMessage
from crawlstack.records.resolution import RECORD_COMPLETE
from crawlstack.urls import fingerprint
from functions.dispatch import handler as dispatch

CRAWL = "itest"


@pytest.fixture
def dynamo(stack: dict[str, str], stack_names: aws.StackNames) -> aws.ResolvedStore:
    return aws.ResolvedStore(stack_names.resolved)


@pytest.fixture(params=["moto", "sqlite", "fake"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The merge's contract on DynamoDB (the embedded emulator), on local mode's SQLite and the unit tests' fake."""
    if request.param == "sqlite":
        return SqliteResolved(StateDb(tmp_path / "state.sqlite"))
    if request.param == "fake":
        return FakeResolved()
    return request.getfixturevalue("dynamo")


def raw_item(record_id: str, crawl_id: str = CRAWL) -> dict[str, Any]:
    resp = aws.client("dynamodb").get_item(
        TableName=settings.TABLES["resolved"].name, Key={"pk": {"S": f"{crawl_id}#{record_id}"}}, ConsistentRead=True
    )
    return dict(resp["Item"])


class Recording:
    """A DynamoDB client that records calls and can hold back keys of BatchGetItem once."""

    def __init__(self, real: Any, hold_back: int = 0) -> None:
        self.real = real
        self.hold_back = hold_back
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def update_item(self, **kwargs: Any) -> Any:
        self.calls.append(("update_item", kwargs))
        return self.real.update_item(**kwargs)

    def batch_get_item(self, **kwargs: Any) -> Any:
        self.calls.append(("batch_get_item", kwargs))
        (table, request), *_ = kwargs["RequestItems"].items()
        if self.hold_back and len(request["Keys"]) > self.hold_back:
            # As DynamoDB does under throttling: some keys come back unprocessed.
            held, asked = request["Keys"][: self.hold_back], request["Keys"][self.hold_back :]
            self.hold_back = 0
            resp = self.real.batch_get_item(RequestItems={table: {**request, "Keys": asked}})
            resp["UnprocessedKeys"] = {table: {**request, "Keys": held}}
            return resp
        return self.real.batch_get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def recording(monkeypatch: pytest.MonkeyPatch, hold_back: int = 0) -> Recording:
    rec = Recording(aws.client("dynamodb"), hold_back)
    real_client = aws.ENVIRONMENT.client
    monkeypatch.setattr(
        aws.ENVIRONMENT, "client", lambda service: rec if service == "dynamodb" else real_client(service)
    )
    return rec


# --- merge ---------------------------------------------------------------------------------
def test_the_first_value_of_a_field_wins_with_its_source_and_a_re_merge_changes_nothing(store: Any) -> None:
    want = ("title", "isbn")
    first = store.merge(CRAWL, "r1", want, {"title": "Emma"}, "http://a/1")
    assert (first.fields, first.sources, first.want, first.complete) == (
        {"title": "Emma"},
        {"title": "http://a/1"},
        want,
        False,
    )
    second = store.merge(CRAWL, "r1", want, {"title": "Other", "isbn": "978"}, "http://b/2")
    assert second.fields == {"title": "Emma", "isbn": "978"} and second.complete
    assert second.sources == {"title": "http://a/1", "isbn": "http://b/2"}
    assert store.merge(CRAWL, "r1", want, {"title": "Other", "isbn": "978"}, "http://b/2") == second


def test_merge_stores_flat_fields_and_marks_a_complete_record_on_dynamodb(dynamo: aws.ResolvedStore) -> None:
    want = ("title", "isbn")
    dynamo.merge(CRAWL, "r1", want, {"title": "Emma"}, "http://a/1")
    assert "complete" not in raw_item("r1")  # not until every wanted field is found
    dynamo.merge(CRAWL, "r1", want, {"title": "Other", "isbn": "978"}, "http://b/2")
    item = raw_item("r1")
    assert item["field.title"] == {"S": "Emma"} and item["source.isbn"] == {"S": "http://b/2"}
    assert item["complete"] == {"BOOL": True}
    assert (item["crawl_id"], item["record_id"]) == ({"S": CRAWL}, {"S": "r1"})
    # A redelivered page: the same item.
    dynamo.merge(CRAWL, "r1", want, {"title": "Other", "isbn": "978"}, "http://b/2")
    assert raw_item("r1") == item


def test_a_page_with_no_fields_creates_the_record_and_want_is_kept_from_the_first(store: Any) -> None:
    empty = store.merge(CRAWL, "r1", ("title",), {}, "http://a/1")
    assert (empty.fields, empty.sources, empty.want, empty.complete) == ({}, {}, ("title",), False)
    assert store.merge(CRAWL, "r1", (), {"x": 1}, "http://a/2").want == ("title",)
    no_want = store.merge(CRAWL, "r2", (), {"title": "t"}, "http://a/3")
    assert no_want.want == () and not no_want.complete


def test_values_and_odd_field_names_round_trip(store: Any) -> None:
    fields = {
        "price": 9.99,
        "count": 3,
        "in stock": True,
        "tags": ["a", "b"],
        "dims": {"w": 1.5, "h": 2},
        "a.b": "dotted",
        "size": "reserved word",
        "#x :y": "placeholder-like",
    }
    record = store.merge(CRAWL, "r1", tuple(fields), fields, "http://a/1")
    assert record.fields == fields and record.complete
    assert set(record.sources) == set(fields)
    assert store.get_many(CRAWL, ["r1"])["r1"] == record


def test_many_fields_take_several_updates_each_within_the_expression_limit(
    dynamo: aws.ResolvedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = dynamo
    fields = {f"field_number_{i:03d}": f"value {i}" for i in range(130)}
    rec = recording(monkeypatch)
    record = store.merge(CRAWL, "r1", tuple(fields), fields, "http://a/1")
    assert record.fields == fields and record.complete
    updates = [kwargs for name, kwargs in rec.calls if name == "update_item"]
    merges = [u for u in updates if "if_not_exists" in u["UpdateExpression"]]
    assert len(merges) == 3
    assert all(len(u["UpdateExpression"]) < 4096 for u in merges)


def test_concurrent_merges_keep_one_value_and_its_own_source(store: Any) -> None:
    barrier = threading.Barrier(8)

    def merge(i: int) -> None:
        barrier.wait()
        store.merge(CRAWL, "r1", ("title",), {"title": f"title {i}", f"own_{i}": i}, f"http://a/{i}")

    threads = [threading.Thread(target=merge, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    record = store.get_many(CRAWL, ["r1"])["r1"]
    winner = record.fields["title"].split()[-1]
    assert record.sources["title"] == f"http://a/{winner}"
    assert all(record.fields[f"own_{i}"] == i and record.sources[f"own_{i}"] == f"http://a/{i}" for i in range(8))


# --- reads ------------------------------------------------------------------------------------
def test_get_many_reads_in_batches_of_100_and_retries_unprocessed_keys(
    dynamo: aws.ResolvedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = dynamo
    for i in range(0, 150, 2):
        store.merge(CRAWL, f"r{i}", ("n",), {"n": i}, f"http://a/{i}")
    store.merge("other", "r1", ("n",), {"n": -1}, "http://other/")
    rec = recording(monkeypatch, hold_back=30)
    found = store.get_many(CRAWL, [f"r{i}" for i in range(150)] + ["r0"])
    assert set(found) == {f"r{i}" for i in range(0, 150, 2)}
    assert all(found[f"r{i}"].fields == {"n": i} and found[f"r{i}"].complete for i in range(0, 150, 2))
    requests = [kwargs["RequestItems"] for name, kwargs in rec.calls if name == "batch_get_item"]
    sizes = [len(r[settings.TABLES["resolved"].name]["Keys"]) for r in requests]
    assert sizes == [100, 30, 50]  # 30 held back once, asked again
    assert store.get_many(CRAWL, []) == {}


def test_scan_crawl_lists_one_crawls_records(store: Any) -> None:
    store.merge(CRAWL, "r1", ("a",), {"a": 1}, "http://a/")
    store.merge(CRAWL, "r2", ("a",), {}, "http://a/")
    store.merge("other", "r3", ("a",), {"a": 1}, "http://a/")
    assert sorted((r.record_id, r.complete) for r in store.scan_crawl(CRAWL)) == [("r1", True), ("r2", False)]


# --- the dispatch handler ----------------------------------------------------------------
def frontier_event(names: dict[str, str], *messages: FrontierMessage) -> dict[str, Any]:
    """The messages, and one body that is not JSON (it must fail alone)."""
    return sqs_event(names, "frontier", *(m.to_json() for m in messages), "{not json")


def test_dispatch_skips_a_complete_records_messages_with_one_read(
    stack: dict[str, str], dynamo: aws.ResolvedStore, monkeypatch: pytest.MonkeyPatch, stack_names: aws.StackNames
) -> None:
    store = dynamo
    # The host does not exist: a robots.txt fetch or a fetch task would show.
    aws.CrawlStore(stack_names.crawls).put(
        CrawlConfig(crawl_id=CRAWL, delay=0.0, seed_hosts=frozenset({"shop.invalid"}))
    )
    store.merge(CRAWL, "r1", ("title",), {"title": "Emma"}, "http://shop.invalid/1")
    rec = recording(monkeypatch)
    urls = [f"http://shop.invalid/{n}" for n in ("a", "b")]
    messages = [FrontierMessage(url=u, depth=1, crawl_id=CRAWL, record_id="r1", want=("title",)) for u in urls]
    spec = settings.FUNCTIONS["dispatch"]
    context = LambdaContext("crawlstack-dispatch", spec.memory_mb, spec.timeout_seconds)
    assert dispatch.handler(frontier_event(stack, *messages), context) == {"batchItemFailures": []}

    assert [name for name, _ in rec.calls].count("batch_get_item") == 1
    for url in urls:
        assert aws.UrlStore(stack_names.urls).state(CRAWL, fingerprint(url)) == "skipped"
    items = {i["url"]: i for i in aws.UrlStore(stack_names.urls).scan_crawl(CRAWL)}
    assert {i["reason"] for i in items.values()} == {RECORD_COMPLETE}
    fetch_url = stack[settings.ENV_QUEUE_URL["fetch"]]
    assert aws.client("sqs").receive_message(QueueUrl=fetch_url, WaitTimeSeconds=0).get("Messages", []) == []
    assert aws.HostStore(stack_names.hosts).get_robots("http://shop.invalid") is None
    # The container remembers the record complete: the next batch reads nothing.
    more = FrontierMessage(url="http://shop.invalid/c", depth=1, crawl_id=CRAWL, record_id="r1", want=("title",))
    dispatch.handler(frontier_event(stack, more), context)
    assert [name for name, _ in rec.calls].count("batch_get_item") == 1
    assert aws.UrlStore(stack_names.urls).state(CRAWL, fingerprint(more.url)) == "skipped"
