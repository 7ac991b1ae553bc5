"""Record resolution on the in-memory stores: merging, completion, and what extract and dispatch do with it."""

from __future__ import annotations

from typing import Any

import pytest
from dispatching import build_dispatcher
from fakes import FakeBlobs, FakeClock, FakeCrawls, FakeHosts, FakeResolved, FakeResults, FakeUrls

from crawlstack import aws, settings, wiring
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import Link, Outbox
from crawlstack.extract import Extracted, Extractor
from crawlstack.fetch import http
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.messages import FrontierMessage
from crawlstack.ports import RobotsRecord
from crawlstack.records.resolution import RECORD_COMPLETE, CompletedRecords, ResolvedRecord, found, found_fields
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.urls import fingerprint


def xpath_field(name: str, expression: str) -> dict[str, Any]:
    return {
        "name": name,
        "processors": [{"type": "xpath", "parameters": {"expression": expression}}, {"type": "trim"}],
    }


# Pages of shop.example/items/ give a title and an isbn, whichever they hold.
ITEM = compile_mapping(
    "item.json",
    {
        "name": "item",
        "url_patterns": [{"type": "regex", "pattern": r"^http://shop\.example/items/"}],
        "fields": [xpath_field("title", "//h1/text()"), xpath_field("isbn", "//p[@class='isbn']/text()")],
    },
)


# --- the model ---------------------------------------------------------------------------
def test_complete_means_every_wanted_field_found_and_never_without_want() -> None:
    assert not ResolvedRecord("c", "r", (), {"title": "x"}).complete
    assert not ResolvedRecord("c", "r", ("title", "isbn"), {"title": "x"}).complete
    assert ResolvedRecord("c", "r", ("title", "isbn"), {"title": "x", "isbn": "1", "extra": 2}).complete


@pytest.mark.parametrize("value", [None, "", [], {}])
def test_empty_values_are_not_found(value: Any) -> None:
    assert not found(value)


@pytest.mark.parametrize("value", ["x", 0, False, 0.0, ["a"], {"k": "v"}])
def test_any_other_value_is_found(value: Any) -> None:
    assert found(value)


def test_found_fields_keeps_only_found_values() -> None:
    assert found_fields({"a": "x", "b": None, "c": "", "d": 0}) == {"a": "x", "d": 0}


def test_to_line_is_the_resolved_jsonl_shape() -> None:
    record = ResolvedRecord("c", "r", ("b", "a"), {"b": 2, "a": 1}, {"b": "u2", "a": "u1"})
    line = record.to_line()
    assert line == {"record_id": "r", "fields": {"a": 1, "b": 2}, "sources": {"a": "u1", "b": "u2"}, "complete": True}
    assert list(line) == ["record_id", "fields", "sources", "complete"]
    assert list(line["fields"]) == ["a", "b"]


def test_completed_records_are_bounded_least_recently_used() -> None:
    completed = CompletedRecords(size=2)
    completed.add("c", "r1")
    completed.add("c", "r2")
    assert ("c", "r1") in completed  # r1 is now the most recently used
    completed.add("c", "r3")
    assert ("c", "r2") not in completed
    assert ("c", "r1") in completed and ("c", "r3") in completed


# --- the store (the fake mirrors aws.ResolvedStore) ------------------------------------
def test_merge_first_value_wins_per_field_with_its_source() -> None:
    store = FakeResolved()
    first = store.merge("c", "r", ("title", "isbn"), {"title": "Emma"}, "http://a/1")
    assert (first.fields, first.sources, first.complete) == ({"title": "Emma"}, {"title": "http://a/1"}, False)
    second = store.merge("c", "r", ("title", "isbn"), {"title": "EMMA!", "isbn": "978"}, "http://b/2")
    assert second.fields == {"title": "Emma", "isbn": "978"}
    assert second.sources == {"title": "http://a/1", "isbn": "http://b/2"}
    assert second.complete
    # A redelivered page changes nothing.
    assert store.merge("c", "r", ("title", "isbn"), {"title": "EMMA!", "isbn": "978"}, "http://b/2") == second


def test_merge_without_fields_still_creates_the_record_and_want_is_the_first_pages() -> None:
    store = FakeResolved()
    empty = store.merge("c", "r", ("title",), {}, "http://a/1")
    assert (empty.fields, empty.want, empty.complete) == ({}, ("title",), False)
    assert store.merge("c", "r", ("other",), {"title": "x"}, "http://a/2").want == ("title",)
    assert set(store.get_many("c", ["r", "missing", "r"])) == {"r"}
    assert store.get_many("other-crawl", ["r"]) == {}


