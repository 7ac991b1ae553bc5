"""Fuzz of the WARC -> extract path: hostile objects and hostile pages never raise anything unexpected.

The extractor runs on the in-memory stores with the shipped rules (``rules/``)
and the demo's.  A WARC that cannot be read raises ``WarcUnreadable`` (one
line, nothing written); every page of a readable WARC is extracted, whatever
its body, content type or metadata, and its records are stored in full.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import worst_pages
from fakes import FakeBlobs, FakeCrawls, FakeResults
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.warcwriter import WARCWriter

from crawlstack import settings as crawl_settings
from crawlstack.config import CrawlConfig
from crawlstack.extract import Extracted, Extractor
from crawlstack.fetch.warc import Exchange, WarcUnreadable, read_warc, write_warc
from crawlstack.rules import RuleSet, load_rules
from crawlstack.urls import InvalidURL, canonicalize, fingerprint

ROOT = Path(__file__).resolve().parents[2]
RULE_SETS = {"shipped": load_rules(ROOT / "rules"), "demo": load_rules(ROOT / "crawlstack" / "demo" / "rules")}
KEY = "pages/dt=2024-01-02/fuzz.warc.gz"
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# URLs each mapping applies to, so the fuzz reaches every field chain, plus some no mapping takes.
URLS = [
    "https://quotes.toscrape.com/",
    "https://quotes.toscrape.com/page/2/",
    "https://quotes.toscrape.com/author/Albert-Einstein/",
    "https://en.gravatar.com/someone",
    "https://demo.ghost.io/a-post/",
    "https://api.tumblr.com/v2/blog/staff.tumblr.com/posts?api_key=x",
    "http://127.0.0.2:8000/books/a-book.html",
    "http://127.0.0.3/authors/an-author.html",
    "http://127.0.0.4:81/v2/blog/bookish/posts/page-1.json",
    "http://127.0.0.5/posts/a-post.html",
    "http://example.com/plain?q=1",
]
CONTENT_TYPES = [
    "text/html",
    "text/html; charset=utf-8",
    "text/html; charset=latin-1",
    "text/html; charset=utf-16",
    "text/html; charset=x-no-such-charset",
    "text/html; charset=",
    'text/html; charset="utf-7"',
    "application/xhtml+xml",
    "application/xml",
    "text/xml; charset=shift_jis",
    "application/rss+xml",
    "application/json",
    "application/json; charset=utf-32",
    "application/ld+json",
    "text/plain",
    "image/png",
    "",
    ";;;",
    "text/html; charset=\x00",
]

BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;'
    b'&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
    b"<lolz><title>&lol3;</title></lolz>"
)
XXE = (
    b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><rss><item><title>&x;</title>'
    b"</item></rss>"
)
EXTERNAL_DTD = b'<?xml version="1.0"?><!DOCTYPE r SYSTEM "http://127.0.0.1:1/evil.dtd"><r>&undefined;</r>'
XML_ATTACKS = [BILLION_LAUGHS, XXE, EXTERNAL_DTD]

HOSTILE_BODIES = [
    b"",
    b"\x00" * 4096,
    b"<html>" + b"\x00" * 100 + b"<h1>NUL</h1><a href='/x'>x</a></html>",
    b"<div>" * 5000 + b"deep" + b"</div>" * 5000,
    b"<span>" * 20000,
    b"<a href='" + b"x" * 2_000_000 + b"'>huge</a>",
    b"<html><body><p class='" + b'"' * 10000 + b"'>q</p></body></html>",
    b"<html>\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x90\x28\xbc</html>",
    b"\xef\xbb\xbf<html><meta charset='utf-16'><h1>bom</h1></html>",
    b"\xff\xfe<\x00h\x001\x00>\x00",
    gzip.compress(b"<html>compressed twice</html>")[:20],
    zlib.compress(b"<html>deflated</html>"),
    *XML_ATTACKS,
    b'<?xml version="1.0" encoding="no-such-encoding"?><r/>',
    b"<?xml-stylesheet href='x'?><?php eval($_GET['x']) ?><html/>",
    b'{"response": {"posts": [{"trail": [{"content": "<a href=\'http://x.tumblr.com/\'>x</a>"}]}]}}',
    b'{"a": "\\ud800", "b": [NaN, Infinity, -Infinity], "c": 1e999, "d": "\\u0000"}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"x": ' * 3000 + b"1" + b"}" * 3000,
    b'{"n": 1' + b"0" * 5000 + b"}",
    b"not json at all {",
    b'<script type="application/ld+json">{"@type": "Article", "headline": ' + b"[" * 5000 + b"</script>",
    b"<html><base href='http://[::1'><a href='//[bad'>v6</a><a href='http://a.com:99999/'>p</a>"
    b"<a href='javascript:alert(1)'>j</a><a href='%zz'>e</a><a href='" + b"/a" * 5000 + b"'>l</a></html>",
    b"<meta name=robots content='" + b"nofollow," * 1000 + b"'>",
    # The shapes that cost the most memory at 10 MiB (test_the_worst_shaped_pages_...), small.
    *worst_pages.small(),
]


def _json_text(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
MARKUP = st.lists(
    st.sampled_from(
        [
            "<html>",
            "<head>",
            "<body>",
            "<h1>",
            "</h1>",
            "<a href='/next'>",
            "<a href='",
            "<div class='quote'>",
            "<span class='text'>",
            "<small class='author'>",
            "<li class='next'>",
            "<script type='application/ld+json'>",
            "</script>",
            "<meta name='robots' content='nofollow'>",
            "<![CDATA[",
            "<!--",
            "-->",
            "&amp;",
            "&#0;",
            "&#xD800;",
            "&nbsp;",
            "\x00",
            "\ufffd",
            "é",
            "<",
            ">",
            "'",
            '"',
            "{",
            "[",
        ]
    )
    | st.text(max_size=20),
    max_size=40,
).map("".join)
ENCODINGS = st.sampled_from(["utf-8", "latin-1", "utf-16", "utf-32", "cp1252", "shift_jis"])
BODIES = st.one_of(
    st.sampled_from(HOSTILE_BODIES),
    st.binary(max_size=2048),
    st.builds(lambda text, enc: text.encode(enc, "replace"), MARKUP, ENCODINGS),
    JSON_VALUES.map(_json_text),
    st.builds(lambda body, cut: gzip.compress(body)[:cut], st.binary(max_size=200), st.integers(0, 60)),
)
METADATA = st.one_of(
    st.just(None),  # a well-formed one, filled in below
    st.fixed_dictionaries(
        {},
        optional={
            "crawl_id": JSON_VALUES,
            "depth": JSON_VALUES,
            "fp": JSON_VALUES,
            "record_id": JSON_VALUES,
            "want": JSON_VALUES,
            "fetched_at": JSON_VALUES,
        },
    ),
    JSON_VALUES,
)


@st.composite
def exchanges(draw: st.DrawFn) -> Exchange:
    url = draw(st.sampled_from(URLS))
    meta = draw(METADATA)
    if meta is None:
        meta = {"crawl_id": "c", "depth": 0, "fp": fingerprint(url), "record_id": "r1", "want": ["title"]}
    ctype = draw(st.sampled_from(CONTENT_TYPES) | st.text(max_size=30).filter(lambda s: "\n" not in s))
    headers = [("Content-Type", ctype)] if ctype else []
    status = draw(st.sampled_from([200, 200, 200, 204, 299, 301, 404, 500]))
    return Exchange(url, "GET", [], status, "OK", headers, draw(BODIES), metadata=meta)  # type: ignore[arg-type]


def extractor(rules: RuleSet) -> Extractor:
    config = CrawlConfig(crawl_id="c", max_depth=3, seed_hosts=frozenset({"example.com", "quotes.toscrape.com"}))
    return Extractor(FakeCrawls(config), FakeResults(), FakeBlobs(), rules)


def run(ex: Extractor, data: bytes) -> Extracted:
    ex.blobs.put(KEY, data, "application/warc")  # type: ignore[attr-defined]
    return ex.extract_object(ex.blobs.bucket, KEY)  # type: ignore[attr-defined]


def check_stored(ex: Extractor, out: Extracted) -> None:
    """Every record is in the records object (strict JSON, one line each) and in the results table."""
    lines = []
    for key in out.records_keys:
        # JSON Lines: split at "\n" only (splitlines() also splits at U+2028 in a record's strings).
        lines += gzip.decompress(ex.blobs.get(key)).decode("utf-8").split("\n")[:-1]  # type: ignore[attr-defined]
    assert len(lines) == len(out.records)
    for line in lines:
        json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in a record"))
    assert len(ex.results.items) == len({(r["crawl_id"], r["fp"]) for r in out.records})  # type: ignore[attr-defined]
    # Followed links are canonical http(s) URLs; malformed hrefs go on as they are, bounded, for
    # dispatch to drop with a crawl-log line.
    for link in out.outlinks:
        try:
            assert canonicalize(link.url) == link.url
        except InvalidURL:
            assert len(link.url) <= crawl_settings.MAX_URL_LENGTH + 1


@pytest.mark.parametrize("rules", RULE_SETS.values(), ids=RULE_SETS.keys())
@FUZZ
@given(batch=st.lists(exchanges(), min_size=1, max_size=3))
def test_hostile_pages_in_a_valid_warc_extract_without_raising(rules: RuleSet, batch: list[Exchange]) -> None:
    ex = extractor(rules)
    out = run(ex, write_warc(batch))
    check_stored(ex, out)


@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=range(len(HOSTILE_BODIES)))
@pytest.mark.parametrize("ctype", ["text/html", "application/xml", "application/json", ""])
def test_each_hostile_body_extracts_under_every_mapping(body: bytes, ctype: str) -> None:
    for rules in RULE_SETS.values():
        ex = extractor(rules)
        batch = [
            Exchange(url, "GET", [], 200, "OK", [("Content-Type", ctype)], body, metadata={"crawl_id": "c"})
            for url in URLS
        ]
        out = run(ex, write_warc(batch))
        check_stored(ex, out)


def test_the_worst_shaped_pages_at_the_body_cap_extract_in_bounded_memory() -> None:
    # A fresh interpreter extracts a 10 MiB page of each shape, one after another, as an
    # extract process does; the function has 1,024 MB.  Before the node cap and the value
    # caps, a page of tiny tags alone took 800 MB, nested lists 1.2 GB, a JSON listing 1.6 GB.
    paths = [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    result = subprocess.run(
        [sys.executable, str(Path(worst_pages.__file__))],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert found["peak_mb"] < 600, found
    for name, shape in found["shapes"].items():
        # Each page gives its record, or fails alone on its time budget (a slow machine): never the process.
        assert shape["records"] == 1 or shape["failed"] == ["extraction budget of 5s exceeded"], (name, shape)


def test_entities_are_not_expanded_and_nothing_is_fetched() -> None:
    from crawlstack.rules import Page

    for body in XML_ATTACKS:
        page = Page("http://example.com/feed", body, "application/xml")
        text = "" if page.tree is None else "".join(page.tree.itertext())
        assert "root:" not in text  # /etc/passwd's first line
        assert "lollol" not in text


# --- the WARC object itself is hostile --------------------------------------------------
def good_warc() -> bytes:
    body = b"<html><head><title>t</title></head><body><a href='/a'>a</a></body></html>"
    batch = [Exchange(url, "GET", [], 200, "OK", [("Content-Type", "text/html")], body) for url in URLS[:3]]
    return write_warc(batch)


# Once: record ids and dates differ per write, and hypothesis wants the same input every run.
GOOD_WARC = good_warc()


def _expect_clean(ex: Extractor, data: bytes) -> None:
    try:
        out = run(ex, data)
    except WarcUnreadable as exc:
        assert str(exc) and "\n" not in str(exc)
        assert ex.blobs.keys("records/") == []  # type: ignore[attr-defined]
        return
    check_stored(ex, out)


@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes_as_the_warc_fail_cleanly(data: bytes) -> None:
    _expect_clean(extractor(RULE_SETS["shipped"]), data)


@FUZZ
@given(data=st.data())
def test_a_damaged_warc_fails_cleanly(data: st.DataObject) -> None:
    raw = bytearray(GOOD_WARC)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if kind == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "cut":
            del raw[at:]
        elif kind == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=16))
        elif raw:
            del raw[at : at + data.draw(st.integers(1, 64))]
    _expect_clean(extractor(RULE_SETS["shipped"]), bytes(raw))


@FUZZ
@given(data=st.data())
def test_a_damaged_uncompressed_warc_fails_cleanly(data: st.DataObject) -> None:
    # The same records without gzip: the damage lands in headers and lengths, not in a checksum.
    text = bytearray(_gunzip_members(GOOD_WARC))
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(text) - 1))
        text[at : at + data.draw(st.integers(0, 8))] = data.draw(
            st.sampled_from([b"", b"\r\n", b":", b"-1", b"999999999", b"\x00", b"\xff", b"HTTP/1.1 abc", b" "])
        )
    _expect_clean(extractor(RULE_SETS["shipped"]), bytes(text))


def _gunzip_members(data: bytes) -> bytes:
    out, rest = b"", data
    while rest:
        member = zlib.decompressobj(wbits=31)
        out += member.decompress(rest)
        rest = member.unused_data
    return out


def _warc_with(records: list[tuple[str, dict[str, str], bytes, bytes | None]]) -> bytes:
    """A WARC of hand-made records: (type, WARC headers, HTTP head or b'', payload)."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for rec_type, headers, http_head, payload in records:
        from warcio.statusandheaders import StatusAndHeaders

        http_headers = None
        if http_head:
            status, *rest = http_head.decode("latin-1").split("\r\n")
            pairs = [tuple(line.split(": ", 1)) for line in rest if ": " in line]
            http_headers = StatusAndHeaders(status, pairs, protocol="HTTP/1.1")
        record = writer.create_warc_record(
            headers.get("WARC-Target-URI", ""),
            rec_type,
            payload=io.BytesIO(payload or b""),
            http_headers=http_headers,
            warc_headers_dict={k: v for k, v in headers.items() if k != "WARC-Target-URI"},
            warc_content_type=headers.get("Content-Type", "application/http; msgtype=response"),
        )
        writer.write_record(record)
    return out.getvalue()


