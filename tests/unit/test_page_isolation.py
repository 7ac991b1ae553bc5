"""A hostile page costs only itself: whatever fails in one page's extraction fails that page, not its WARC.

Each test puts the page under test between two ordinary pages in one WARC and
checks that the ordinary pages keep their records and links, and that the
page under test has its outcome (``failed`` with a reason, or a note) in the
urls table, where its crawl-log line comes from.
"""

from __future__ import annotations

import gzip
import itertools
import json
from typing import Any

import pytest
from fakes import FakeBlobs, FakeCrawls, FakeResults, FakeUrls

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.extract import Extractor, outlinks
from crawlstack.extract import extractor as extractor_module
from crawlstack.extract import page_records as records
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.rules import RuleSet, budget
from crawlstack.rules.mapping import Mapping, compile_mapping
from crawlstack.urls import fingerprint

KEY = "pages/dt=2024-01-02/batch.warc.gz"
ITEM = compile_mapping(
    "item.json",
    {
        "name": "item",
        "url_patterns": [{"type": "regex", "pattern": r"^http://shop\.example/"}],
        "fields": [
            {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "h1"}}]},
            {"name": "data", "processors": [{"type": "jsonpath", "parameters": {"expression": "$.data"}}]},
        ],
    },
)
HOSTILE = "http://shop.example/hostile"
ORDINARY = ("http://shop.example/a", "http://shop.example/b")


def page(url: str, body: bytes, ctype: str = "text/html") -> Exchange:
    metadata = {"crawl_id": "c", "depth": 0, "fp": fingerprint(url), "fetched_at": 1_700_000_000.0}
    return Exchange(url, "GET", [], 200, "OK", [("Content-Type", ctype)], body, metadata=metadata)


def ordinary(url: str) -> Exchange:
    return page(url, f'<html><body><h1>{url}</h1><a href="{url}/next">next</a></body></html>'.encode())


class Env:
    def __init__(self) -> None:
        self.urls = FakeUrls()
        self.blobs = FakeBlobs()
        self.results = FakeResults()
        crawls = FakeCrawls(CrawlConfig(crawl_id="c", max_depth=3, seed_hosts=frozenset({"shop.example"})))
        self.extractor = Extractor(crawls, self.results, self.blobs, RuleSet((ITEM,)), outcomes=self.urls)

    def run(self, hostile: Exchange) -> Any:
        for url in (*ORDINARY, hostile.url):
            self.urls.claim("c", fingerprint(url), url, 0)
            self.urls.set_outcome("c", fingerprint(url), "fetched")
        self.blobs.put(KEY, write_warc([ordinary(ORDINARY[0]), hostile, ordinary(ORDINARY[1])]), "application/warc")
        return self.extractor.extract_object(self.blobs.bucket, KEY)

    def hostile_item(self) -> dict[str, Any]:
        return self.urls.items[("c", fingerprint(HOSTILE))]


def assert_ordinary_pages_kept(out: Any) -> None:
    assert {r["url"] for r in out.records} >= set(ORDINARY)
    assert {link.url for link in out.outlinks} >= {f"{url}/next" for url in ORDINARY}


def boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected: this message may quote the page and must not be the reason")


