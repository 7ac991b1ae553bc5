"""Fuzz of everything that reads the web, one reader at a time: no exception escapes, and the answers are usable.

``test_fuzz_extract`` fuzzes the whole WARC -> extract path with the shipped
rules; this file goes under it, at each reader the web's bytes reach:

* page decoding and links: ``Page`` views under hostile Content-Types (charset
  labels naming Python codecs that are no text encoding) and ``<meta>``
  declarations, ``decode_page``, ``page_links``, ``looks_binary``;
* header values in combinations ``test_headers`` does not build (grammar-shaped
  Content-Types, HTTP dates against any clock, numeric Crawl-delays), and
  robots.txt files and fetch outcomes through ``RobotsRecord`` and ``RobotsPolicy``;
* mappings using every processor on generated HTML (nested, deep, hostile
  attributes, JSON-LD with lone surrogates and NaN) and JSON (random and
  thousands of levels deep), their values through the stores' conversions,
  and a WARC of such pages through ``Extractor.extract_object``;
* ``resolve_link`` on any href and base, ``redirect_refusal`` on any robots.txt
  redirect target, and the address allow-list on any IP address;
* a hostile web (any status, header, Location, Retry-After, body flag, a
  response that raises, any robots.txt) through a host's runs (``HostRunner``)
  until it settles: every URL ends in an outcome, none is tried too often,
  and what is written is readable.

Example counts are modest and every test is derandomized: the same examples
run on every machine, so CI is reproducible; widen them locally by editing FUZZ.
Extraction's own time bounds (the page budget, per-call regex timeouts) hold
the runtime; nothing here asserts on wall-clock time.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import ipaddress
import json
import logging
import math
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any
from urllib.parse import urlsplit

import pytest
from fakes import FakeBlobs, FakeCrawls, FakeResults
from hostruns import HOST, Env, fetched_of
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawlstack import settings as crawl_settings
from crawlstack.config import CrawlConfig
from crawlstack.extract import Extractor, SkippedLinks, page_links
from crawlstack.fetch import http
from crawlstack.fetch.addresses import embedded_ipv4, is_public, why_refused
from crawlstack.fetch.headers import (
    MAX_CHARSET_CHARS,
    normalized_content_type,
    parse_content_type,
    parse_crawl_delay,
    parse_retry_after,
)
from crawlstack.fetch.http import looks_binary
from crawlstack.fetch.outcomes import retry_after_seconds
from crawlstack.fetch.robots_txt import RobotsPolicy, redirect_refusal
from crawlstack.fetch.warc import Exchange, read_warc, write_warc
from crawlstack.local.outputs import json_lines
from crawlstack.messages import FrontierMessage
from crawlstack.ports import ALLOW_ALL, DISALLOW_ALL, PARSED, RobotsRecord
from crawlstack.records.storable import fit_record, json_safe
from crawlstack.rules import RuleSet
from crawlstack.rules.decoding import decode_page, text_encoding
from crawlstack.rules.mapping import compile_mapping
from crawlstack.rules.page import Page
from crawlstack.urls import REASON_KINDS, InvalidURL, canonicalize, host_of, resolve_link, url_port

# Hypothesis warns when it prints a large example (a page hundreds of levels deep): expected here.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
FUZZ = settings(
    max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)
FUZZ_CHEAP = settings(FUZZ, max_examples=300)

# --- strategies: hostile text, labels, headers ------------------------------------------

# Python codec names and aliases that are not page encodings (bytes-to-bytes, escapes,
# IDNA, Windows-only, a codec that raises on everything), web ones, and made-up ones.
CODEC_LABELS = [
    "base64", "base_64", "rot13", "rot-13", "zlib", "zip", "bz2", "hex", "quopri", "uu", "unicode_escape",
    "raw_unicode_escape", "punycode", "idna", "utf-7", "utf-16", "utf-32", "utf-16-le", "utf-32-be", "undefined",
    "mbcs", "oem", "cp65001", "utf-8-sig", "charmap", "palmos", "hz", "iso-2022-jp", "x-user-defined", "replacement",
    "latin-1", "utf-8", "UTF8", "shift_jis", "x-no-such-charset", "string_escape", "unicode_internal", "ascii",
]  # fmt: skip
HOSTILE_STRINGS = [
    "", " ", "\x00", "\x0b\x0c", "\u202e", "\ufeff", "\ud800", "\udfff\ud800", "\U0010ffff", "\u0085",
    "javascript:alert(1)", "http://[::1", "//[bad", "http://[::1]:x/", "%zz", "%", "%ff%fe", "http://a.com:99999/",
    "http://a.com:0/", "http://127.0.0.1/", "http://[fe80::1%25eth0]/", "HTTP://EXAMPLE.COM:80/a/../b", "mailto:x@y",
    "data:text/html,<a href=x>", "\\\\host\\share", "http://ex ample.com/", "http://a..b/", "http://é.com/",
    "http://xn--/", "http://" + "a" * 300 + ".com/", "../" * 300, "/" + "a" * 3000, "?q=" + "%20" * 800,
    "&#0;", "&#xD800;", "&#x110000;", "&amp;&lt;", "nofollow", "NOFOLLOW, none", "1e999", "NaN", "-Infinity",
    "9" * 5000, "1,234.50", "$9.99", "2024-02-30", "Mar 5", "0000-00-00T99:99", "'", '"', "<", "]]>", "-->",
]  # fmt: skip
TEXT = st.sampled_from(HOSTILE_STRINGS) | st.text(max_size=20)
MEDIA = [
    "text/html", "application/xhtml+xml", "application/xml", "text/xml", "application/rss+xml", "application/json",
    "application/ld+json", "text/json", "text/plain", "image/png", "application/octet-stream", "",
]  # fmt: skip


@st.composite
def content_types(draw: st.DrawFn) -> str:
    """A Content-Type header value: a media type with a charset label, quoted or not, among junk, or random text."""
    media = draw(st.sampled_from(MEDIA) | st.text(max_size=12))
    label = draw(st.sampled_from(CODEC_LABELS) | st.text(max_size=12))
    quote = draw(st.sampled_from(["", '"', "'"]))
    junk = draw(st.sampled_from(["", "; q=1", ";;", '; foo="a;b,c"', "; charset=", ", text/plain", " ; \t"]))
    shape = draw(st.integers(0, 3))
    if shape == 0:
        return f"{media}; charset={quote}{label}{quote}{junk}"
    if shape == 1:
        return f"{media}{junk}; CHARSET = {quote}{label}{quote}"
    if shape == 2:
        return f"{label}, {media}"
    return draw(st.text(max_size=40))


def _encode(text: str, encoding: str) -> bytes:
    # Lone surrogates go through as the invalid bytes a broken server would send.
    errors = "surrogatepass" if encoding.startswith("utf") else "replace"
    return text.encode(encoding, errors)


ENCODINGS = st.sampled_from(["utf-8", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252", "shift_jis", "koi8-r"])
BOMS = st.sampled_from([b"", b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00"])

# --- strategies: generated HTML and JSON ------------------------------------------------

TAGS = [
    "div", "p", "a", "span", "ul", "li", "table", "tr", "td", "h1", "title", "time", "img", "area", "link", "svg",
    "math", "template", "select", "option", "form", "iframe", "noscript", "textarea", "style", "br", "base", "meta",
    "script", "x-custom", "a:b",
]  # fmt: skip
ATTRIBUTES = ["href", "class", "id", "rel", "src", "content", "name", "type", "datetime", "charset", "xmlns", "on"]


def _attribute(name: str, value: str, quote: str) -> str:
    return f" {name}={quote}{value}{quote}"


ATTRS = st.lists(
    st.builds(_attribute, st.sampled_from(ATTRIBUTES), TEXT, st.sampled_from(['"', "'", ""])), max_size=3
).map("".join)


def _element(tag: str, attrs: str, children: list[str], closed: bool) -> str:
    return f"<{tag}{attrs}>{''.join(children)}" + (f"</{tag}>" if closed else "")


ELEMENTS = st.recursive(
    TEXT,
    lambda inner: st.builds(_element, st.sampled_from(TAGS), ATTRS, st.lists(inner, max_size=4), st.booleans()),
    max_leaves=25,
)
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities become the literals NaN, Infinity, -Infinity
    | st.text(alphabet=st.characters() | st.sampled_from(["\ud800", "\udfff", "\x00", "\u2028"]), max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["url", "href", "name", "@type", "items", "0", ""]) | st.text(max_size=6), inner
        )
    ),
    max_leaves=20,
)


def json_text(value: Any) -> str:
    """JSON as a hostile server writes it: NaN literals, lone surrogates as \\ud800 escapes."""
    return json.dumps(value, allow_nan=True, ensure_ascii=True)


def _deep_json(n: int, kind: str) -> str:
    if kind == "list":
        return "[" * n + "]" * n
    if kind == "object":
        return '{"url": ' * n + '"/deep"' + "}" * n
    return '[{"name": ' * n + "NaN" + "}]" * n


DEEP_JSON = st.builds(_deep_json, st.integers(0, 2000), st.sampled_from(["list", "object", "mixed"]))
JSON_BODIES = JSON_VALUES.map(json_text) | DEEP_JSON


def _deep_html(n: int, tag: str, inner: str) -> str:
    return f"<{tag} class='q'>" * n + inner + f"</{tag}>" * n


def _document(parts: list[str]) -> str:
    return "<!DOCTYPE html><html><head><title>t</title></head><body>" + "".join(parts) + "</body></html>"


HTML_TEXT = st.one_of(
    st.lists(ELEMENTS, max_size=5).map(_document),
    st.builds(_deep_html, st.integers(0, 400), st.sampled_from(["div", "span", "a", "li", "td", "p"]), ELEMENTS),
    st.builds(
        lambda before, ld: _document([before, f'<script type="application/ld+json">{ld}</script>']),
        ELEMENTS,
        JSON_BODIES,
    ),
    ELEMENTS,
)

# --- strategies: bodies for Page -------------------------------------------------------


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bytes a server might send: random, generated markup or JSON in some encoding, declared or not."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=1024))
    text = draw(HTML_TEXT) if kind in (1, 2) else draw(JSON_BODIES)
    if kind == 2:  # declares its own charset, in a <meta> or an XML declaration
        label = draw(st.sampled_from(CODEC_LABELS) | st.text(max_size=10))
        declaration = draw(
            st.sampled_from(['<meta charset="{}">', '<meta http-equiv="Content-Type" content="text/html; charset={}">'])
            | st.just('<?xml version="1.0" encoding="{}"?>')
        )
        text = declaration.format(label) + text
    return draw(BOMS) + _encode(text, draw(ENCODINGS))


URLS = [
    "http://example.com/a/b.html",
    "https://example.com/",
    "http://[::1]:8080/x",
    "http://[::1/broken",
    "not a url",
    "",
]

# --- page decoding and links ------------------------------------------------------------


def _strict_json(value: Any) -> bytes:
    return json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False).encode("utf-8")


@FUZZ
@given(url=st.sampled_from(URLS), body=bodies(), ctype=content_types() | st.none())
@example(url=URLS[0], body=b'<meta charset="unicode_escape"><a href="\\ud800">x</a>', ctype=None)
@example(url=URLS[0], body=b"\\ud800\\x00<a href='/a'>a</a>", ctype="text/html; charset=raw_unicode_escape")
@example(url=URLS[0], body=b"<a href=x>\xff\xfe</a>", ctype="text/html; charset=undefined")
@example(url=URLS[0], body=b"\xff\xfe\x00\xd8<\x00", ctype="text/html; charset=idna")
@example(url=URLS[0], body=b"+AGEAYgBj-<p>x</p>", ctype="text/html; charset=utf-7")
@example(url=URLS[0], body=b"eJzLSM3JyQcABiwCFQ==", ctype="text/html; charset=base64")
def test_every_view_of_a_page_is_usable(url: str, body: bytes, ctype: str | None) -> None:
    page = Page(url, body, ctype)
    assert page.kind in ("html", "xml", "json", "text")
    encoding, text = decode_page(ctype, body)
    assert (page.encoding, page.text) == (encoding, text)
    text.encode("utf-8")  # no lone surrogate, whatever the label said
    assert text_encoding(encoding) is not None or encoding.endswith("-be")
    codecs.lookup(encoding)
    tree = page.tree
    assert tree is None or page.is_markup
    assert isinstance(page.base_url, str)
    assert all(isinstance(token, str) for token in page.meta_robots)
    hrefs = page.hrefs()
    assert all(isinstance(href, str) for href in hrefs)
    assert page.hrefs(1) == hrefs[:1]
    _strict_json(page.json)
    assert isinstance(looks_binary(body), bool)

    skipped, invalid = SkippedLinks(), dict[str, None]()
    links = page_links(page, None, skipped, invalid)
    assert len(links) == len(set(links))
    for link in links:
        assert canonicalize(link) == link
        link.encode("ascii")
    assert set(skipped.counts) <= set(REASON_KINDS)
    assert len(invalid) <= crawl_settings.INVALID_LINKS_FORWARDED_PER_PAGE
    assert all(len(raw) <= crawl_settings.MAX_URL_LENGTH + 1 for raw in invalid)


@FUZZ_CHEAP
@given(head=st.binary(max_size=600) | st.builds(bytes.__add__, BOMS, st.binary(max_size=64)))
def test_looks_binary_on_any_bytes(head: bytes) -> None:
    binary = looks_binary(head)
    assert isinstance(binary, bool)
    if head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        assert not binary


# --- header values in combination -------------------------------------------------------


@FUZZ_CHEAP
@given(value=content_types())
def test_a_content_type_normalizes_to_itself_and_its_label_is_safe_to_look_up(value: str) -> None:
    parsed = parse_content_type(value)
    normalized = normalized_content_type(value)
    if parsed is None:
        assert normalized == ""
        return
    media, label = parsed
    assert media == media.lower() and media.isascii()
    assert parse_content_type(normalized) == parsed
    if label is not None:
        assert 0 < len(label) <= MAX_CHARSET_CHARS and label == label.lower()
        assert text_encoding(label) in (None, label)
    # The header, taken as the fetcher stores it, decodes any body to UTF-8-encodable text.
    decode_page(normalized, b"<p>\xff\xfe\x00caf\xc3\xa9</p>")[1].encode("utf-8")


@FUZZ_CHEAP
@given(when=st.integers(0, 253_402_300_799), now=st.floats(0, 4e9), shape=st.sampled_from(["gmt", "zone", "pad"]))
def test_an_http_date_retry_after_is_its_distance_from_any_now(when: int, now: float, shape: str) -> None:
    value = formatdate(when, usegmt=True)
    if shape == "zone":
        value = formatdate(when, localtime=False)  # "-0000", not "GMT"
    elif shape == "pad":
        value = f" \t{value}\t "
    seconds = parse_retry_after(value, now)
    assert seconds is not None and math.isfinite(seconds)
    assert seconds == max(0.0, when - now)
    assert retry_after_seconds(value, now) == seconds


@FUZZ_CHEAP
@given(value=st.floats() | st.integers() | st.booleans() | st.none() | st.from_regex(r"\s*-?[0-9]{0,20}(\.[0-9]*)?\s*"))
def test_any_crawl_delay_value_is_none_or_a_bounded_finite_delay(value: Any) -> None:
    delay = parse_crawl_delay(value)
    assert delay is None or (isinstance(delay, float) and 0 <= delay <= crawl_settings.MAX_CRAWL_DELAY_SECONDS)


# --- robots.txt -------------------------------------------------------------------------

ROBOTS_VALUES = st.sampled_from(
    [
        "/", "", "*", "/*.php$", "/a*b*c*d*e*f*g*h*", "$", "/%zz", "/%ff", "/caf\u00e9", "/\ud800", "1", "0.5", "-1",
        "1e308", "inf", "nan", "NaN", "99999999999999999999", "0x10", "١٢", "crawlstack", "*/", "Googlebot",
        "1/5", "1/0", "0/0", "5/1m", "https://example.com/sitemap.xml", "# comment",
    ]
) | st.text(max_size=15)  # fmt: skip
ROBOTS_NAMES = [
    "User-agent", "user-AGENT", "Disallow", "Allow", "Crawl-delay", "crawl-delay", "Sitemap", "Request-rate", "Host",
    "Visit-time", "Noindex", "", "#",
]  # fmt: skip
ROBOTS_LINES = st.builds(
    lambda name, sep, value: f"{name}{sep}{value}",
    st.sampled_from(ROBOTS_NAMES),
    st.sampled_from([":", ": ", " :", "", "::", ":\t"]),
    ROBOTS_VALUES,
)


@st.composite
def robots_bodies(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    lines = draw(st.lists(ROBOTS_LINES, max_size=25))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r", "\n\n"]))
    return draw(BOMS) + _encode(newline.join(lines), draw(st.sampled_from(["utf-8", "latin-1", "utf-16-le"])))


STATUSES = st.none() | st.sampled_from([200, 204, 299, 301, 400, 401, 404, 429, 500, 503, 599]) | st.integers(-5, 1000)
USER_AGENTS = st.sampled_from(["crawlstack/0.1 (+https://x)", "Googlebot", "*", "", " ", "/", "a b/c"]) | st.text(
    max_size=15
)


@FUZZ
@given(
    status=STATUSES,
    body=robots_bodies(),
    retry_after=st.none() | st.sampled_from(["0", "120", "99999999999", "soon", "Fri, 31 Dec 9999 23:59:59 GMT"]),
    error=st.sampled_from(["", "timeout", "address 10.0.0.1 is not public"]),
    paths=st.lists(TEXT, min_size=1, max_size=4),
    user_agent=USER_AGENTS,
)
def test_any_robots_txt_gives_a_policy_that_answers(
    status: int | None, body: bytes, retry_after: str | None, error: str, paths: list[str], user_agent: str
) -> None:
    wait = None if retry_after is None else retry_after_seconds(retry_after, 1_700_000_000.0)
    record = RobotsRecord.from_fetch("https://example.com", status, body, error, wait)
    assert record.kind in (ALLOW_ALL, DISALLOW_ALL, PARSED)
    assert math.isfinite(record.expires_at) and record.expires_at > record.fetched_at
    record.body.encode("utf-8")
    policy = RobotsPolicy(record)
    for path in paths:
        for url in (f"https://example.com/{path}", path):
            allowed = policy.allows(url, user_agent)
            assert isinstance(allowed, bool)
            if record.kind != PARSED:
                assert allowed == (record.kind == ALLOW_ALL)
    delay = policy.crawl_delay(user_agent)
    assert delay is None or (math.isfinite(delay) and 0 <= delay <= crawl_settings.MAX_CRAWL_DELAY_SECONDS)
    assert isinstance(policy.disallow_reason(), str)


# --- a hostile web through a host's runs ------------------------------------------------

HEADER_NAMES = st.sampled_from(["Content-Type", "content-type", "Location", "LOCATION", "Retry-After", "retry-after"])
HEADER_VALUES = (
    TEXT
    | content_types()
    | st.sampled_from(["/next", "//other.example/x", "http://[::1/x", "/" + "a" * 5000, "/a\x00b", "?q=1", " \t "])
    | st.sampled_from(["0", "1", "7", "899", "900", "901", "86400", "-1", "1e3", "Fri, 31 Dec 9999 23:59:59 GMT"])
    | st.integers(0, 2_000_000_000).map(lambda when: formatdate(when, usegmt=True))
)
RARELY = st.integers(0, 9).map(lambda n: n == 0)
RESPONSE_STATUSES = st.none() | st.sampled_from([200, 204, 301, 302, 303, 307, 308, 404, 408, 429, 500, 503, 599])


@st.composite
def responses(draw: st.DrawFn) -> dict[str, Any]:
    """One answer a hostile server gives: any status and headers, a body and the flags the client sets, or an error."""
    return {
        "status": draw(RESPONSE_STATUSES | st.integers(-1, 1000)),
        "headers": draw(st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=4)),
        "body": draw(st.binary(max_size=200) | st.sampled_from([b"", b"<a href='/x'>x</a>"])),
        "truncated": draw(RARELY),
        "binary": draw(RARELY),
        "corrupt": draw(RARELY),
        "error": draw(st.just("") | st.sampled_from(["read timeout", "connection failed", "DNS lookup failed", "x"])),
        "raises": draw(RARELY),
    }


def _answer(env: Env, url: str, answers: list[dict[str, Any]]) -> Any:
    left = list(answers)

    def result() -> http.FetchResult:
        answer = left.pop(0) if len(left) > 1 else left[0]
        if answer["raises"]:
            raise ValueError(f"the server sent {answer['body']!r}")
        return http.FetchResult(
            url=url,
            status=answer["status"],
            reason="Whatever",
            headers=list(answer["headers"]),
            body=answer["body"],
            truncated=answer["truncated"],
            binary=answer["binary"],
            corrupt=answer["corrupt"],
            error=answer["error"],
            started_at=env.clock.now,
            finished_at=env.clock.now,
        )

    return result


@FUZZ
@given(
    web=st.lists(st.lists(responses(), min_size=1, max_size=3), min_size=1, max_size=5),
    robots=st.none() | st.tuples(STATUSES, robots_bodies()),
    delay=st.sampled_from([0.0, 0.25, 3.0]),
)
def test_a_hostile_web_through_host_runs_settles_with_an_outcome_for_every_url(
    web: list[list[dict[str, Any]]], robots: tuple[int | None, bytes] | None, delay: float
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        env = Env(monkeypatch, delay=delay)
        paths = [f"p{i}" for i in range(len(web))]
        msg = env.admit(paths, robots=robots is None)
        for path, answers in zip(paths, web, strict=True):
            env.web.pages[env.url(path)] = _answer(env, env.url(path), answers)
        if robots is not None:
            origin = f"http://{HOST}"
            status, body = robots
            env.robots[origin] = lambda: http.FetchResult(origin + "/robots.txt", status=status, body=body)
        results = env.settle(msg, limit=200)

    assert all(r.errors == {} for r in results), [r.errors for r in results]
    assert results[-1].ends == {HOST: "done"} and env.left() == []
    # Every URL ended: fetched, skipped or failed, never left retrying, queued or half fetched.
    assert {env.state(p) for p in paths} <= {"fetched", "skipped", "failed"}
    tries = [url for url in env.web.urls() if not url.endswith("/robots.txt")]
    assert all(tries.count(env.url(p)) <= crawl_settings.RETRY_MAX_ATTEMPTS for p in paths)
    outcomes = fetched_of(results)
    finals = [f for f in outcomes if f.outcome != "retry"]
    assert sorted(f.task.url for f in finals) == sorted(env.url(p) for p in paths)
    for item in outcomes:
        assert "\n" not in item.reason and len(item.reason) < 5000
    for sent, _ in (m for r in results for m in r.frontier):
        target = FrontierMessage.from_json(sent)
        assert target.hops == 1 and target.referrer in {env.url(p) for p in paths}
        assert len(target.url) <= crawl_settings.MAX_URL_LENGTH + 1
    for key in env.warcs():
        assert all(page.url in {env.url(p) for p in paths} for page in read_warc(env.blobs.get(key)))
    for key in env.crawl_logs():
        for line in gzip.decompress(env.blobs.get(key)).decode("utf-8").splitlines():
            assert json.loads(line)["host"] == HOST


# --- mappings on generated pages --------------------------------------------------------


def _p(kind: str, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


def _field(name: str, *steps: dict[str, Any], multiple: bool = True) -> dict[str, Any]:
    return {"name": name, "processors": list(steps), "multiple": multiple}


HTML_MAPPING = compile_mapping(
    "fuzz_html.json",
    {
        "name": "fuzz_html",
        "url_patterns": [{"type": "regex", "pattern": r"/html/"}],
        "fields": [
            _field("title", _p("css", selector="h1, title"), _p("normalize_space"), multiple=False),
            _field("hrefs", _p("xpath", expression="//a/@href | //area/@href"), _p("absolute_url")),
            _field("texts", _p("xpath", expression="//text()"), _p("trim"), _p("split", separator=" "), _p("lower")),
            _field("joined", _p("css", selector="li, td"), _p("join", separator="|"), _p("upper")),
            _field("numbers", _p("css", selector="p, span, td, a"), _p("to_number")),
            _field("dates", _p("css", selector="time", attribute="datetime"), _p("parse_date")),
            _field("strict_dates", _p("xpath", expression="//td/text()"), _p("parse_date", format="%Y-%m-%d")),
            _field(
                "ld",
                _p("xpath", expression="//script[@type='application/ld+json']/text()"),
                _p("jsonpath", expression="$..*"),
            ),
            _field("ld_numbers", _p("css", selector="script"), _p("jsonpath", expression="$..name"), _p("to_number")),
            _field("pairs", _p("css", selector="a::attr(href)"), _p("regex", pattern=r"(\w+)=(\d+)", group=2)),
            _field(
                "swapped",
                _p("xpath", expression="//title/text()"),
                _p("replace", find=r"(\w)(\w)", replace=r"\2\1", regex=True),
            ),
            _field("plain", _p("xpath", expression="//p"), _p("replace", find="a", replace="")),
            _field("nodes", _p("xpath", expression="//div"), _p("first")),
            _field("count", _p("xpath", expression="count(//*)"), multiple=False),
            _field("missing", _p("css", selector="nothing-here"), _p("default", value="none"), multiple=False),
            _field("nested", _p("xpath", expression="//ul"), _p("xpath", expression="./li//text()")),
        ],
        "url_parsers": [
            {"processors": [_p("xpath", expression="//a/@href")]},
            {"processors": [_p("css", selector="link, img, a")]},
            {"processors": [_p("xpath", expression="//li/text()"), _p("absolute_url")]},
        ],
    },
)
JSON_MAPPING = compile_mapping(
    "fuzz_json.json",
    {
        "name": "fuzz_json",
        "url_patterns": [{"type": "regex", "pattern": r"/api/"}],
        "fields": [
            _field("all", _p("jsonpath", expression="$..*")),
            _field("top", _p("jsonpath", expression="$.*"), _p("first")),
            _field("names", _p("jsonpath", expression="$..name"), _p("trim")),
            _field("numbers", _p("jsonpath", expression="$..*"), _p("to_number")),
            _field("dates", _p("jsonpath", expression="$..*"), _p("parse_date")),
            _field("first_items", _p("jsonpath", expression="$..[0]")),
            _field("filtered", _p("jsonpath", expression="$..items[?(@.name)].name")),
            _field("split", _p("jsonpath", expression="$..url"), _p("split", separator="/"), _p("join", separator="+")),
        ],
        "url_parsers": [
            {"processors": [_p("jsonpath", expression="$..url")]},
            {"processors": [_p("jsonpath", expression="$..href"), _p("absolute_url")]},
        ],
    },
)
MAPPINGS = {"html": HTML_MAPPING, "json": JSON_MAPPING}


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def field_failures() -> Iterator[list[str]]:
    """The warnings the rules engine logs while the block runs: a field or url_parser that raised.

    ``Field.value`` turns any exception into a warning and None (one field's
    loss, not the page's), so "nothing escaped" is not enough here: nothing
    may even have been raised.
    """
    handler = _Warnings()
    logger = logging.getLogger("crawlstack.rules.mapping")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def _check_values(page: Page, mapping_name: str) -> None:
    mapping = MAPPINGS[mapping_name]
    with field_failures() as failures:
        values = mapping.extract(page)
        links = mapping.links(page)
    assert failures == []
    assert list(values) == [f.name for f in mapping.fields]
    if mapping_name == "html":
        assert values["missing"] == "none"
        assert (values["count"] is None) == (page.tree is None)
    _strict_json(values)
    record = {"crawl_id": "c", "fp": "f", "url": page.url, "fields": values}
    json.dumps(fit_record(record), ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert len(links) == len(set(links))
    assert all(canonicalize(link) == link for link in links)


@FUZZ
@given(
    html=HTML_TEXT,
    encoding=ENCODINGS,
    ctype=st.sampled_from(["text/html", "application/xhtml+xml", "application/xml", None]),
)
@example(html=_deep_html(400, "div", "<p>1</p>"), encoding="utf-8", ctype="text/html")
@example(
    html=_document(['<script type="application/ld+json">{"name": "\\ud800", "n": [NaN, Infinity, 1e999]}</script>']),
    encoding="utf-8",
    ctype="text/html",
)
@example(html="<title>\x00\x01\x1b\x7f\ud800</title><a href='?a=1'>\x0c</a>", encoding="utf-8", ctype=None)
def test_an_html_mapping_on_generated_html(html: str, encoding: str, ctype: str | None) -> None:
    page = Page("http://shop.example/html/page", _encode(html, encoding), ctype)
    _check_values(page, "html")


@FUZZ
@given(text=JSON_BODIES, encoding=st.sampled_from(["utf-8", "utf-16", "utf-32-le"]))
@example(text=_deep_json(2000, "list"), encoding="utf-8")
@example(text=_deep_json(900, "object"), encoding="utf-8")
@example(text=_deep_json(2000, "mixed"), encoding="utf-16")
@example(
    text='{"name": "\\ud800\\udc00\\udfff", "url": "\\u0000", "n": [NaN, -Infinity, 1e999, -0.0]}', encoding="utf-8"
)
def test_a_json_mapping_on_generated_json(text: str, encoding: str) -> None:
    page = Page("http://api.example/api/v1", _encode(text, encoding), "application/json")
    _check_values(page, "json")


@FUZZ
@given(text=JSON_BODIES, wrapper=st.sampled_from(["{}", "<p>{}</p>", "<a href='{}'>x</a>"]))
def test_the_html_mapping_on_json_and_json_in_html(text: str, wrapper: str) -> None:
    # A mapping meets the page kind it was not written for; jsonpath reads strings holding JSON.
    _check_values(Page("http://shop.example/html/x", wrapper.format(text).encode("utf-8", "surrogatepass")), "html")
    _check_values(Page("http://api.example/api/x", text.encode("utf-8"), "text/html"), "json")


# --- the whole extractor on a WARC of generated pages -----------------------------------


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in a record: not strict JSON")


@st.composite
def generated_exchanges(draw: st.DrawFn) -> Exchange:
    if draw(st.booleans()):
        url, body, ctype = "http://shop.example/html/p", _encode(draw(HTML_TEXT), draw(ENCODINGS)), "text/html"
    else:
        url, body, ctype = "http://api.example/api/p", _encode(draw(JSON_BODIES), "utf-8"), "application/json"
    url += str(draw(st.integers(0, 5)))
    ctype = draw(st.just(ctype) | content_types())
    metadata = {"crawl_id": "c", "depth": 0, "fp": url, "fetched_at": 1_700_000_000.0}
    return Exchange(url, "GET", [], 200, "OK", [("Content-Type", ctype)], body, metadata=metadata)


@FUZZ
@given(batch=st.lists(generated_exchanges(), min_size=1, max_size=4))
def test_every_generated_page_of_a_warc_becomes_a_record_or_a_failure(batch: list[Exchange]) -> None:
    config = CrawlConfig(crawl_id="c", max_depth=3, seed_hosts=frozenset({"shop.example", "api.example"}))
    rules = RuleSet((HTML_MAPPING, JSON_MAPPING))
    ex = Extractor(FakeCrawls(config), FakeResults(), FakeBlobs(), rules)
    key = "pages/dt=2024-01-02/fuzz-web.warc.gz"
    data = write_warc(batch)
    ex.blobs.put(key, data, "application/warc")  # type: ignore[attr-defined]
    with field_failures() as failures:
        out = ex.extract_object(ex.blobs.bucket, key)  # type: ignore[attr-defined]
    assert failures == []
    # Only the page budget may fail a page; an exception from the page is a bug.
    assert [f.reason for f in out.failed if not f.reason.startswith("extraction budget")] == []
    mapped = [p.url for p in read_warc(data) if rules.match(p.url, p.content_type) is not None]
    assert sorted([r["url"] for r in out.records] + [f.url for f in out.failed]) == sorted(mapped)
    texts = [gzip.decompress(ex.blobs.get(k)).decode("utf-8") for k in out.records_keys]  # type: ignore[attr-defined]
    lines = [line for text in texts for line in text.split("\n") if line]
    assert len(lines) == len(out.records)
    for line in lines:
        json.loads(line, parse_constant=_no_constant)
    # Local mode reads them back the same: one record a line, whatever characters the page held.
    assert sum(len(list(json_lines(text))) for text in texts) == len(out.records)
    for link in out.outlinks:
        assert canonicalize(link.url) == link.url or len(link.url) <= crawl_settings.MAX_URL_LENGTH + 1


@pytest.mark.parametrize("separator", ["\x85", "\u2028", "\u2029", "\x1c", "\x0b\x0c"])
def test_a_record_holding_a_unicode_line_separator_is_one_line(separator: str) -> None:
    # Regression: local mode read records objects with str.splitlines(), which splits at
    # U+0085, U+2028 and U+2029 too; a page's text holding one (kept raw, ensure_ascii=False)
    # cut its record's line in two and json.loads raised, failing the crawl's outputs.
    config = CrawlConfig(crawl_id="c", max_depth=0, seed_hosts=frozenset({"shop.example"}))
    ex = Extractor(FakeCrawls(config), FakeResults(), FakeBlobs(), RuleSet((HTML_MAPPING,)))
    body = f"<html><p>a{separator}b</p></html>".encode()
    page = Exchange("http://shop.example/html/1", "GET", [], 200, "OK", [("Content-Type", "text/html")], body)
    key = "pages/dt=2024-01-02/separator.warc.gz"
    ex.blobs.put(key, write_warc([page]), "application/warc")  # type: ignore[attr-defined]
    out = ex.extract_object(ex.blobs.bucket, key)  # type: ignore[attr-defined]
    (records_key,) = out.records_keys
    (record,) = json_lines(gzip.decompress(ex.blobs.get(records_key)).decode("utf-8"))  # type: ignore[attr-defined]
    assert record["fields"]["plain"] == [f"{separator}b"]  # "a" replaced by ""


@pytest.mark.parametrize("ref", ["&#xD800;", "&#XdFfF;", "&#55296;", "&#x0000DBFF;", "&#0057343;"])
def test_a_character_reference_to_a_surrogate_in_xml_is_a_replacement_character(ref: str) -> None:
    # Regression: libxml2 (recover mode) kept &#xD800; in an XML page as bytes that are not
    # UTF-8, and every read of that text or attribute raised UnicodeDecodeError: each field
    # reading it failed.  Now it is U+FFFD, as the HTML parser makes it.
    body = f'<rss><item a="{ref}"><title>a{ref}b</title><link>/x</link></item></rss>'.encode()
    page = Page("http://shop.example/html/feed", body, "application/rss+xml")
    assert page.tree.xpath("//title/text()") == ["a\ufffdb"]
    assert page.tree.xpath("//item/@a") == ["\ufffd"]
    with field_failures() as failures:
        values = HTML_MAPPING.extract(page)
    assert failures == []
    assert "a\ufffdb" in values["texts"]
    _strict_json(values)


# --- URLs and addresses -----------------------------------------------------------------

HREFS = TEXT | st.builds(
    lambda scheme, host, port, path: f"{scheme}{host}{port}{path}",
    st.sampled_from(["http://", "https://", "HTTP://", "//", "ftp://", "", "http:", "http:///"]),
    st.sampled_from(["example.com", "[::1]", "[::1", "1.2.3.4", "xn--nxasmq6b", "ex_ample.com", "é.fr", "a" * 64])
    | st.text(max_size=10),
    st.sampled_from(["", ":80", ":443", ":0", ":65536", ":x", ":", ":\u0661"]),
    TEXT,
)
BASES = st.sampled_from(["http://example.com/a/b", "https://example.com", "http://[::1]/", "http://[::1/"]) | HREFS


@FUZZ_CHEAP
@given(base=BASES, href=HREFS)
@example(base="http://example.com/", href="//[::1")
@example(base="http://[::1", href="x")
@example(base="http://example.com/", href="http://\u0661\u0662.com/")
def test_resolve_link_gives_a_canonical_url_or_invalid_url(base: str, href: str) -> None:
    try:
        url = resolve_link(base, href)
    except InvalidURL as exc:
        assert exc.kind in REASON_KINDS
        assert str(exc) and "\n" not in str(exc) and len(str(exc)) <= 500  # 40 characters quoted, at worst
        return
    assert url.isascii() and url.isprintable() and len(url) <= crawl_settings.MAX_URL_LENGTH
    assert url.startswith(("http://", "https://"))
    assert canonicalize(url) == url


ROBOTS_TARGETS = HREFS | st.builds(
    lambda scheme, host, port, path: f"{scheme}{host}{port}{path}",
    st.sampled_from(["http://", "https://", "HTTP://", "//", "ftp://"]),
    st.sampled_from(["example.com", "seed.test", "[::1]", "127.0.0.1", "EXAMPLE.com", "user@seed.test"]),
    st.sampled_from(["", ":80", ":443", ":8080", ":8443", ":8831", ":0", ":65536"]),
    st.sampled_from(["/robots.txt", "/a/robots.txt", "/robots.txt?x=1", "/robots.txt?", "/robots.txt#f", "/ROBOTS.TXT"])
    | st.builds(str.__add__, TEXT, st.sampled_from(["/robots.txt", "?/robots.txt", "#/robots.txt"])),
)
ROBOTS_CONFIG = CrawlConfig(seed_hosts=frozenset({"example.com", "seed.test", "seed.test:8080"}), allow_ports=(8443,))


@FUZZ_CHEAP
@given(url=ROBOTS_TARGETS)
@example(url="http://127.0.0.1:8831/secret-admin?action=delete")
@example(url="http://seed.test:8080/secret/..%2f../robots.txt")
def test_a_robots_txt_redirect_is_followed_only_to_a_robots_file_on_an_allowed_port(url: str) -> None:
    refusal = redirect_refusal(url, ROBOTS_CONFIG)
    if refusal is not None:
        assert refusal and "\n" not in refusal and len(refusal) <= 500
        return
    parts = urlsplit(url)
    assert parts.path.endswith("/robots.txt") and not parts.query, url
    canonical = canonicalize(url)
    assert ROBOTS_CONFIG.port_allowed(host_of(canonical), url_port(canonical)), url
    assert urlsplit(canonical).path.endswith("/robots.txt") and not urlsplit(canonical).query, url


@FUZZ_CHEAP
@given(address=st.ip_addresses(), zone=st.sampled_from(["", "%eth0", "%1", "%"]))
def test_every_ip_address_is_public_or_refused_with_a_reason(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, zone: str
) -> None:
    reason = why_refused(address)
    assert (reason is None) == is_public(address)
    assert reason is None or (isinstance(reason, str) and reason and "\n" not in reason)
    assert why_refused(str(address)) == reason
    if address.version == 6:
        assert why_refused(f"{address}{zone}") == reason  # a zone does not change where packets go
        for ipv4 in embedded_ipv4(address):
            if not is_public(ipv4):
                assert reason is not None