# --- regressions the fuzz found ---------------------------------------------------------
@pytest.mark.parametrize(
    "meta",
    [
        {"depth": [None]},
        {"depth": "1"},
        {"depth": True, "want": 5},
        {"want": "title", "record_id": {"a": 1}},
        {"crawl_id": ["c"], "fetched_at": "soon", "fp": 3},
        {"depth": -1, "fetched_at": float("nan")},
    ],
)
def test_metadata_of_the_wrong_types_is_ignored_not_a_type_error(meta: dict[str, Any]) -> None:
    # Regression: int(meta["depth"]) raised TypeError on a list, and tuple(meta["want"]) on a number.
    ex = extractor(RULE_SETS["demo"])
    url = "http://127.0.0.2:8000/books/a-book.html"
    body = b"<html><h1 class='title'>A</h1><a href='/books/b.html'>b</a></html>"
    out = run(
        ex, write_warc([Exchange(url, "GET", [], 200, "OK", [("Content-Type", "text/html")], body, metadata=meta)])
    )
    (record,) = out.records
    assert isinstance(record["depth"], int) and record["depth"] >= 0
    assert isinstance(record["crawl_id"], str)
    assert "record_id" not in record or isinstance(record["record_id"], str)
    check_stored(ex, out)


def test_a_broken_ipv6_base_href_is_no_base() -> None:
    # Regression: <base href="http://[::1"> made urljoin raise ValueError out of Page.base_url.
    from crawlstack.rules import Page

    page = Page("http://example.com/a/", b"<html><base href='http://[::1'><a href='b'>b</a></html>", "text/html")
    assert page.base_url == "http://example.com/a/"
    ex = extractor(RuleSet())
    body = b"<html><base href='http://[::1'><a href='b'>b</a></html>"
    page_exchange = Exchange("http://example.com/a/", "GET", [], 200, "OK", [], body, metadata={"crawl_id": "c"})
    out = run(ex, write_warc([page_exchange]))
    assert [link.url for link in out.outlinks] == ["http://example.com/a/b"]


