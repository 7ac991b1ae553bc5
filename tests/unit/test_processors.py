"""The processor catalogue, page decoding and mapping matching, one behaviour per test."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from crawlstack.rules.mapping import MAX_ITEMS_PER_PAGE, Chain, Field, compile_mapping, compile_mapping_errors
from crawlstack.rules.page import Page
from crawlstack.rules.processors import PROCESSORS, ProcessorError, compile_processor, text_of, to_number

URL = "http://shop.example/items/a.html"
HTML = b"""<html><head><base href="/catalog/"><title>Shop</title>
<meta property="og:title" content="  The   Item ">
<script type="application/ld+json">{"@type": "Product", "name": "Kettle", "offers": {"price": "19.90"}}</script>
</head><body>
<h1 class="title"> A   <b>fine</b>
  kettle </h1>
<ul class="tags"><li>Kitchen</li><li>Steel</li><li>  </li></ul>
<p class="price">$1,234.50</p><p class="stock">In stock: 12 units</p>
<a class="next" href="page2.html">next</a><a href="mailto:x@example.com">mail</a>
<time datetime="2024-03-05T10:00:00+01:00">March 5, 2024</time>
</body></html>"""


def run(page: Page, *definitions: dict[str, Any]) -> list[Any]:
    values = None
    for definition in definitions:
        values = compile_processor(definition)(page, values)
    return values or []


def p(kind: str, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


@pytest.fixture
def page() -> Page:
    return Page(URL, HTML, "text/html; charset=utf-8")


def test_xpath_text_attributes_numbers_and_relative_nodes(page: Page) -> None:
    assert run(page, p("xpath", expression="//ul[@class='tags']/li/text()")) == ["Kitchen", "Steel", "  "]
    assert run(page, p("xpath", expression="//a[@class='next']/@href")) == ["page2.html"]
    assert run(page, p("xpath", expression="count(//li)")) == [3]
    assert run(page, p("xpath", expression="//ul"), p("xpath", expression="./li[2]/text()")) == ["Steel"]


def test_css_text_attribute_and_parsel_pseudo_elements(page: Page) -> None:
    assert run(page, p("css", selector="h1.title"), p("normalize_space")) == ["A fine kettle"]
    assert run(page, p("css", selector="a.next", attribute="href")) == ["page2.html"]
    assert run(page, p("css", selector="a.next::attr(href)")) == ["page2.html"]
    assert run(page, p("css", selector="ul.tags li::text")) == ["Kitchen", "Steel", "  "]
    assert run(page, p("css", selector="ul"), p("css", selector="li:nth-child(2)"), p("trim")) == ["Steel"]


def test_jsonpath_on_json_pages_and_on_embedded_json(page: Page) -> None:
    api = Page(
        "http://api.example/v2/posts",
        b'{"posts": [{"blog": {"name": "a"}}, {"blog": {"name": "b"}, "source_url": "/p/9"}]}',
        "application/json",
    )
    assert run(api, p("jsonpath", expression="$.posts[*].blog.name")) == ["a", "b"]
    assert run(api, p("jsonpath", expression="$.posts[?(@.source_url)].source_url")) == ["/p/9"]
    ld = run(
        page,
        p("xpath", expression="//script[@type='application/ld+json']/text()"),
        p("jsonpath", expression="$.offers.price"),
    )
    assert ld == ["19.90"]
    # A JSON value passes on as JSON; a later jsonpath runs relative to it.
    assert run(api, p("jsonpath", expression="$.posts[1]"), p("jsonpath", expression="$.blog.name")) == ["b"]


def test_regex_group_defaults_and_names(page: Page) -> None:
    stock = p("css", selector="p.stock")
    assert run(page, stock, p("regex", pattern=r"(\d+) units")) == ["12"]
    assert run(page, stock, p("regex", pattern=r"\d+ units")) == ["12 units"]
    assert run(page, stock, p("regex", pattern=r"(?P<n>\d+) (?P<unit>\w+)", group="unit")) == ["units"]
    assert run(page, stock, p("regex", pattern=r"(\d+) (\w+)", group=0)) == ["12 units"]
    assert run(page, stock, p("regex", pattern=r"out of stock")) == []


def test_replace_plain_and_regex(page: Page) -> None:
    stock = p("css", selector="p.stock")
    assert run(page, stock, p("replace", find="In stock: ", replace="")) == ["12 units"]
    assert run(page, stock, p("replace", find=r".*?(\d+).*", replace=r"n=\1", regex=True)) == ["n=12"]


def test_case_split_join_first(page: Page) -> None:
    tags = p("css", selector="ul.tags li::text")
    assert run(page, tags, p("trim"), p("lower")) == ["kitchen", "steel", ""]
    assert run(page, tags, p("upper"), p("first")) == ["KITCHEN"]
    assert run(page, p("css", selector="p.stock"), p("split", separator=" ")) == ["In", "stock:", "12", "units"]
    assert run(page, tags, p("normalize_space"), p("join", separator=",")) == ["Kitchen,Steel,"]
    assert run(page, p("css", selector="nothing"), p("join", separator=",")) == []


def test_absolute_url_honours_base_href(page: Page) -> None:
    assert run(page, p("css", selector="a::attr(href)"), p("absolute_url")) == [
        "http://shop.example/catalog/page2.html",
        "mailto:x@example.com",
    ]


@pytest.mark.parametrize(
    ("text", "number"),
    [("1,234.50", 1234.5), ("42", 42), ("-3", -3), ("$9.99", 9.99), ("1 000", 1000), (" 2.5e3 ", 2500.0), (".5", 0.5)],
)
def test_to_number_reads_numbers(text: str, number: float) -> None:
    assert to_number(text) == number


@pytest.mark.parametrize("text", ["", "abc", "12 units", "1.2.3", "nan", "inf", "1e999"])
def test_to_number_drops_what_is_not_a_number(text: str) -> None:
    assert to_number(text) is None
    assert to_number(True) is None


def test_to_number_in_a_chain(page: Page) -> None:
    assert run(page, p("css", selector="p"), p("to_number")) == [1234.5]


def test_parse_date_with_and_without_format(page: Page) -> None:
    time_text = p("css", selector="time")
    assert run(page, time_text, p("parse_date")) == ["2024-03-05"]
    assert run(page, time_text, p("parse_date", format="%B %d, %Y")) == ["2024-03-05"]
    assert run(page, p("css", selector="time::attr(datetime)"), p("parse_date")) == ["2024-03-05T10:00:00+01:00"]
    assert run(page, time_text, p("parse_date", format="%d/%m/%Y")) == []
    assert run(page, p("css", selector="p.stock"), p("parse_date")) == []
    epoch = Page("http://api.example/", b'{"t": 0}', "application/json")
    assert run(epoch, p("jsonpath", expression="$.t"), p("parse_date")) == ["1970-01-01T00:00:00+00:00"]


def test_default_only_when_the_chain_gave_nothing(page: Page) -> None:
    assert run(page, p("css", selector="h2"), p("default", value="none")) == ["none"]
    assert run(page, p("css", selector="title::text"), p("default", value="none")) == ["Shop"]
    assert run(page, p("default", value=0)) == [0]


def test_url_template_builds_the_next_cursor_page_from_the_pages_own_url() -> None:
    api = Page(
        "https://api.example/v1/posts?max_id=500&count=20", b'{"min_id": 480, "tag": "a b/c"}', "application/json"
    )
    template = p("url_template", template="{page_url}?max_id={value}")
    # The template's max_id replaces the page's own; other parameters stay, in their order.
    assert run(api, p("jsonpath", expression="$.min_id"), template) == [
        "https://api.example/v1/posts?max_id=480&count=20"
    ]
    first = Page("https://api.example/v1/posts", b'{"min_id": 480}', "application/json")
    assert run(first, p("jsonpath", expression="$.min_id"), template) == ["https://api.example/v1/posts?max_id=480"]
    # The value is percent-encoded: it cannot add a path, a parameter or a fragment.
    tagged = p("url_template", template="https://api.example/tags/{value}")
    assert run(api, p("jsonpath", expression="$.tag"), tagged) == ["https://api.example/tags/a%20b%2Fc"]
    assert run(api, p("jsonpath", expression="$.missing"), template) == []


@pytest.mark.parametrize(
    ("template", "reason"),
    [("{page_url}?page=2", "must hold {value}"), ("{host}/{value}", "unknown placeholder {host}")],
)
def test_url_template_placeholders_are_checked_when_rules_load(template: str, reason: str) -> None:
    with pytest.raises(ProcessorError, match=re.escape(reason)):
        compile_processor(p("url_template", template=template))


LISTING = b"""<html><body><ul>
<li class="thread"><a href="/t/1">First</a> <span class="replies">3</span></li>
<li class="thread"><a href="/t/2">Second</a></li>
</ul><h1>Latest</h1></body></html>"""


def listing_mapping(**extra: Any) -> dict[str, Any]:
    return {
        "name": "thread",
        "url_patterns": [{"type": "domain", "pattern": "forum.example"}],
        "items": {"processors": [p("css", selector="li.thread")]},
        "fields": [
            {"name": "url", "processors": [p("xpath", expression=".//a/@href"), {"type": "absolute_url"}]},
            {"name": "title", "processors": [p("css", selector="a")]},
            {"name": "replies", "processors": [p("css", selector=".replies"), {"type": "to_number"}]},
            # Relative to the item: the page's h1 is not inside one.
            {"name": "heading", "processors": [p("xpath", expression=".//h1")]},
        ],
        **extra,
    }


def test_items_give_one_record_each_with_fields_from_the_item() -> None:
    mapping = compile_mapping("t.json", listing_mapping())
    page = Page("http://forum.example/latest", LISTING, "text/html")
    assert mapping.extract_items(page) == [
        {"url": "http://forum.example/t/1", "title": "First", "replies": 3, "heading": None},
        {"url": "http://forum.example/t/2", "title": "Second", "replies": None, "heading": None},
    ]
    api = compile_mapping(
        "a.json",
        {
            "name": "posts",
            "url_patterns": [{"type": "domain", "pattern": "api.example"}],
            "items": {"processors": [p("jsonpath", expression="$.posts[*]")]},
            "fields": [{"name": "id", "processors": [p("jsonpath", expression="$.id")]}],
        },
    )
    body = Page("http://api.example/p", b'{"posts": [{"id": 7}, {"id": 6}], "id": 1}', "application/json")
    assert api.extract_items(body) == [{"id": 7}, {"id": 6}]
    # No item is no record; a mapping without items gives the page's one record.
    assert mapping.extract_items(Page("http://forum.example/latest", b"<p>none</p>", "text/html")) == []
    plain = compile_mapping("p.json", {k: v for k, v in listing_mapping().items() if k != "items"})
    assert len(plain.extract_items(page)) == 1


def test_a_hostile_listing_gives_at_most_max_items_per_page() -> None:
    many = b"<ul>" + b'<li class="thread"><a href="/t">x</a></li>' * (MAX_ITEMS_PER_PAGE + 50) + b"</ul>"
    mapping = compile_mapping("t.json", listing_mapping())
    assert len(mapping.extract_items(Page("http://forum.example/latest", many, "text/html"))) == MAX_ITEMS_PER_PAGE


@pytest.mark.parametrize(
    ("items", "where"),
    [([p("css", selector="li")], "items"), ({"processors": []}, "items.processors"), ({"procs": []}, "items.procs")],
)
def test_bad_items_are_located(items: Any, where: str) -> None:
    _, errors = compile_mapping_errors("t.json", listing_mapping(items=items))
    assert where in [e.location for e in errors], [str(e) for e in errors]


def test_every_processor_type_is_exercised_here() -> None:
    # A new processor needs a test above (and an example in docs/rules.md).
    source = Path(__file__).read_text(encoding="utf-8")
    assert all(f'"{kind}"' in source for kind in PROCESSORS)


@pytest.mark.parametrize(
    ("definition", "location", "reason"),
    [
        ("xpath", "", "a processor must be an object"),
        ({"type": "xpth"}, "type", "unknown processor type 'xpth'"),
        ({"type": "trim", "params": {}}, "params", "unknown key"),
        (p("xpath"), "parameters.expression", "required"),
        (p("xpath", expression=1), "parameters.expression", "must be a string"),
        (p("xpath", expression="//a", extra=1), "parameters.extra", "unknown parameter for xpath"),
        (p("css", selector="a[href"), "parameters.selector", "invalid CSS selector"),
        (p("css", selector="a", attribute="x y"), "parameters.attribute", "not an attribute name"),
        (p("jsonpath", expression="$.a[?("), "parameters.expression", "invalid JSONPath"),
        (p("regex", pattern="(a"), "parameters.pattern", "invalid regex"),
        (p("regex", pattern="(a)", group=2), "parameters.group", "no group 2"),
        (p("regex", pattern="(a)", group="x"), "parameters.group", "no group named 'x'"),
        (p("regex", pattern="(a)", group=True), "parameters.group", "must be a group number or name"),
        (p("replace", find="a"), "parameters.replace", "required"),
        (p("replace", find="(a)", replace=r"\2", regex=True), "parameters.replace", "invalid replacement"),
        (p("replace", find="a", replace="b", regex="yes"), "parameters.regex", "must be true or false"),
        (p("split", separator=""), "parameters.separator", "must not be empty"),
        (p("join"), "parameters.separator", "required"),
        (p("parse_date", format="%Q"), "parameters.format", "invalid date format"),
        (p("default"), "parameters.value", "required"),
        (p("default", value=[1]), "parameters.value", "must be a string, number or boolean"),
        ({"type": "trim", "parameters": []}, "parameters", "must be an object"),
    ],
)
def test_invalid_processors_fail_at_load_time(definition: Any, location: str, reason: str) -> None:
    with pytest.raises(ProcessorError) as info:
        compile_processor(definition)
    assert info.value.location == location
    assert reason in info.value.reason


# --- pages -------------------------------------------------------------------
def test_charset_from_meta_bom_and_sniffing() -> None:
    latin = '<html><head><meta charset="iso-8859-1"></head><p>Caf\u00e9 cr\u00e8me</p></html>'.encode("latin-1")
    assert run(Page(URL, latin, "text/html"), p("css", selector="p::text")) == ["Caf\u00e9 cr\u00e8me"]
    bom = b"\xef\xbb\xbf<p>\xc3\xa9t\xc3\xa9</p>"
    assert run(Page(URL, bom, "text/html; charset=iso-8859-1"), p("css", selector="p::text")) == ["\u00e9t\u00e9"]
    undeclared = "<p>\u00e9t\u00e9 \u00e0 la plage</p>".encode()
    assert run(Page(URL, undeclared, "text/html"), p("css", selector="p::text")) == ["\u00e9t\u00e9 \u00e0 la plage"]
    header_wins = "<meta charset='utf-8'><p>\u00e9</p>".encode("cp1252")
    assert run(Page(URL, header_wins, "text/html; charset=windows-1252"), p("css", selector="p::text")) == ["\u00e9"]


def test_xml_without_entities_dtd_or_namespaces() -> None:
    rss = (
        b'<?xml version="1.0" encoding="ISO-8859-1"?>'
        b'<!DOCTYPE r [<!ENTITY secret SYSTEM "file:///etc/hostname">]>'
        b'<rss xmlns:atom="http://www.w3.org/2005/Atom"><channel><item><title>caf\xe9 &secret;</title>'
        b'<atom:link href="http://feed.example/a"/></item></channel></rss>'
    )
    page = Page("http://feed.example/rss", rss, "application/rss+xml")
    assert page.kind == "xml"
    # The external entity stays an unexpanded reference, which is not text: nothing is read from disk.
    assert run(page, p("xpath", expression="//item/title"), p("trim")) == ["caf\u00e9"]
    assert run(page, p("css", selector="item link::attr(href)")) == ["http://feed.example/a"]


def test_internal_xml_entities_never_expand() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
        b"<feed><title>before &c; after</title><note>&amp; &lt;</note></feed>"
    )
    page = Page("http://feed.example/atom", laughs, "application/atom+xml")
    # XPath's string value would expand an entity reference node; none is left to expand.
    assert run(page, p("xpath", expression="string(//title)")) == ["before  after"]
    assert run(page, p("xpath", expression="//note"), p("trim")) == ["& <"]  # predefined entities are text


def test_xhtml_reads_as_html() -> None:
    xhtml = b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><h1>Hi</h1></body></html>'
    page = Page(URL, xhtml, "application/xhtml+xml")
    assert page.kind == "html"
    assert run(page, p("xpath", expression="//h1/text()")) == ["Hi"]


@pytest.mark.parametrize(
    ("content_type", "body", "kind"),
    [
        ("application/json", b"{}", "json"),
        ("application/ld+json", b"{}", "json"),
        ("application/atom+xml", b"<feed/>", "xml"),
        ("text/plain", b"hi", "text"),
        ("", b'  {"a": 1}', "json"),
        ("", b"<?xml version='1.0'?><r/>", "xml"),
        ("", b"<p>hi</p>", "html"),
    ],
)
def test_page_kind(content_type: str, body: bytes, kind: str) -> None:
    assert Page(URL, body, content_type).kind == kind


def test_broken_bodies_give_no_values_not_errors() -> None:
    for page in (
        Page(URL, b"{not json", "application/json"),
        Page(URL, b"\x00\x00\x00", "text/html"),
        Page(URL, b"<r><unclosed>", "text/xml"),
        Page(URL, b"", "application/json"),
    ):
        assert run(page, p("jsonpath", expression="$.a")) == []
        run(page, p("xpath", expression="//a"))  # no exception is the point here


# --- mappings ----------------------------------------------------------------
def mapping(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "shop",
        "url_patterns": [{"type": "domain", "pattern": "shop.example"}],
        "fields": [
            {"name": "title", "processors": [p("css", selector="h1"), p("normalize_space")]},
            {"name": "tags", "multiple": True, "processors": [p("css", selector="li::text"), p("trim")]},
            {"name": "missing", "processors": [p("css", selector="h6")]},
            {"name": "none_multiple", "multiple": True, "processors": [p("css", selector="h6")]},
        ],
    }
    base.update(overrides)
    return base


def test_fields_first_value_list_or_null(page: Page) -> None:
    fields = compile_mapping("m.json", mapping()).extract(page)
    assert fields == {
        "title": "A fine kettle",
        "tags": ["Kitchen", "Steel", ""],
        "missing": None,
        "none_multiple": None,
    }


def test_a_field_ending_on_elements_holds_their_text(page: Page) -> None:
    m = compile_mapping("m.json", mapping(fields=[{"name": "h", "processors": [p("xpath", expression="//h1")]}]))
    assert m.extract(page)["h"] == " A   fine\n  kettle "


@pytest.mark.parametrize(
    ("url", "matches"),
    [
        ("http://shop.example/", True),
        ("https://www.shop.example/x", True),
        ("http://SHOP.EXAMPLE./x", True),
        ("http://myshop.example/", False),
        ("http://shop.example.evil/", False),
        ("http://evil.example/?shop.example", False),
    ],
)
def test_domain_patterns_match_the_host_and_subdomains(url: str, matches: bool) -> None:
    assert compile_mapping("m.json", mapping()).matches(url) is matches


def test_content_types_choose_the_mapping() -> None:
    m = compile_mapping("m.json", mapping(content_types=["application/json", "text/*"]))
    assert m.accepts("application/json; charset=utf-8")
    assert m.accepts("text/html")
    assert not m.accepts("application/xml")
    assert compile_mapping("m.json", mapping()).accepts("image/png")


def test_url_parsers_give_absolute_canonical_links(page: Page) -> None:
    m = compile_mapping(
        "m.json",
        mapping(url_parsers=[{"processors": [p("css", selector="a")]}, {"processors": [p("css", selector="a.next")]}]),
    )
    # Elements stand for their href; mailto: is not a crawlable link; repeats are dropped.
    assert m.links(page) == ["http://shop.example/catalog/page2.html"]


def test_every_error_in_a_file_is_reported() -> None:
    bad = mapping(
        url_patterns=[{"type": "domain", "pattern": "http://shop.example/"}, {"type": "glob", "pattern": "*"}],
        content_types=["json"],
        fields=[{"name": "a", "multiple": "yes", "processors": [p("xpath", expression="//a[")]}, {"name": "a"}],
        extra=1,
    )
    _, errors = compile_mapping_errors("m.json", bad)
    assert [e.location for e in errors] == [
        "extra",
        "url_patterns[0].pattern",
        "url_patterns[1].type",
        "content_types[0]",
        "fields[0].multiple",
        "fields[0].processors[0].parameters.expression",
        "fields[1].name",
        "fields[1].processors",
    ]


def test_a_failing_chain_costs_its_field_only(page: Page) -> None:
    def explode(page: Page, values: list[Any] | None) -> list[Any]:
        raise RuntimeError("a bug or a page no one foresaw")

    m = compile_mapping("m.json", mapping(url_parsers=[{"processors": [p("css", selector="a")]}]))
    broken = Chain((explode,))
    m = replace(m, fields=(m.fields[0], Field("tags", broken)), url_parsers=(broken, *m.url_parsers))
    assert m.extract(page) == {"title": "A fine kettle", "tags": None}
    assert m.links(page) == ["http://shop.example/catalog/page2.html"]


# --- hostile pages and rules that only fail when run ---------------------------
def test_deeply_nested_and_huge_pages_still_extract() -> None:
    deep = (
        b"<html><body>" + b"<div>" * 400 + b"<p class='x'>deep</p>" + b"</div>" * 400 + b"<h1>after</h1></body></html>"
    )
    page = Page(URL, deep, "text/html")
    assert run(page, p("css", selector="p.x::text")) == ["deep"]
    assert run(page, p("css", selector="h1::text")) == ["after"]
    big = b'<html><body><img alt="' + b"a" * (11 * 1024 * 1024) + b'"><h1>after</h1></body></html>'
    assert run(Page(URL, big, "text/html"), p("css", selector="h1::text")) == ["after"]


@pytest.mark.parametrize("expression", ["//dc:creator", "//p[foo()]", "//p[$var]"])
def test_xpath_that_cannot_run_is_a_load_time_error(expression: str) -> None:
    with pytest.raises(ProcessorError) as info:
        compile_processor(p("xpath", expression=expression))
    assert info.value.location == "parameters.expression" and "invalid XPath" in info.value.reason


def test_css_pseudo_element_and_attribute_parameter_conflict() -> None:
    with pytest.raises(ProcessorError) as info:
        compile_processor(p("css", selector="a::attr(href)", attribute="title"))
    assert info.value.location == "parameters.attribute"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_default_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(ProcessorError):
        compile_processor(p("default", value=value))


def test_nan_and_infinity_in_json_bodies_become_null() -> None:
    page = Page("http://api.example/", b'{"a": [NaN, 1, Infinity], "b": "ok"}', "application/json")
    assert page.json == {"a": [None, 1, None], "b": "ok"}
    html = Page(URL, b'<script type="application/ld+json">{"n": -Infinity}</script>', "text/html")
    assert run(html, p("css", selector="script::text"), p("jsonpath", expression="$.n")) == [None]


def test_element_text_leaves_out_scripts_and_styles() -> None:
    page = Page(URL, b"<div id='d'>a<script>var x=1;</script><style>.x{}</style>b<noscript>c</noscript></div>")
    assert run(page, p("css", selector="#d"), p("trim")) == ["ab"]
    assert run(page, p("css", selector="script")) != []
    assert text_of(run(page, p("css", selector="script"))[0]) == "var x=1;"


def test_url_parsers_drop_what_is_not_a_url() -> None:
    page = Page(
        "http://misc.example/dir/page",
        b'<a href="">empty</a><a>no href</a><a href=" /ok ">ok</a><span>not a url at all</span>',
        "text/html",
    )
    m = compile_mapping(
        "m.json",
        mapping(url_parsers=[{"processors": [p("css", selector="a")]}, {"processors": [p("css", selector="span")]}]),
    )
    # An empty href is no link (not its text); free text is no link either.
    assert m.links(page) == ["http://misc.example/ok"]


def test_parse_date_without_a_year_takes_the_current_one() -> None:
    page = Page(URL, b"<time>Mar 5</time>", "text/html")
    year = datetime.now(UTC).year
    assert run(page, p("css", selector="time"), p("parse_date")) == [f"{year}-03-05"]


def test_rules_test_shows_every_item_of_a_listing() -> None:
    from crawlstack.extract.rules_tester import run_rules
    from crawlstack.rules import RuleSet

    rules = RuleSet((compile_mapping("t.json", listing_mapping()),))
    result = run_rules(rules, "http://forum.example/latest", LISTING, "text/html")
    assert [item["title"] for item in result["items"]] == ["First", "Second"]
    assert result["fields"] == result["items"][0] and result["mapping"] == "thread"
