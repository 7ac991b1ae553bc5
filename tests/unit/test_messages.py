"""Frontier messages and fetch tasks: parsing, validation and round trips."""

from __future__ import annotations

import json

import pytest

from crawlstack import settings
from crawlstack.messages import FetchTask, FrontierMessage, InvalidMessage


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
        "delay": 1.5,
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