def test_a_corrupt_warc_writes_nothing_and_says_why_in_one_line() -> None:
    ex = extractor(RULE_SETS["shipped"])
    with pytest.raises(WarcUnreadable) as info:
        run(ex, GOOD_WARC[:-10])
    assert str(info.value) == "unreadable WARC (EOFError): gzip member cut short"
    assert ex.blobs.keys() == [KEY]  # type: ignore[attr-defined]
    assert ex.results.items == {}  # type: ignore[attr-defined]


def test_the_hand_made_warc_helper_round_trips() -> None:
    data = _warc_with(
        [("response", {"WARC-Target-URI": "http://example.com/"}, b"200 OK\r\nContent-Type: text/html", b"<h1>x</h1>")]
    )
    (page,) = read_warc(data)
    assert page.url == "http://example.com/" and page.status == 200 and page.body == b"<h1>x</h1>"


@pytest.mark.parametrize(
    ("status", "uri"),
    [("abc OK", "http://example.com/"), ("200 OK", ""), ("999999999999999999999 X", "not a url"), ("-5", "//[")],
)
def test_odd_response_records_extract_without_raising(status: str, uri: str) -> None:
    head = f"{status}\r\nContent-Type: text/html".encode()
    headers = {"WARC-Target-URI": uri} if uri else {}
    data = _warc_with([("response", headers, head, b"<a href='/x'>x</a>")])
    for rules in RULE_SETS.values():
        _expect_clean(extractor(rules), data)


def test_a_number_of_thousands_of_digits_is_no_number_not_a_failed_field(caplog: pytest.LogCaptureFixture) -> None:
    # Regression: int() refuses more than 4300 digits, so to_number raised and the field failed (logged).
    from crawlstack.rules import Page
    from crawlstack.rules.mapping import compile_mapping

    mapping = compile_mapping(
        "n.json",
        {
            "name": "n",
            "url_patterns": [{"type": "regex", "pattern": "."}],
            "fields": [
                {
                    "name": "n",
                    "processors": [
                        {"type": "xpath", "parameters": {"expression": "//p/text()"}},
                        {"type": "to_number", "parameters": {}},
                    ],
                    "multiple": True,
                }
            ],
        },
    )
    page = Page("http://example.com/", f"<p>{'1' * 5000}</p><p>{'9' * 4000}</p><p>42</p>".encode())
    with caplog.at_level(logging.WARNING):
        assert mapping.extract(page) == {"n": [int("9" * 4000), 42]}
    assert caplog.records == []
