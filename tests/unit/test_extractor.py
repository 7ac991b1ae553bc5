"""Extract on the in-memory stores: records from mapped pages, outlinks to the frontier."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from fakes import FakeBlobs, FakeCrawls, FakeResults

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.extract import Extractor, records_key
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.urls import fingerprint

KEY = "pages/dt=2024-01-02/abc.warc.gz"
BOOK = compile_mapping(
    "book.json",
    {
        "name": "book",
        "url_patterns": [{"type": "regex", "pattern": r"^http://shop\.example/books/"}],
        "fields": [
            {
                "name": "title",
                "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}, {"type": "trim"}],
            },
        ],
    },
)
AUTHOR = compile_mapping(
    "author.json",
    {
        "name": "author",
        "url_patterns": [{"type": "regex", "pattern": r"^http://shop\.example/authors/"}],
        "url_parsers": [{"processors": [{"type": "xpath", "parameters": {"expression": "//a[@class='book']/@href"}}]}],
        "fields": [{"name": "name", "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}]}],
    },
)


def html(title: str, *links: str, head: str = "") -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return f"<html><head>{head}</head><body><h1> {title} </h1>{anchors}</body></html>".encode()


def exchange(url: str, body: bytes, status: int = 200, ctype: str = "text/html", **meta: Any) -> Exchange:
    metadata = {"crawl_id": "c", "depth": 0, "fp": fingerprint(url), "record_id": None, "want": [], **meta}
    metadata.setdefault("fetched_at", 1_700_000_000.5)
    return Exchange(url, "GET", [], status, "OK", [("Content-Type", ctype)], body, metadata=metadata)


class Env:
    def __init__(self, config: CrawlConfig | None = None, rules: RuleSet | None = None) -> None:
        self.crawls = FakeCrawls(
            config or CrawlConfig(crawl_id="c", max_depth=2, seed_hosts=frozenset({"shop.example"}))
        )
        self.results = FakeResults()
        self.blobs = FakeBlobs()
        self.extractor = Extractor(self.crawls, self.results, self.blobs, rules or RuleSet((BOOK, AUTHOR)))

    def run(self, *exchanges: Exchange, key: str = KEY) -> Any:
        self.blobs.put(key, write_warc(list(exchanges)), "application/warc")
        return self.extractor.extract_object(self.blobs.bucket, key)

    def records_file(self, key: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in gzip.decompress(self.blobs.get(key)).decode().splitlines()]


@pytest.fixture
def env() -> Env:
    return Env()


def test_records_key_is_partitioned_by_crawl_and_day() -> None:
    assert records_key(KEY, "c") == "records/crawl_id=c/dt=2024-01-02/abc.jsonl.gz"
    assert records_key(KEY, "a b/c=d") == "records/crawl_id=a%20b%2Fc%3Dd/dt=2024-01-02/abc.jsonl.gz"
    assert records_key("other/x.warc.gz", "c") == settings.RECORDS_PREFIX + "crawl_id=c/x.jsonl.gz"


def test_mapped_pages_become_records_in_the_table_and_one_records_object(env: Env) -> None:
    out = env.run(
        exchange("http://shop.example/books/emma", html("Emma"), record_id="r-9", depth=1),
        exchange("http://shop.example/books/middlemarch", html("Middlemarch")),
        exchange("http://shop.example/about", html("About")),
    )
    assert out.records_key == "records/crawl_id=c/dt=2024-01-02/abc.jsonl.gz"
    emma = {
        "mapping": "book",
        "url": "http://shop.example/books/emma",
        "fields": {"title": "Emma"},
        "crawl_id": "c",
        "fp": fingerprint("http://shop.example/books/emma"),
        "depth": 1,
        "fetched_at": 1_700_000_000.5,
        "record_id": "r-9",
    }
    assert out.records[0] == emma
    assert [r["fields"]["title"] for r in out.records] == ["Emma", "Middlemarch"]
    assert "record_id" not in out.records[1]
    # The records object adds each record's numeric fields as "numbers", for the typed query column.
    assert env.records_file(out.records_key) == [{**r, "numbers": {}} for r in out.records]
    assert env.blobs.objects[(env.blobs.bucket, out.records_key)][1] == "application/x-ndjson"
    assert set(env.results.items) == {f"c#{r['fp']}" for r in out.records}
    assert env.results.items[f"c#{emma['fp']}"] == emma


def test_no_records_means_no_records_object(env: Env) -> None:
    out = env.run(exchange("http://shop.example/about", html("About")))
    assert out.records == [] and out.records_key is None
    assert env.blobs.keys(settings.RECORDS_PREFIX) == []


def test_outlinks_are_in_scope_one_level_deeper(env: Env) -> None:
    body = html("Home", "/a", "b?y=1&x=2", "http://elsewhere.example/", "/a#dup", "mailto:x@y.z")
    out = env.run(exchange("http://shop.example/", body, depth=0, record_id="r1", want=["title"]))
    followed = [m for m in out.outlinks if not m.url.startswith("mailto:")]
    assert [m.url for m in followed] == ["http://shop.example/a", "http://shop.example/b?x=2&y=1"]
    first = out.outlinks[0]
    assert (first.depth, first.crawl_id, first.referrer, first.record_id, first.want, first.via) == (
        1,
        "c",
        "http://shop.example/",
        "r1",
        ("title",),
        None,
    )


def test_url_parsers_choose_outlinks_off_site_only_for_a_record_that_wants_them(env: Env) -> None:
    """A page no mapping will use is not worth a request to a stranger's host; a record's search is."""
    body = b'<h1>Jane</h1><a class="book" href="http://other.example/books/emma">e</a><a href="/ignored">not chosen</a>'
    out = env.run(exchange("http://shop.example/authors/jane", body))
    assert out.outlinks == []
    assert out.skipped.counts["off-site"] == 1
    assert out.records[0]["fields"] == {"name": "Jane"}
    # The same page fetched for a record still wanting a title, a field the book mapping gives.
    out = env.run(exchange("http://shop.example/authors/jane", body, record_id="r1", want=["title"]))
    assert [(m.url, m.via, m.record_id) for m in out.outlinks] == [("http://other.example/books/emma", "author", "r1")]


def test_no_outlinks_beyond_max_depth(env: Env) -> None:
    out = env.run(exchange("http://shop.example/deep", html("Deep", "/next"), depth=2))
    assert out.outlinks == []


def test_meta_robots_nofollow_gives_no_outlinks_but_still_a_record(env: Env) -> None:
    head = '<meta name="robots" content="nofollow">'
    out = env.run(exchange("http://shop.example/books/emma", html("Emma", "/a", head=head)))
    assert out.outlinks == [] and len(out.records) == 1


def test_non_2xx_pages_are_ignored(env: Env) -> None:
    out = env.run(
        exchange("http://shop.example/books/gone", html("Gone", "/a"), status=404),
        exchange("http://shop.example/books/moved", b"", status=301),
    )
    assert out.records == [] and out.outlinks == []


def test_non_html_pages_give_no_links(env: Env) -> None:
    out = env.run(exchange("http://shop.example/data", b'{"href": "/a"}', ctype="application/json"))
    assert out.outlinks == []


def test_the_crawl_config_of_the_page_is_used() -> None:
    env = Env(CrawlConfig(crawl_id="other", max_depth=5, deny=(r"/private",), seed_hosts=frozenset({"shop.example"})))
    out = env.run(exchange("http://shop.example/", html("x", "/ok", "/private/x"), crawl_id="other", depth=3))
    assert [(m.url, m.crawl_id, m.depth) for m in out.outlinks] == [("http://shop.example/ok", "other", 4)]


def test_missing_metadata_falls_back_to_the_default_crawl() -> None:
    env = Env(CrawlConfig(crawl_id=settings.DEFAULT_CRAWL_ID, max_depth=1, seed_hosts=frozenset({"shop.example"})))
    ex = Exchange("http://shop.example/", "GET", [], 200, "OK", [("Content-Type", "text/html")], html("x", "/y"))
    out = env.run(ex)
    assert [(m.url, m.crawl_id, m.depth) for m in out.outlinks] == [
        ("http://shop.example/y", settings.DEFAULT_CRAWL_ID, 1)
    ]


def test_a_redelivered_object_rewrites_the_same_records(env: Env) -> None:
    ex = exchange("http://shop.example/books/emma", html("Emma"))
    first = env.run(ex)
    second = env.run(ex)
    assert first.records_key == second.records_key
    assert len(env.results.items) == 1
    assert env.blobs.keys(settings.RECORDS_PREFIX) == [first.records_key]


def test_objects_from_another_bucket_are_read_from_it(env: Env) -> None:
    other = FakeBlobs(bucket="elsewhere")
    other.put(KEY, write_warc([exchange("http://shop.example/books/emma", html("Emma"))]), "application/warc")
    env.blobs.objects.update(other.objects)
    out = env.extractor.extract_object("elsewhere", KEY)
    assert out.records[0]["fields"] == {"title": "Emma"}
    # The records object goes to the crawl's own bucket.
    assert (env.blobs.bucket, out.records_key) in env.blobs.objects


def test_outlinks_already_sent_are_not_sent_again_but_unsent_ones_are(env: Env) -> None:
    body = html("Home", "/a", "/b")
    first = env.run(exchange("http://shop.example/", body, depth=0))
    assert [m.url for m in first.outlinks] == ["http://shop.example/a", "http://shop.example/b"]
    # Until the links are known to be in the frontier, a retry sends them all again.
    again = env.run(exchange("http://shop.example/", body, depth=0))
    assert [m.url for m in again.outlinks] == ["http://shop.example/a", "http://shop.example/b"]
    env.extractor.sent.remember(again.outlinks)
    later = env.run(exchange("http://shop.example/other", html("Other", "/a", "/c"), depth=0))
    assert [m.url for m in later.outlinks] == ["http://shop.example/c"]


def test_a_link_sent_already_goes_again_only_when_found_nearer_a_seed(env: Env) -> None:
    """Dispatch gives the URL the smaller depth; a deeper copy would tell it nothing."""
    deep = env.run(exchange("http://shop.example/deep", html("Deep", "/a"), depth=1))
    env.extractor.sent.remember(deep.outlinks)  # /a went out at depth 2
    assert env.run(exchange("http://shop.example/deeper", html("Deeper", "/a"), depth=1)).outlinks == []
    nearer = env.run(exchange("http://shop.example/", html("Home", "/a"), depth=0)).outlinks
    assert [(m.url, m.depth) for m in nearer] == [("http://shop.example/a", 1)]
    env.extractor.sent.remember(nearer)
    assert env.run(exchange("http://shop.example/deep", html("Deep", "/a"), depth=1)).outlinks == []


def test_hrefs_not_followed_are_counted_by_class_with_a_bounded_sample(env: Env) -> None:
    hostile = [
        "javascript:void(0)",
        "mailto:shop@shop.example",
        "tel:+15550100",
        "data:text/html,hi",
        "/a%zz",
        "http://[::1/",
        "http://shop.example:99999/",
        "http://shop.example:abc/",
        "/" + "a" * settings.MAX_URL_LENGTH,
        "http://elsewhere.example/",
        "/private/x",
        "/ok",
        "http://shop.example:8081/",  # a port is dispatch's to refuse, with a crawl-log line
        "/a/a/a/",  # so is a trap shape
    ]
    env.crawls.put(CrawlConfig(crawl_id="c", max_depth=2, deny=(r"/private",), seed_hosts=frozenset({"shop.example"})))
    out = env.run(exchange("http://shop.example/", html("Home", *hostile)))
    assert [m.url for m in out.outlinks] == [
        "http://shop.example/ok",
        "http://shop.example:8081/",
        "http://shop.example/a/a/a/",
        # Malformed hrefs go on as they are (absolute where they can be made so), for dispatch to drop
        # with a crawl-log line; out-of-scope links do not.
        "javascript:void(0)",
        "mailto:shop@shop.example",
        "tel:+15550100",
        "data:text/html,hi",
        "http://shop.example/a%zz",
        "http://[::1/",
        "http://shop.example:99999/",
        "http://shop.example:abc/",
        ("http://shop.example/" + "a" * settings.MAX_URL_LENGTH)[: settings.MAX_URL_LENGTH + 1],  # bounded
    ]
    assert all(m.depth == 1 and m.record_id is None for m in out.outlinks[3:])
    assert dict(out.skipped.counts) == {
        "scheme": 4,
        "percent-escape": 1,
        "ipv6": 1,
        "port": 2,
        "too-long": 1,
        "off-site": 1,
        "deny": 1,
    }
    assert (
        out.skipped.sample
        == [
            ("javascript:void(0)", "scheme 'javascript' is not http or https"),
            ("mailto:shop@shop.example", "scheme 'mailto' is not http or https"),
            ("tel:+15550100", "scheme 'tel' is not http or https"),
            ("data:text/html,hi", "scheme 'data' is not http or https"),
            ("/a%zz", "bad percent-escape '%zz'"),
        ][: settings.SKIPPED_LINK_SAMPLE]
    )


def test_a_huge_page_of_bad_hrefs_keeps_a_few_examples_and_cuts_each(env: Env) -> None:
    long_bad = "javascript:" + "x" * 5000
    out = env.run(exchange("http://shop.example/", html("Home", *([long_bad] * 3000))))
    assert out.skipped.counts == {"too-long": 3000}  # the length is checked first
    assert len(out.skipped.sample) == settings.SKIPPED_LINK_SAMPLE
    assert all(len(href) <= 200 for href, _ in out.skipped.sample)
    # One forwarded (the same href each time), cut to the URL length cap and a character.
    assert [len(m.url) for m in out.outlinks] == [settings.MAX_URL_LENGTH + 1]


def test_malformed_hrefs_forwarded_are_bounded_per_page_and_sent_once(env: Env) -> None:
    bad = [f"javascript:go({i})" for i in range(settings.INVALID_LINKS_FORWARDED_PER_PAGE + 30)]
    out = env.run(exchange("http://shop.example/", html("Home", *bad)))
    assert [m.url for m in out.outlinks] == bad[: settings.INVALID_LINKS_FORWARDED_PER_PAGE]
    assert out.skipped.counts == {"scheme": len(bad)}  # all still counted
    env.extractor.sent.remember(out.outlinks)
    again = env.run(exchange("http://shop.example/other", html("Other", *bad)))
    assert again.outlinks == []


def test_a_page_of_generated_links_sends_at_most_the_page_cap(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "MAX_OUTLINKS_PER_PAGE", 50)
    links = [f"/gen/{i}" for i in range(120)]
    out = env.run(exchange("http://shop.example/", html("Home", *links, "http://elsewhere.example/")))
    assert [m.url for m in out.outlinks] == [f"http://shop.example{p}" for p in links[:50]]
    assert out.skipped.counts == {"over-page-cap": 70, "off-site": 1}


def test_only_the_first_hrefs_of_a_page_are_read(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "MAX_HREFS_PER_PAGE", 30)
    links = [f"/h/{i}" for i in range(100)]
    out = env.run(exchange("http://shop.example/", html("Home", *links)))
    assert [m.url for m in out.outlinks] == [f"http://shop.example{p}" for p in links[:30]]


LISTING = compile_mapping(
    "listing.json",
    {
        "name": "listing",
        "url_patterns": [{"type": "regex", "pattern": r"^http://shop\.example/new"}],
        "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
        "fields": [{"name": "title", "processors": [{"type": "css", "parameters": {"selector": "b"}}]}],
    },
)


def test_a_listings_items_are_a_record_each() -> None:
    env = Env(rules=RuleSet((LISTING, BOOK)))
    page = b"<ul><li><b>Emma</b></li><li><b>Persuasion</b></li><li></li></ul>"
    out = env.run(exchange("http://shop.example/new", page))
    fp = fingerprint("http://shop.example/new")
    assert [(r["fields"], r["item"], r["fp"]) for r in out.records] == [
        ({"title": "Emma"}, 0, f"{fp}#0"),
        ({"title": "Persuasion"}, 1, f"{fp}#1"),
        ({"title": None}, 2, f"{fp}#2"),
    ]
    # Each is its own item in the results table and its own line of the records object.
    assert set(env.results.items) == {f"c#{fp}#{i}" for i in range(3)}
    assert [r["item"] for r in env.records_file(out.records_key)] == [0, 1, 2]
    # A page with no item gives no record.
    assert (
        env.run(exchange("http://shop.example/new", b"<p>none</p>"), key="pages/dt=2024-01-02/b.warc.gz").records == []
    )
