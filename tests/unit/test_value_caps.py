"""A page costs bounded memory however it is shaped: values are capped while built, parsing stops at a node cap.

A field's values hold at most ``settings.MAX_FIELD_CHARS`` characters and
``settings.MAX_ITEMS_PER_PAGE`` values, a page's records
``settings.MAX_PAGE_VALUE_CHARS``; a selector step builds at most one match
more than that; element text stops growing at the cap and looks at the
page's time budget as it grows; markup is parsed to ``settings.MAX_PAGE_NODES``
nodes and JSON of more containers is null.  Whatever is cut says so on the
page's crawl-log line.  Most tests lower a setting and use a small page; the
realistic sizes are in test_fuzz_extract.py.
"""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import pytest
from fakes import FakeBlobs, FakeCrawls, FakeResults, FakeUrls
from lxml import etree

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.extract import Extractor
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.rules import RuleSet, budget
from crawlstack.rules.mapping import Mapping, compile_mapping
from crawlstack.rules.page import Page
from crawlstack.rules.processors import compile_processor, text_of
from crawlstack.urls import fingerprint

URL = "http://shop.example/hostile"
KEY = "pages/dt=2024-01-02/caps.warc.gz"


def p(kind: str, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


def mapping(*fields: dict[str, Any], items: list[dict[str, Any]] | None = None) -> Mapping:
    data: dict[str, Any] = {"name": "m", "url_patterns": [{"type": "regex", "pattern": "."}], "fields": list(fields)}
    if items is not None:
        data["items"] = {"processors": items}
    return compile_mapping("m.json", data)


TAGS = {"name": "tags", "multiple": True, "processors": [p("css", selector="ul.tags li")]}
TAGS_JOINED = {"name": "tags", "processors": [p("css", selector="ul.tags li"), p("join", separator=", ")]}


def nested_tags(depth: int, text: str) -> bytes:
    """``<li>`` in ``<ul>`` in ``<li>``... ``depth`` deep: each li's text is all the text below it."""
    opened = ("<li>" + text + "<ul class='tags'>") * depth
    return f"<html><body><ul class='tags'>{opened}{'</ul></li>' * depth}</ul></body></html>".encode()


def extract(the_mapping: Mapping, body: bytes, content_type: str = "text/html") -> tuple[list[dict[str, Any]], str]:
    """The page's records and the note on its crawl-log line, through the extractor."""
    urls = FakeUrls()
    blobs = FakeBlobs()
    config = CrawlConfig(crawl_id="c", max_depth=0, seed_hosts=frozenset({"shop.example"}))
    extractor = Extractor(FakeCrawls(config), FakeResults(), blobs, RuleSet((the_mapping,)), outcomes=urls)
    fp = fingerprint(URL)
    urls.claim("c", fp, URL, 0)
    urls.set_outcome("c", fp, "fetched")
    meta = {"crawl_id": "c", "depth": 0, "fp": fp}
    exchange = Exchange(URL, "GET", [], 200, "OK", [("Content-Type", content_type)], body, metadata=meta)
    blobs.put(KEY, write_warc([exchange]), "application/warc")
    out = extractor.extract_object(blobs.bucket, KEY)
    assert not out.failed
    return [r["fields"] for r in out.records], urls.items[("c", fp)].get("note", "")


def lower(monkeypatch: pytest.MonkeyPatch, setting: str, value: int) -> None:
    # (raising=False: on code without the setting, the test fails at its assertions, not here.)
    monkeypatch.setattr(settings, setting, value, raising=False)


def chars(value: Any) -> int:
    return sum(map(len, value)) if isinstance(value, list) else len(value)


# --- a field's characters -----------------------------------------------------------
@pytest.mark.parametrize("field", [TAGS, TAGS_JOINED], ids=["multiple", "join"])
def test_a_page_nesting_the_selected_element_500_deep_gives_a_field_within_the_cap(field: dict[str, Any]) -> None:
    # 111 KB, whose li texts together were 105 million characters.
    body = nested_tags(500, "t" * 192)
    assert 100_000 < len(body) < 120_000
    (fields,), note = extract(mapping(field), body)
    assert 999_000 < chars(fields["tags"]) <= 1_000_000  # the default cap
    assert note == "field 'tags' cut at 1,000,000 characters"


def test_the_first_value_is_cut_at_the_cap_and_the_later_ones_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_FIELD_CHARS", 1000)
    page = Page(URL, nested_tags(5, "x" * 300))  # li texts of 1,500, 1,200, ... characters
    assert mapping(TAGS).extract(page) == {"tags": ["x" * 1000]}
    assert page.notes == ["field 'tags' cut at 1,000 characters"]


def test_values_within_the_cap_are_whole_and_give_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_FIELD_CHARS", 1500)
    page = Page(URL, nested_tags(2, "x" * 500))
    assert mapping(TAGS).extract(page) == {"tags": ["x" * 1000, "x" * 500]}
    assert page.notes == []


def test_join_stops_growing_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_FIELD_CHARS", 10)
    page = Page(URL, b"<ul class='tags'>" + b"<li>abcd</li>" * 50 + b"</ul>")
    assert mapping(TAGS_JOINED).extract(page) == {"tags": "abcd, abcd"}
    assert page.notes == ["field 'tags' cut at 10 characters"]


def test_a_json_value_too_large_for_the_cap_is_left_out_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_FIELD_CHARS", 100)
    body = b'{"small": {"a": 1}, "big": {"a": "' + b"x" * 500 + b'"}}'
    page = Page(URL, body, "application/json")
    fields = [{"name": name, "processors": [p("jsonpath", expression=f"$.{name}")]} for name in ("small", "big")]
    assert mapping(*fields).extract(page) == {"small": {"a": 1}, "big": None}
    assert page.notes == ["field 'big' cut at 100 characters"]


def test_a_pages_records_together_hold_at_most_the_page_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_FIELD_CHARS", 1000)
    lower(monkeypatch, "MAX_PAGE_VALUE_CHARS", 2500)
    nested = b"<html><body>" + (b"<div>" + b"y" * 400) * 10 + b"</div>" * 10  # item i's text: (10 - i) x 400
    the_mapping = mapping({"name": "t", "processors": [p("xpath", expression=".")]}, items=[p("css", selector="div")])
    records, note = extract(the_mapping, nested)
    assert len(records) == 10
    assert sum(len(r["t"] or "") for r in records) == 2500
    assert [len(r["t"] or "") for r in records[:4]] == [1000, 1000, 500, 0]
    assert note == "field 't' cut at 1,000 characters; field 't' cut: a page's values hold 2,500 characters"


# --- a step's matches ----------------------------------------------------------------
def test_a_multiple_field_keeps_the_first_values_of_its_cap_with_a_note() -> None:
    page = Page(URL, b"<ul class='tags'>" + b"<li>x</li>" * 1500 + b"</ul>")
    assert mapping(TAGS).extract(page) == {"tags": ["x"] * 1000}
    assert page.notes == ["field 'tags' cut at 1,000 values"]


def test_join_reads_the_first_values_of_its_cap_with_a_note() -> None:
    page = Page(URL, b"<ul class='tags'>" + b"<li>x</li>" * 1500 + b"</ul>")
    assert mapping(TAGS_JOINED).extract(page) == {"tags": ", ".join(["x"] * 1000)}
    assert page.notes == ["field 'tags' cut at 1,000 values"]


def test_a_listing_of_more_items_than_the_cap_says_so() -> None:
    page = Page(URL, b"<ul>" + b"<li>x</li>" * 1001 + b"</ul>")
    records = mapping({"name": "t", "processors": [p("xpath", expression=".")]}, items=[p("css", selector="li")])
    assert len(records.extract_items(page)) == 1000
    assert page.notes == ["more than 1,000 items: the first 1,000 kept"]


def peak_bytes(fn: Any) -> int:
    """Bytes allocated at most (by Python objects) while ``fn`` runs."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "step", [p("xpath", expression="//text()"), p("css", selector="b::text"), p("css", selector="b")]
)
def test_a_selector_step_builds_only_the_matches_of_its_cap(step: dict[str, Any]) -> None:
    page = Page(URL, b"<html><body>" + b"<b>xy</b>" * 200_000)
    assert page.tree is not None
    run = compile_processor(step)
    found: list[Any] = []
    # 200,000 matches made Python objects take over 10 MB; the first 1,001, under 0.1 MB.
    assert peak_bytes(lambda: found.extend(run(page, None))) < 1_000_000
    assert len(found) == settings.MAX_ITEMS_PER_PAGE + 1


POSTS = b'{"posts": [' + b"1," * 300_000 + b'1], "blog": {"posts": [{"id": 2}]}}'


@pytest.mark.parametrize(
    "expression", ["$.posts[*]", "$.posts[:]", "$.posts[1:]", "$..*", "$.posts[?(@ == 1)]", "$.*[*]"]
)
def test_a_json_listing_read_with_jsonpath_builds_only_the_matches_of_its_cap(expression: str) -> None:
    page = Page(URL, POSTS, "application/json")
    assert page.json is not None
    field = mapping({"name": "posts", "multiple": True, "processors": [p("jsonpath", expression=expression)]})
    found: dict[str, Any] = {}
    # jsonpath_ng's find made 300,000 match objects: 80 MB and more.
    assert peak_bytes(lambda: found.update(field.extract(page))) < 1_000_000
    assert len(found["posts"]) == settings.MAX_ITEMS_PER_PAGE
    assert page.notes == ["field 'posts' cut at 1,000 values"]


DOCUMENT = {
    "store": {
        "book": [
            {"title": "A", "price": 8, "tags": ["x", "y"], "author": {"name": "N"}},
            {"title": "B", "price": 12, "tags": [], "isbn": "1"},
            {"title": "C", "price": 9.5, "tags": ["y"]},
        ],
        "bicycle": {"color": "red", "price": 19},
        "limit": 10,
    },
    "n": [3, 1, 2],
}


@pytest.mark.parametrize(
    "expression",
    [
        "$.store.book[*].title",
        "$..price",
        "$..*",
        "$.store.*",
        "$.store.book[0,2].title",
        "$.store.book[-1:]",
        "$.store.book[::2].title",
        "$.store.book[?(@.price < 10)].title",
        "$.store.book[?(@.tags[*] == 'y')].title",
        "$.store.book[?(@.price < $.store.limit)].title",
        "$.store.book[?(@.isbn)].title",
        "$.store.book[?(!@.isbn)].title",
        "$.store.book[?(@.price > 8 && @.price < 12)].title",
        "$.store.book[?(@.price < 9 || @.isbn)].title",
        "$.store.book[*].author.name | $.store.bicycle.color",
        "$.store.book[*] where $.isbn",
        "$.n.`len`",
        "$.n.`sorted`",
        "$..book[*].tags[*]",
        "$.store.book[*].title.`parent`",
        "$.nothing[*]",
    ],
)
def test_the_lazy_jsonpath_walk_gives_what_find_gives_in_its_order(expression: str) -> None:
    from jsonpath_ng.ext import parse

    from crawlstack.rules import jsonpaths

    compiled = parse(expression)
    assert list(jsonpaths.values(compiled, DOCUMENT)) == [match.value for match in compiled.find(DOCUMENT)]


# --- the time budget while text is built ------------------------------------------------
@pytest.mark.parametrize("script", [b"", b"<script>var x;</script>"], ids=["plain", "with-script"])
def test_building_an_elements_text_looks_at_the_time_budget(monkeypatch: pytest.MonkeyPatch, script: bytes) -> None:
    page = Page(URL, b"<html><body><div>" + script + b"<b>x</b>y" * 20_000 + b"</div>")
    div = page.tree.find(".//div")
    clock = itertools.count()  # a second a look
    monkeypatch.setattr(budget, "_now", lambda: float(next(clock)))
    with budget.page_budget(3), pytest.raises(budget.BudgetExceeded):
        text_of(div)


def test_joining_an_elements_text_looks_at_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    page = Page(URL, b"<html><body><div>" + b"<b>x</b>" * 20_000 + b"</div>")
    join = compile_processor(p("join", separator=""))
    clock = itertools.count()
    monkeypatch.setattr(budget, "_now", lambda: float(next(clock)))
    with budget.page_budget(3), pytest.raises(budget.BudgetExceeded):
        join(page, [page.tree.find(".//div")])


# --- the node cap ---------------------------------------------------------------------
def nodes(root: Any) -> int:
    return int(root.xpath("count(//node())") + root.xpath("count(//@*)"))


@pytest.mark.parametrize(
    "unit", [b"<a>", b"<b>x</b>", b"<a b c d e f g h i j k l>", b"<i a=1 b=2 c=3>t", b"<!---->"], ids=str
)
def test_html_is_parsed_to_the_node_cap_with_a_note(monkeypatch: pytest.MonkeyPatch, unit: bytes) -> None:
    lower(monkeypatch, "MAX_PAGE_NODES", 2000)
    page = Page(URL, b"<html><body>" + unit * 20_000)
    assert page.tree is not None
    assert 1000 < nodes(page.tree) <= 1.5 * 2000
    assert page.notes == ["markup cut at 2,000 nodes: the rest of the page is not read"]


def test_xml_is_parsed_to_the_node_cap_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_PAGE_NODES", 2000)
    page = Page(URL, b"<rss>" + b'<item a="1">x</item>' * 5_000 + b"</rss>", "application/rss+xml")
    assert page.tree is not None and page.tree.tag == "rss"
    assert 500 < nodes(page.tree) <= 2000
    assert page.notes == ["markup cut at 2,000 nodes: the rest of the page is not read"]


def test_a_page_within_the_node_cap_parses_as_a_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # Larger than twice the cap in bytes, so fed in pieces and counted: the same tree, no note.
    body = (
        "<html><head><title>t</title></head><body>"
        + "".join(f"<p class='c{i}'>caf\u00e9 \U0001f600 {i}<!-- {i} --></p>" for i in range(3000))
        + "</body></html>"
    ).encode()
    whole = etree.tostring(Page(URL, body).tree)
    lower(monkeypatch, "MAX_PAGE_NODES", 15_000)
    assert len(body) > 2 * 15_000
    page = Page(URL, body)
    assert etree.tostring(page.tree) == whole
    assert page.notes == []


def test_a_tag_of_more_attributes_than_the_cap_keeps_its_first_and_the_page_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # libxml2 compares each attribute with every one before it in its tag, in C: a tag of a
    # million distinct names took hours.  The quoted ">" and "<" must not end the tag early.
    names = " ".join(f"a{i}=\"<x>\"" for i in range(5_000))
    body = f"<html><body><div id=d {names}>inside</div><p>after</p></body></html>".encode()
    lower(monkeypatch, "MAX_TAG_ATTRIBUTES", 100)
    lower(monkeypatch, "ATTRIBUTE_SCAN_MIN_BYTES", 1024)
    page = Page(URL, body)
    (div,) = page.tree.xpath("//div")
    assert list(div.attrib)[:3] == ["id", "a0", "a1"] and len(div.attrib) == 100
    assert div.text == "inside" and page.tree.xpath("string(//p)") == "after"
    assert page.notes == ["a tag's attributes past the first 100 were not read"]


def test_tags_within_the_attribute_cap_are_not_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "ATTRIBUTE_SCAN_MIN_BYTES", 1024)
    lower(monkeypatch, "MAX_TAG_ATTRIBUTES", 100)
    long_value = "v" * 5_000  # a long tag with few attributes
    body = (
        "<html><body>" + f"<div data-x=\"{long_value}\" title='a > b' hidden>t</div>" * 20 + "</body></html>"
    ).encode()
    page = Page(URL, body)
    assert page.notes == []
    assert [len(d.attrib) for d in page.tree.xpath("//div")] == [3] * 20


def test_json_of_more_containers_than_the_node_cap_is_null_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    lower(monkeypatch, "MAX_PAGE_NODES", 100)
    page = Page(URL, b'{"posts": [' + b"{}," * 200 + b"{}]}", "application/json")
    assert page.json is None
    assert page.notes == ["JSON of more than 100 objects and arrays: read as null"]
    assert Page(URL, b'{"posts": [' + b"{}," * 50 + b"{}]}", "application/json").json is not None
