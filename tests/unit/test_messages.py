"""Frontier messages and fetch tasks: parsing, validation and round trips."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace

import pytest

from crawlstack import settings
from crawlstack.messages import CheckRef, FetchTask, FrontierMessage, InvalidMessage, frontier_messages, pack_links
from crawlstack.runs import bundles


def test_minimal_frontier_message_gets_defaults() -> None:
    msg = FrontierMessage.from_json('{"url": "  http://example.com/  "}')
    assert msg == FrontierMessage(url="http://example.com/", depth=0, crawl_id=settings.DEFAULT_CRAWL_ID)
    assert FrontierMessage.from_json('{"url": "http://e.com/"}', default_crawl_id="c9").crawl_id == "c9"


def test_frontier_message_round_trip() -> None:
    msg = FrontierMessage(
        url="http://example.com/a",
        depth=3,
        crawl_id="c1",
        referrer="http://example.com/",
        record_id="r-1",
        want=("title", "price"),
        hops=2,
        via="book",
    )
    assert FrontierMessage.from_json(msg.to_json()) == msg


def test_frontier_message_json_leaves_out_empty_fields() -> None:
    data = json.loads(FrontierMessage(url="http://e.com/", crawl_id="c").to_json())
    assert data == {"url": "http://e.com/", "depth": 0, "crawl_id": "c"}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "not JSON"),
        ("", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('"http://e.com/"', "not a JSON object"),
        ("{}", "'url' is missing"),
        ('{"url": ""}', "'url' is missing"),
        ('{"url": "   "}', "'url' is missing"),
        ('{"url": 5}', "'url' is missing or not a string"),
        ('{"url": "http://e.com/", "depth": -1}', "'depth' must be a non-negative integer"),
        ('{"url": "http://e.com/", "depth": "1"}', "'depth' must be a non-negative integer"),
        ('{"url": "http://e.com/", "depth": true}', "'depth' must be a non-negative integer"),
        ('{"url": "http://e.com/", "depth": 1.5}', "'depth' must be a non-negative integer"),
        ('{"url": "http://e.com/", "hops": -2}', "'hops' must be a non-negative integer"),
        ('{"url": "http://e.com/", "want": "title"}', "'want' must be a list"),
        ('{"url": "http://e.com/", "want": [1]}', "'want' must be a list"),
        ('{"url": "http://e.com/", "crawl_id": 7}', "'crawl_id' must be a string"),
        ('{"url": "http://e.com/", "referrer": []}', "'referrer' must be a string"),
        ('{"url": "http://e.com/", "record_id": {}}', "'record_id' must be a string"),
        ('{"url": "http://e.com/", "via": 1}', "'via' must be a string"),
    ],
)
def test_invalid_frontier_messages(body: str, reason: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        FrontierMessage.from_json(body)
    assert reason in str(info.value)


def test_from_json_accepts_none_body_as_invalid() -> None:
    with pytest.raises(InvalidMessage):
        FrontierMessage.from_json(None)  # type: ignore[arg-type]


def _task(**overrides: object) -> FetchTask:
    base: dict[str, object] = {
        "url": "http://example.com/a",
        "fp": "f" * 32,
        "host": "example.com",
        "depth": 1,
        "crawl_id": "c1",
        "not_before": 1_700_000_000.25,
        "window": 2,
        "hops": 1,
        "referrer": "http://example.com/",
        "record_id": "r-1",
        "want": ("title",),
    }
    base.update(overrides)
    return FetchTask(**base)  # type: ignore[arg-type]


def test_fetch_task_round_trip() -> None:
    task = _task()
    assert FetchTask.from_json(task.to_json()) == task
    plain = _task(referrer=None, record_id=None, want=())
    assert FetchTask.from_json(plain.to_json()) == plain


def test_a_task_written_with_the_retired_delay_still_reads() -> None:
    # A deployed queue or backlog may hold tasks written before ``delay`` was dropped.
    task = _task()
    old = {**json.loads(task.to_json()), "delay": 1.5}
    assert "delay" not in json.loads(task.to_json())
    assert FetchTask.from_json(json.dumps(old)) == task
    doc = {"n": 2, "s": {k: v for k, v in old.items() if k != "url"}, "c": {"url": [task.url, task.url + "b"]}}
    blob = zlib.compress(json.dumps(doc).encode())
    assert bundles.decode(blob) == (task, replace(task, url=task.url + "b"))


@pytest.mark.parametrize("body", ["nope", "null", "[]", "{}", '{"url": "http://e.com/"}', '{"url": "x", "bogus": 1}'])
def test_bad_fetch_task(body: str) -> None:
    with pytest.raises(InvalidMessage, match="bad fetch task"):
        FetchTask.from_json(body)


def test_fetch_task_metadata() -> None:
    assert _task().metadata() == {
        "crawl_id": "c1",
        "depth": 1,
        "fp": "f" * 32,
        "referrer": "http://example.com/",
        "record_id": "r-1",
        "want": ["title"],
    }


def test_links_of_a_page_travel_as_one_bundle_and_come_back_whole() -> None:
    page = [FrontierMessage(url=f"http://e.com/{i}", depth=2, crawl_id="c", referrer="http://e.com/") for i in range(5)]
    other = FrontierMessage(url="http://e.com/x", depth=2, crawl_id="c", referrer="http://e.com/", via="books")
    bodies = pack_links([*page, other])
    assert len(bodies) == 2
    assert json.loads(bodies[0])["urls"] == [m.url for m in page]
    assert "urls" not in json.loads(bodies[1])  # a lone link is a plain message
    assert [m for body in bodies for m in frontier_messages(body)] == [*page, other]


def test_bundles_hold_at_most_the_configured_number_of_links() -> None:
    links = [FrontierMessage(url=f"http://e.com/{i}", depth=1, crawl_id="c") for i in range(7)]
    bodies = pack_links(links, per_message=3)
    assert [len(frontier_messages(b)) for b in bodies] == [3, 3, 1]
    assert [m.url for b in bodies for m in frontier_messages(b)] == [m.url for m in links]


@pytest.mark.parametrize(
    "body",
    [
        '{"urls": []}',
        '{"urls": "http://e.com/"}',
        '{"urls": ["http://e.com/", 3]}',
        '{"urls": ["http://e.com/"], "url": "x"}',
        '{"urls": ["http://e.com/"], "depth": -1}',
    ],
)
def test_a_bad_bundle_is_an_invalid_message(body: str) -> None:
    with pytest.raises(InvalidMessage):
        frontier_messages(body)


def test_a_canonical_link_says_so_once_per_bundle_and_older_messages_read_as_before() -> None:
    links = [FrontierMessage(url=f"http://h.example/{i}", depth=1, crawl_id="c", canonical=True) for i in range(2)]
    [body] = pack_links(links)
    assert body.count('"canonical":true') == 1
    assert frontier_messages(body) == links
    seed = FrontierMessage(url="http://h.example/", crawl_id="c")
    assert "canonical" not in seed.to_json() and frontier_messages(seed.to_json()) == [seed]
    # A bundle sent before the flag existed: its links are canonicalised in dispatch, as they were.
    old = '{"urls":["http://h.example/0","http://h.example/1"],"depth":1,"crawl_id":"c"}'
    assert [m.canonical for m in frontier_messages(old)] == [False, False]
    with pytest.raises(InvalidMessage, match="'canonical' must be true or false"):
        frontier_messages('{"url":"http://h.example/","canonical":"yes"}')


@pytest.mark.parametrize(
    ("body", "key"),
    [
        # Issue 27: a lone surrogate in a record id failed every message of the batch it was read with.
        ('{"url": "http://e.com/", "record_id": "\\ud800", "want": ["title"]}', "'record_id'"),
        ('{"url": "http://e.com/", "crawl_id": "c\\udfff"}', "'crawl_id'"),
        ('{"url": "http://e.com/\\ud83d"}', "'url'"),
        ('{"url": "http://e.com/", "want": ["title", "\\udc80"]}', "'want'"),
        ('{"urls": ["http://e.com/", "http://e.com/\\ud800"], "depth": 1}', "'urls'"),
        ('{"url": "http://e.com/", "check": {"source_id": "s", "slot": "\\ud800"}}', "'check'"),
        ('{"url": "http://e.com/", "\\ud800": 1}', "'\\ud800'"),
    ],
)
def test_a_string_that_is_not_utf8_makes_a_message_invalid(body: str, key: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        frontier_messages(body)
    assert str(info.value) == f"{key} is not valid UTF-8 text (it holds a lone surrogate, such as JSON's \\ud800)"


def test_a_run_message_whose_host_is_not_utf8_is_invalid() -> None:
    from crawlstack.messages import RunMessage

    with pytest.raises(InvalidMessage, match="'host' is not valid UTF-8"):
        RunMessage.from_json('{"host": "a\\udcff.example", "run_id": "r"}')


def test_a_surrogate_pair_is_valid_text() -> None:
    [msg] = frontier_messages('{"url": "http://e.com/", "record_id": "\\ud83d\\ude00"}')
    assert msg.record_id == "\U0001f600"


def test_a_checks_paging_bounds_travel_with_its_pages_and_old_checks_still_parse() -> None:
    step = CheckRef("s", "slot", 2, highest_id="1200", first_items=20)
    msg = FrontierMessage("http://api.example/posts?max_id=1100", crawl_id="watch", check=step)
    assert FrontierMessage.from_json(msg.to_json()) == msg
    assert CheckRef.from_dict(step.to_dict()) == step
    # A check sent before the bounds existed: none, and none written out.
    old = CheckRef.from_dict({"source_id": "s", "slot": "slot", "page": 2})
    assert old == CheckRef("s", "slot", 2) and "highest_id" not in old.to_dict() and "first_items" not in old.to_dict()
    for bad, key in [
        ({"first_items": "20"}, "'check.first_items'"),
        ({"first_items": -1}, "'check.first_items'"),
        ({"first_items": True}, "'check.first_items'"),
        ({"highest_id": 1200}, "'highest_id'"),
    ]:
        with pytest.raises(InvalidMessage, match=key):
            CheckRef.from_dict({"source_id": "s", "slot": "slot", **bad})