# --- extract -------------------------------------------------------------------------------
def item_html(title: str = "", isbn: str = "", links: tuple[str, ...] = ()) -> bytes:
    parts = [f"<h1>{title}</h1>" if title else "", f"<p class='isbn'>{isbn}</p>" if isbn else ""]
    parts += [f'<a href="{href}">{href}</a>' for href in links]
    return ("<html><body>" + "".join(parts) + "</body></html>").encode()


def exchange(url: str, body: bytes, **meta: Any) -> Exchange:
    metadata = {"crawl_id": "c", "depth": 0, "fp": fingerprint(url), "record_id": None, "want": [], **meta}
    return Exchange(url, "GET", [], 200, "OK", [("Content-Type", "text/html")], body, metadata=metadata)


class ExtractEnv:
    def __init__(self) -> None:
        self.crawls = FakeCrawls(CrawlConfig(crawl_id="c", max_depth=5, seed_hosts=frozenset({"shop.example"})))
        self.results = FakeResults()
        self.blobs = FakeBlobs()
        self.resolved = FakeResolved()
        self.extractor = Extractor(self.crawls, self.results, self.blobs, RuleSet((ITEM,)), resolved=self.resolved)
        self.runs = 0

    def run(self, *exchanges: Exchange) -> Extracted:
        self.runs += 1
        key = f"pages/dt=2024-01-02/{self.runs}.warc.gz"
        self.blobs.put(key, write_warc(list(exchanges)), "application/warc")
        return self.extractor.extract_object(self.blobs.bucket, key)

    def record(self, record_id: str) -> ResolvedRecord:
        return self.resolved.get_many("c", [record_id])[record_id]


WANT = ["title", "isbn"]


def test_a_page_merges_its_found_fields_and_follows_links_while_the_record_is_incomplete() -> None:
    env = ExtractEnv()
    url = "http://shop.example/items/1"
    out = env.run(exchange(url, item_html("Emma", links=("/items/2",)), record_id="r1", want=WANT))
    record = env.record("r1")
    assert (record.fields, record.sources, record.want) == ({"title": "Emma"}, {"title": url}, ("title", "isbn"))
    assert [(m.url, m.record_id, m.want) for m in out.outlinks] == [("http://shop.example/items/2", "r1", tuple(WANT))]
    # The page's own record keeps its shape, the field not found included.
    assert out.records[0]["fields"] == {"title": "Emma", "isbn": None}
    assert out.records[0]["record_id"] == "r1"


def test_once_complete_no_more_links_are_followed_for_the_record() -> None:
    env = ExtractEnv()
    env.run(exchange("http://shop.example/items/1", item_html("Emma", links=("/items/2",)), record_id="r1", want=WANT))
    done = env.run(
        exchange(
            "http://shop.example/items/2", item_html("Emma 2", "978", links=("/items/3",)), record_id="r1", want=WANT
        )
    )
    assert done.outlinks == []
    assert len(done.records) == 1  # the record is written as always
    record = env.record("r1")
    assert record.complete and record.fields == {"title": "Emma", "isbn": "978"}
    assert record.sources == {"title": "http://shop.example/items/1", "isbn": "http://shop.example/items/2"}
    # A later page of the record, mapped or not, follows nothing either, and costs no read.
    reads = env.resolved.reads()
    later = env.run(
        exchange("http://shop.example/other", item_html(links=("/x",)), record_id="r1", want=WANT),
        exchange("http://shop.example/items/9", item_html("Late", links=("/y",)), record_id="r1", want=WANT),
    )
    assert later.outlinks == [] and env.resolved.reads() == reads
    assert env.record("r1").fields["title"] == "Emma"


def test_links_of_a_record_completed_later_in_the_same_warc_are_dropped() -> None:
    env = ExtractEnv()
    out = env.run(
        exchange("http://shop.example/items/1", item_html("Emma", links=("/items/2",)), record_id="r1", want=WANT),
        exchange("http://shop.example/hub", item_html(links=("/items/3",)), record_id="r2", want=WANT),
        exchange("http://shop.example/items/4", item_html(isbn="978", links=("/items/5",)), record_id="r1", want=WANT),
    )
    assert [(m.url, m.record_id) for m in out.outlinks] == [("http://shop.example/items/3", "r2")]