def raise_for_hostile(real: Any, url_of: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if url_of(*args) == HOSTILE:
            boom()
        return real(*args, **kwargs)

    return wrapped


@pytest.mark.parametrize(
    ("target", "attribute", "url_of"),
    [
        # decoding and parsing: the page itself
        (extractor_module, "Page", lambda url, *rest: url),
        # link extraction
        (outlinks, "page_links", lambda page, *rest: page.url),
        # the mapping, past its per-field guard
        (Mapping, "extract", lambda mapping, page: page.url),
        # conversion for storage
        (records, "json_safe", lambda record, *rest: record.get("url")),
    ],
)
def test_a_raise_at_any_step_fails_that_page_alone(
    monkeypatch: pytest.MonkeyPatch, target: Any, attribute: str, url_of: Any
) -> None:
    monkeypatch.setattr(target, attribute, raise_for_hostile(getattr(target, attribute), url_of))
    env = Env()
    out = env.run(ordinary(HOSTILE))
    assert_ordinary_pages_kept(out)
    assert HOSTILE not in {r["url"] for r in out.records}
    assert [(f.url, f.reason.split(" at ")[0]) for f in out.failed] == [(HOSTILE, "extraction failed: RuntimeError")]
    assert "injected" not in out.failed[0].reason
    assert env.hostile_item()["state"] == "failed"
    assert env.hostile_item()["reason"].startswith("extraction failed: RuntimeError at ")


def test_a_failed_page_gets_a_crawl_log_line_in_s3_for_athena(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Mapping, "extract", raise_for_hostile(Mapping.extract, lambda mapping, page: page.url))
    env = Env()
    env.run(ordinary(HOSTILE))
    keys = [k for k in env.blobs.keys(settings.CRAWL_LOG_PREFIX) if "/crawl_id=c/" in k]
    assert len(keys) == 1
    lines = [json.loads(line) for line in gzip.decompress(env.blobs.get(keys[0])).decode().splitlines()]
    assert [(line["url"], line["outcome"]) for line in lines] == [(HOSTILE, "failed")]


def test_a_store_failure_is_not_a_page_failure_but_fails_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing AWS call must reach SQS (retry, then the DLQ), never be written off as the page's fault."""
    env = Env()
    monkeypatch.setattr(env.results, "put", boom)
    with pytest.raises(RuntimeError):
        env.run(ordinary(HOSTILE))


def test_a_page_over_its_budget_fails_with_the_budget_as_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = itertools.count()  # every look at the budget's clock is a quarter second later
    monkeypatch.setattr(budget, "_now", lambda: next(ticks) / 4)
    env = Env()
    env.extractor.budget_seconds = 5.0
    links = "".join(f'<a href="/l{i}">l</a>' for i in range(100))
    out = env.run(page(HOSTILE, f"<html><body><h1>x</h1>{links}</body></html>".encode()))
    assert [(f.url, f.reason) for f in out.failed] == [(HOSTILE, "extraction budget of 5s exceeded")]
    assert env.hostile_item()["reason"] == "extraction budget of 5s exceeded"
    assert_ordinary_pages_kept(out)


def test_no_budget_is_spent_outside_a_page() -> None:
    budget.check()  # rules test and dispatch's scope checks run with no budget open


NOT_TEXT_ENCODINGS = ["base64", "rot13", "zlib", "unicode_escape", "raw_unicode_escape", "idna", "utf-7"]


@pytest.mark.parametrize("charset", NOT_TEXT_ENCODINGS)
def test_a_charset_that_is_no_text_encoding_falls_back_to_detection(charset: str) -> None:
    body = '<html><body><h1>caf\u00e9 \\ud800</h1><a href="/x">x</a></body></html>'.encode()
    env = Env()
    out = env.run(page(HOSTILE, body, f"text/html; charset={charset}"))
    assert not out.failed
    record = next(r for r in out.records if r["url"] == HOSTILE)
    assert record["fields"]["title"] == "caf\u00e9 \\ud800"  # the escape stays text, not a lone surrogate
    assert "http://shop.example/x" in {link.url for link in out.outlinks}


def test_utf16_declared_without_a_bom_is_read_little_endian_as_browsers_do() -> None:
    body = "<html><body><h1>caf\u00e9</h1></body></html>".encode("utf-16-le")
    out = Env().run(page(HOSTILE, body, "text/html; charset=utf-16"))
    assert next(r for r in out.records if r["url"] == HOSTILE)["fields"]["title"] == "caf\u00e9"


def test_a_meta_charset_that_is_no_text_encoding_is_ignored_too() -> None:
    body = b'<html><head><meta charset="base64"></head><body><h1>ok</h1></body></html>'
    out = Env().run(page(HOSTILE, body))
    assert next(r for r in out.records if r["url"] == HOSTILE)["fields"]["title"] == "ok"


def test_json_nested_500_deep_is_stored_with_a_note() -> None:
    body = b'{"data": ' + b"[" * 500 + b"1" + b"]" * 500 + b"}"
    env = Env()
    out = env.run(page(HOSTILE, body, "application/json"))
    assert not out.failed
    assert_ordinary_pages_kept(out)
    record = next(r for r in out.records if r["url"] == HOSTILE)
    json.dumps(record)  # storable
    assert "JSON nested deeper than 64 levels" in env.hostile_item()["note"]


def test_json_too_deep_to_parse_is_null_with_a_note() -> None:
    env = Env()
    out = env.run(page(HOSTILE, b'{"data":' * 5000 + b"1" + b"}" * 5000, "application/json"))
    assert not out.failed
    assert next(r for r in out.records if r["url"] == HOSTILE)["fields"]["data"] is None
    assert env.hostile_item()["note"] == "JSON nested too deep to parse: read as null"


def test_a_lone_surrogate_from_json_is_replaced_not_raised() -> None:
    out = Env().run(page(HOSTILE, b'{"data": "a\\ud800b"}', "application/json"))
    record = next(r for r in out.records if r["url"] == HOSTILE)
    assert record["fields"]["data"] == "a\ufffdb"
    record["fields"]["data"].encode("utf-8")


def test_a_stray_control_byte_in_an_href_does_not_lose_the_page() -> None:
    body = b'<html><body><h1>t</h1><a href="/a\x00b">1</a><a href="/ok\x01">2</a><a href="/fine">3</a></body></html>'
    out = Env().run(page(HOSTILE, body))
    assert not out.failed
    assert "http://shop.example/fine" in {link.url for link in out.outlinks}


def test_a_page_takes_the_smaller_depth_it_was_found_at_again_and_its_links_follow() -> None:
    env = Env()
    env.urls.claim("c", fingerprint(HOSTILE), HOSTILE, 3)
    env.urls.lower_depth("c", fingerprint(HOSTILE), 1)
    body = b'<html><body><h1>t</h1><a href="/next">n</a></body></html>'
    hostile = page(HOSTILE, body)
    hostile.metadata["depth"] = 3  # as fetch wrote it; the urls table has 1 since
    out = env.extractor.extract_object(env.blobs.bucket, _warc(env, hostile))
    assert next(r for r in out.records if r["url"] == HOSTILE)["depth"] == 1
    assert {(m.url, m.depth) for m in out.outlinks} >= {("http://shop.example/next", 2)}


def _warc(env: Env, *pages: Exchange) -> str:
    env.blobs.put(KEY, write_warc(list(pages)), "application/warc")
    return KEY


def test_deeply_nested_html_gives_its_text() -> None:
    depth = 2000  # libxml2 keeps about 2,040 levels; what it drops below is not ours to give
    body = ("<html><body><h1>" + "<span>x" * depth + "</span>" * depth + "</h1></body></html>").encode()
    out = Env().run(page(HOSTILE, body))
    record = next(r for r in out.records if r["url"] == HOSTILE)
    assert record["fields"]["title"] == "x" * depth
