"""One check of a source: conditional GET, stop-on-seen, the next page by next link, page number or cursor."""

from __future__ import annotations

from typing import Any

from crawlstack.messages import CheckRef
from crawlstack.watch.check import (
    PageSeen,
    Validators,
    event_for,
    event_id,
    identity_of,
    next_page,
)
from crawlstack.watch.sources import Source


def src(**kw: Any) -> Source:
    return Source("s1", "http://api.example/posts?count=20", "posts", identity="id", **kw)


def page(
    url: str, ids: tuple[str, ...], new: set[str] | None = None, number: int = 1, links: tuple[str, ...] = ()
) -> PageSeen:
    return PageSeen(url, number, ids, frozenset(ids if new is None else new), links)


def test_the_last_responses_validators_become_the_next_checks_conditional_get() -> None:
    validators = Validators.of([("ETag", '"v2"'), ("Last-Modified", "Wed, 21 Oct 2026 07:28:00 GMT"), ("X", "y")])
    check = CheckRef("s1", "slot", 1, validators.etag, validators.last_modified)
    assert check.request_headers() == [
        ("If-None-Match", '"v2"'),
        ("If-Modified-Since", "Wed, 21 Oct 2026 07:28:00 GMT"),
    ]
    assert Validators.of([]) == Validators() and CheckRef("s1", "slot").request_headers() == []


def test_cursor_pages_on_from_the_lowest_id_and_stops_on_seen() -> None:
    source = src(pagination="cursor", pagination_parameter="max_id")
    first = page("http://api.example/posts?count=20", ("105", "99", "101"))
    assert next_page(source, first) == "http://api.example/posts?count=20&max_id=99"
    second = page("http://api.example/posts?count=20&max_id=99", ("98", "97"), number=2)
    assert next_page(source, second) == "http://api.example/posts?count=20&max_id=97"
    # A page of items all seen before: the rest is older still.
    assert next_page(source, page(second.url, ("96", "95"), new=set(), number=3)) is None
    # The mapping's own next link (url_template) wins over the lowest id.
    linked = page(first.url, ("105",), links=("http://api.example/posts?cursor=abc",))
    assert next_page(source, linked) == "http://api.example/posts?cursor=abc"


def test_page_numbers_count_up_until_an_empty_page_or_max_pages() -> None:
    source = src(pagination="page", pagination_parameter="p", max_pages=3)
    assert next_page(source, page("http://a.example/l", ("a",))) == "http://a.example/l?p=2"
    assert next_page(source, page("http://a.example/l?p=2", ("b",), number=2)) == "http://a.example/l?p=3"
    assert next_page(source, page("http://a.example/l?p=3", ("c",), number=3)) is None  # max_pages
    assert next_page(source, page("http://a.example/l?p=2", (), number=2)) is None  # empty


def test_next_link_pagination_and_none() -> None:
    listing = page("http://a.example/l", ("a",), links=("http://a.example/l/2",))
    assert next_page(src(pagination="next"), listing) == "http://a.example/l/2"
    assert next_page(src(pagination="next"), page("http://a.example/l", ("a",))) is None
    assert next_page(src(), listing) is None  # no pagination: one page a check


def test_an_items_identity_and_its_event() -> None:
    source = src()
    assert identity_of(source, {"id": 42}) == "42"
    assert identity_of(source, {"id": ""}) is None and identity_of(source, {"id": [1]}) is None
    event = event_for(source, "42", {"id": 42, "url": "http://api.example/p/42"}, "http://api.example/posts", 0.0, 1.5)
    assert event == {
        "event_id": event_id("s1", "42"),
        "source_id": "s1",
        "mapping": "posts",
        "identity": "42",
        "url": "http://api.example/p/42",
        "fields": {"id": 42, "url": "http://api.example/p/42"},
        "checked_at": "1970-01-01T00:00:00.000000+00:00",
        "published_at": "1970-01-01T00:00:01.500000+00:00",
    }
    assert event_id("s1", "42") == event_id("s1", "42") != event_id("s2", "42")