def test_pages_without_record_id_or_want_are_followed_as_always() -> None:
    env = ExtractEnv()
    plain = env.run(exchange("http://shop.example/items/1", item_html("Emma", "978", links=("/a",))))
    assert [m.url for m in plain.outlinks] == ["http://shop.example/a"]
    assert env.resolved.calls == []
    # Without want a record never completes: everything found is merged and links are followed.
    out = env.run(exchange("http://shop.example/items/2", item_html("Emma", "978", links=("/b",)), record_id="r"))
    assert [m.url for m in out.outlinks] == ["http://shop.example/b"]
    record = env.record("r")
    assert record.fields == {"title": "Emma", "isbn": "978"} and not record.complete


def test_a_mapped_page_that_found_nothing_still_creates_the_record() -> None:
    env = ExtractEnv()
    env.run(exchange("http://shop.example/items/1", item_html(links=("/a",)), record_id="r1", want=WANT))
    assert env.record("r1") == ResolvedRecord("c", "r1", ("title", "isbn"))


def test_a_redelivered_warc_merges_to_the_same_record() -> None:
    env = ExtractEnv()
    page = exchange("http://shop.example/items/1", item_html("Emma"), record_id="r1", want=WANT)
    env.run(page)
    before = env.record("r1")
    env.run(page)
    assert env.record("r1") == before


def test_without_a_store_nothing_is_merged() -> None:
    env = ExtractEnv()
    extractor = Extractor(env.crawls, env.results, env.blobs, RuleSet((ITEM,)))
    env.blobs.put("pages/x.warc.gz", write_warc([exchange("http://shop.example/items/1", item_html("E", "9"))]), "")
    assert extractor.extract_object(env.blobs.bucket, "pages/x.warc.gz").records


# --- dispatch --------------------------------------------------------------------------------
class DispatchEnv:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.crawls = FakeCrawls(CrawlConfig(crawl_id="c", delay=1.0, max_depth=3))
        self.urls = FakeUrls()
        self.hosts = FakeHosts(self.clock)
        self.resolved = FakeResolved()
        self.dispatcher = build_dispatcher(self.crawls, self.urls, self.hosts, clock=self.clock, resolved=self.resolved)
        self.hosts.put_robots(RobotsRecord.from_fetch("http://example.com", 404, b""))
        self.sent = 0

    def batch(self, *messages: FrontierMessage) -> list[tuple[str, str, int]]:
        """Dispatch a batch as the handler does; (action, reason, fetch tasks gathered) per message."""
        links = []
        for msg in messages:
            self.sent += 1  # every message has its own id, as in SQS
            links.append(Link(msg, f"m{self.sent}"))
        self.dispatcher.prepare(links)
        out = []
        for link in links:
            outbox = Outbox()
            decision = self.dispatcher.dispatch(link, outbox, message_id=link.message_id)
            out.append((decision.action, decision.reason, len(outbox.runs)))
        return out

    def complete(self, record_id: str) -> None:
        self.resolved.merge("c", record_id, ("title",), {"title": "x"}, "http://example.com/")


def msg(path: str, record_id: str | None = "r1", want: tuple[str, ...] = ("title",), depth: int = 1) -> FrontierMessage:
    return FrontierMessage(url="http://example.com" + path, depth=depth, crawl_id="c", record_id=record_id, want=want)


def reads(env: DispatchEnv) -> list[tuple[Any, ...]]:
    return [call for call in env.resolved.calls if call[0] == "get_many"]


@pytest.fixture
def denv(monkeypatch: pytest.MonkeyPatch) -> DispatchEnv:
    def no_network(origin: str, user_agent: str, guard: http.AddressGuard) -> http.FetchResult:
        raise AssertionError(f"unexpected robots.txt fetch for {origin}")

    monkeypatch.setattr(http, "fetch_robots", no_network)
    env = DispatchEnv()
    env.batch(msg("/", record_id=None, depth=0))  # the seed host
    env.resolved.calls.clear()
    return env


