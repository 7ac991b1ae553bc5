"""One check of a source: conditional GET, stop-on-seen, the next page by next link, page number or cursor."""

from __future__ import annotations

from typing import Any

from crawlstack.messages import CheckRef
from crawlstack.watch.check import (
    PageSeen,
    Validators,
    event_for,
    event_id,
    highest_of,
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


def test_a_page_holding_any_item_seen_before_ends_the_check() -> None:
    source = src(pagination="page", pagination_parameter="p")
    # Seed 003: two new items and one seen by an earlier check: the rest is older still.
    assert next_page(source, page("http://a.example/l", ("a", "b", "c"), new={"a", "b"})) is None
    # An item an earlier page of this check saw first (the listing moved on meanwhile) is not seen before.
    moved = PageSeen("http://a.example/l?p=2", 2, ("c", "d", "e"), frozenset({"d", "e"}), earlier=frozenset({"c"}))
    assert next_page(source, moved) == "http://a.example/l?p=3"
    # ...but a page of nothing new ends it however its items were seen.
    repeated = PageSeen("http://a.example/l?p=2", 2, ("c",), frozenset(), earlier=frozenset({"c"}))
    assert next_page(source, repeated) is None


def test_a_page_with_fewer_items_than_the_checks_first_ends_page_numbers() -> None:
    source = src(pagination="page", pagination_parameter="p")
    full = PageSeen("http://a.example/l?p=2", 2, ("d", "e", "f"), frozenset({"d", "e", "f"}), first_items=3)
    assert next_page(source, full) == "http://a.example/l?p=3"
    short = PageSeen("http://a.example/l?p=2", 2, ("d", "e"), frozenset({"d", "e"}), first_items=3)
    assert next_page(source, short) is None
    # Only page-number paging: a short page of a next link goes on.
    linked = PageSeen("http://a.example/l/2", 2, ("d",), frozenset({"d"}), ("http://a.example/l/3",), first_items=3)
    assert next_page(src(pagination="next"), linked) == "http://a.example/l/3"


def cursor_page(ids: tuple[str, ...], last_highest: str | None, **kw: Any) -> PageSeen:
    url = "http://api.example/posts?count=20"
    return PageSeen(url, 1, ids, frozenset(ids), last_highest_id=last_highest, **kw)


def test_a_cursor_check_stops_below_the_highest_id_its_last_check_saw() -> None:
    source = src(pagination="cursor", pagination_parameter="max_id")
    # Seed 004: the last check's highest was 100; this page reaches 95, below it (as numbers, not text).
    assert next_page(source, cursor_page(("120", "110", "95"), "100")) is None
    assert next_page(source, cursor_page(("120", "110", "101"), "100")) == "http://api.example/posts?count=20&max_id=101"
    assert next_page(source, cursor_page(("1200", "1100"), "999")) is not None  # 1100 > 999, though not as text
    assert next_page(source, cursor_page(("120", "110"), None)) is not None  # a first check has no bound
    # Identities that are not all whole numbers compare as text.
    assert next_page(source, cursor_page(("c5", "c3"), "c4")) is None
    assert next_page(source, cursor_page(("c9", "c7"), "c4")) == "http://api.example/posts?count=20&max_id=c7"
    # Only cursor paging has the bound.
    assert next_page(src(pagination="page"), cursor_page(("120", "95"), "100")) is not None


def test_a_null_cursor_field_ends_the_check_and_no_cursor_field_keeps_the_lowest_id() -> None:
    source = src(pagination="cursor", pagination_parameter="max_id")
    # The mapping has url_parsers (a cursor field) and they give nothing on this page: no older page.
    assert next_page(source, cursor_page(("120", "110"), None, has_url_parsers=True)) is None
    linked = cursor_page(("120",), None, links=("http://api.example/posts?cursor=abc",), has_url_parsers=True)
    assert next_page(source, linked) == "http://api.example/posts?cursor=abc"
    # A mapping without url_parsers: the lowest id is the cursor.
    assert next_page(source, cursor_page(("120", "110"), None)) == "http://api.example/posts?count=20&max_id=110"


def test_identities_of_any_length_order_as_numbers_without_failing() -> None:
    source = src(pagination="cursor", pagination_parameter="max_id")
    huge, lower = "9" * 5000, "0" + "1" * 4999  # past int()'s digit limit
    assert next_page(source, cursor_page((huge, lower), None)) == f"http://api.example/posts?count=20&max_id={lower}"
    assert next_page(source, cursor_page((huge,), lower)) is not None
    assert highest_of(("7", "10", "9")) == "10" and highest_of(("b", "a")) == "b" and highest_of(()) is None
    # A digit int() refuses (superscript two) makes the identities text, not a failure.
    assert highest_of(("\u00b2", "10")) == "\u00b2"
    numbered = src(pagination="page", pagination_parameter="p")
    assert next_page(numbered, page("http://a.example/l?p=\u00b2", ("a",))) == "http://a.example/l?p=2"