def test_a_message_of_a_complete_record_is_skipped_and_logged_without_a_claim(denv: DispatchEnv) -> None:
    denv.complete("r1")
    assert denv.batch(msg("/a")) == [("skipped", RECORD_COMPLETE, 0)]
    item = denv.urls.item("c", fingerprint("http://example.com/a"))
    assert (item["state"], item["reason"], item["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    assert "claimed_by" not in item
    # Its redelivery is skipped again and changes nothing.
    assert denv.batch(msg("/a")) == [("skipped", RECORD_COMPLETE, 0)]
    assert denv.urls.item("c", fingerprint("http://example.com/a")) == item


def test_a_url_skipped_for_a_complete_record_is_still_fetched_for_whoever_reaches_it_next(denv: DispatchEnv) -> None:
    denv.complete("r1")
    assert denv.batch(msg("/new"))[0][:2] == ("skipped", RECORD_COMPLETE)
    # A seed without record_id reaches the same page: it is queued for fetch, not deduped away.
    assert denv.batch(msg("/new", record_id=None)) == [("queued", "", 1)]
    item = denv.urls.item("c", fingerprint("http://example.com/new"))
    assert item["state"] == "queued" and "claimable" not in item and "record_id" not in item
    # From then on the URL is claimed as always: another record is a dedupe hit, the complete one a skip.
    assert denv.batch(msg("/new", record_id="r2"))[0][0] == "deduped"
    assert denv.batch(msg("/new"))[0][:2] == ("skipped", RECORD_COMPLETE)
    assert denv.urls.item("c", fingerprint("http://example.com/new"))["state"] == "queued"


def test_a_complete_records_skip_never_overwrites_another_claim(denv: DispatchEnv) -> None:
    assert denv.batch(msg("/x", record_id="r2"))[0][0] == "queued"
    before = denv.urls.item("c", fingerprint("http://example.com/x"))
    assert before["record_id"] == "r2"  # the claim names its record, for fetch's skip
    denv.complete("r1")
    assert denv.batch(msg("/x"))[0][:2] == ("skipped", RECORD_COMPLETE)
    assert denv.urls.item("c", fingerprint("http://example.com/x")) == before


def test_a_complete_record_is_skipped_before_robots_txt_is_looked_up(denv: DispatchEnv) -> None:
    denv.complete("r1")
    seed = FrontierMessage(url="http://new.example/", depth=0, crawl_id="c", record_id="r1", want=("title",))
    assert denv.batch(seed) == [("skipped", RECORD_COMPLETE, 0)]
    assert ("get_robots", "http://new.example") not in denv.hosts.calls
    # An incomplete record's link to the same origin does look it up (and goes on without it).
    other = FrontierMessage(url="http://new.example/", depth=0, crawl_id="c", record_id="r2", want=("title",))
    assert denv.batch(other) == [("queued", "", 1)]
    assert ("get_robots", "http://new.example") in denv.hosts.calls


def test_one_read_per_batch_and_complete_records_are_remembered(denv: DispatchEnv) -> None:
    denv.complete("r1")
    result = denv.batch(msg("/a"), msg("/b", record_id="r2"), msg("/c"), msg("/d", record_id="r2"))
    assert [action for action, _, _ in result] == ["skipped", "queued", "skipped", "queued"]
    assert reads(denv) == [("get_many", "c", ("r1", "r2"))]
    # r1 is known complete: the next batch reads only r2, which is still incomplete.
    denv.batch(msg("/e"), msg("/f", record_id="r2"))
    assert reads(denv)[-1] == ("get_many", "c", ("r2",))
    # Once r2 completes, the next batch's read sees it.
    denv.complete("r2")
    assert denv.batch(msg("/g", record_id="r2"))[0][:2] == ("skipped", RECORD_COMPLETE)
    count = denv.resolved.reads()
    denv.batch(msg("/h"), msg("/i", record_id="r2"))
    assert denv.resolved.reads() == count


def test_messages_without_record_id_or_want_cost_no_read(denv: DispatchEnv) -> None:
    denv.complete("r1")
    result = denv.batch(msg("/a", record_id=None), msg("/b", want=()))
    assert [action for action, _, _ in result] == ["queued", "queued"]
    assert reads(denv) == []


def test_an_unprepared_message_is_read_alone_and_an_incomplete_answer_is_not_kept(denv: DispatchEnv) -> None:
    outbox = Outbox()
    assert denv.dispatcher.dispatch(msg("/a"), outbox).action == "queued"
    denv.complete("r1")
    assert denv.dispatcher.dispatch(msg("/b"), Outbox()).reason == RECORD_COMPLETE
    assert denv.resolved.reads() == 2


def test_dispatch_and_the_host_runs_of_a_container_share_one_memory_of_complete_records() -> None:
    names = {var: f"name-of-{var}" for var in [*settings.ENV_TABLE.values(), *settings.ENV_QUEUE_URL.values()]}
    stores = wiring.Stores.on_aws(aws.StackNames.from_env({**names, settings.ENV_BUCKET: "pages"}))
    svc = wiring.Services(RuleSet(), stores)
    records = svc.dispatcher.record_complete
    assert records is not None
    assert records.completed is svc.completed and svc.runner.completed is svc.completed
    assert records.resolved is svc.runner.resolved is svc.resolved
