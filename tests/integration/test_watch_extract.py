"""Extract's side of a watch, on the local watch store: new items once, the next page, the check's end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes import FakeBlobs, FakeCrawls, FakeResults

from crawlstack.config import CrawlConfig
from crawlstack.extract import Extractor
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.local.sqlite import StateDb
from crawlstack.local.sqlite.watch import SqliteWatch
from crawlstack.messages import CheckRef, FrontierMessage
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.watch.check import Validators
from crawlstack.watch.pages import WATCH_CRAWL_ID, CheckPages
from crawlstack.watch.sources import Source

URL = "http://news.example/latest"
LISTING = compile_mapping(
    "listing.json",
    {
        "name": "listing",
        "url_patterns": [{"type": "domain", "pattern": "news.example"}],
        "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
        "fields": [
            {
                "name": "url",
                "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}, {"type": "absolute_url"}],
            },
            {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "a"}}]},
        ],
    },
)
SOURCE = Source("news", URL, "listing", pagination="page", pagination_parameter="p", priority_min=0.1, priority_max=9.0)


class Sources:
    def __init__(self, source: Source) -> None:
        self.source = source

    def get(self, source_id: str) -> Source | None:
        return self.source if source_id == self.source.id else None


def listing(*paths: str) -> bytes:
    return ("<ul>" + "".join(f'<li><a href="{p}">{p}</a></li>' for p in paths) + "</ul>").encode()


class Watch:
    def __init__(self, tmp_path: Path, rules: RuleSet | None = None, source: Source = SOURCE) -> None:
        self.store = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
        self.sent: list[FrontierMessage] = []
        self.blobs = FakeBlobs()
        checks = CheckPages(Sources(source), self.store, self.send, clock=lambda: 1_767_225_700.0)
        config = CrawlConfig(crawl_id=WATCH_CRAWL_ID, max_depth=0)
        rules = rules or RuleSet((LISTING,))
        self.extractor = Extractor(FakeCrawls(config), FakeResults(), self.blobs, rules, checks=checks)
        self.n = 0

    def send(self, bodies: list[str]) -> None:
        self.sent.extend(FrontierMessage.from_json(b) for b in bodies)

    def page(
        self, url: str, ref: CheckRef, body: bytes, status: int = 200, headers: Any = (), **extra: Any
    ) -> list[dict[str, Any]]:
        self.n += 1
        meta = {"crawl_id": WATCH_CRAWL_ID, "depth": 0, "fp": f"fp{self.n}", "check": ref.to_dict(), **extra}
        meta["fetched_at"] = 1_767_225_600.0 + self.n
        exchange = Exchange(
            url, "GET", [], status, "OK", [("Content-Type", "text/html"), *headers], body, metadata=meta
        )
        key = f"pages/dt=2026-01-01/w{self.n}.warc.gz"
        self.blobs.put(key, write_warc([exchange]), "application/warc")
        return [
            r["fields"].get("url", r["fields"].get("id"))
            for r in self.extractor.extract_object(self.blobs.bucket, key).records
        ]


def test_a_checks_pages_keep_their_new_items_and_page_on_until_all_are_seen(tmp_path: Path) -> None:
    watch = Watch(tmp_path)
    first = CheckRef("news", "slot-1")
    etag = [("ETag", '"v1"')]
    assert watch.page(URL, first, listing("/a", "/b"), headers=etag) == [
        "http://news.example/a",
        "http://news.example/b",
    ]
    [following] = watch.sent
    assert (following.url, following.crawl_id, following.check) == (
        f"{URL}?p=2",
        WATCH_CRAWL_ID,
        CheckRef("news", "slot-1", 2, first_items=2),
    )
    # The same page delivered again: the same records, no event twice.
    assert watch.page(URL, first, listing("/a", "/b"), headers=etag) == [
        "http://news.example/a",
        "http://news.example/b",
    ]
    # Page 2 holds only items seen: kept none, the check ends with its 2 new items.
    assert watch.page(f"{URL}?p=2", CheckRef("news", "slot-1", 2, first_items=2), listing("/a")) == []
    state, validators = watch.store.states()["news"]
    assert [c.new_items for c in state.history] == [2] and validators is not None and validators.etag == '"v1"'
    assert watch.store.publish() == 2
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(e["source_id"], e["identity"], e["url"]) for e in lines] == [
        ("news", "http://news.example/a", "http://news.example/a"),
        ("news", "http://news.example/b", "http://news.example/b"),
    ]


def test_a_304_is_nothing_new_and_ends_the_check(tmp_path: Path) -> None:
    watch = Watch(tmp_path)
    watch.page(URL, CheckRef("news", "slot-1"), listing("/a"))
    watch.sent.clear()
    assert watch.page(URL, CheckRef("news", "slot-2", 1, '"v1"'), b"", status=304) == []
    state, _ = watch.store.states()["news"]
    assert [c.new_items for c in state.history][-1] == 0 and watch.sent == []


OTHER = compile_mapping(
    "aaa.json", {"name": "aaa", "url_patterns": [{"type": "domain", "pattern": "news.example"}], "fields": []}
)


def test_a_checked_page_is_read_with_its_sources_mapping_whatever_else_matches_first(tmp_path: Path) -> None:
    watch = Watch(tmp_path, RuleSet((OTHER, LISTING)))
    assert len(watch.page(URL, CheckRef("news", "slot-1"), listing("/a", "/b"))) == 2


def test_a_try_to_be_retried_and_a_redirect_leave_the_check_open(tmp_path: Path) -> None:
    watch = Watch(tmp_path)
    ref = CheckRef("news", "slot-1")
    assert watch.page(URL, ref, b"busy", status=503, retried=True) == []
    assert watch.page(URL, ref, b"", status=301, headers=[("Location", "/latest2")]) == []
    assert "news" not in watch.store.states() and watch.sent == []  # neither ended the check, nor paged on
    assert len(watch.page(URL, ref, listing("/a"))) == 1
    assert [m.check.page for m in watch.sent if m.check is not None] == [2]  # the last try's answer goes on


def test_validators_are_kept_only_for_a_page_read_whole(tmp_path: Path) -> None:
    watch = Watch(tmp_path, RuleSet((OTHER,)))  # the source's mapping is gone: the page cannot be read
    watch.page(URL, CheckRef("news", "slot-1"), listing("/a"), headers=[("ETag", '"v1"')])
    assert watch.store.states()["news"][1] is None  # no 304 for a page never read


def test_items_an_earlier_page_of_the_check_saw_do_not_end_it(tmp_path: Path) -> None:
    # The listing moved on between page 1 and page 2: /b shows again, and /c, older, is new.
    watch = Watch(tmp_path)
    watch.page(URL, CheckRef("news", "slot-1"), listing("/a", "/b"))
    watch.sent.clear()
    assert watch.page(f"{URL}?p=2", CheckRef("news", "slot-1", 2, first_items=2), listing("/b", "/c")) == [
        "http://news.example/c"
    ]
    assert [m.url for m in watch.sent] == [f"{URL}?p=3"]
    # A later check's first page holding /c, seen before: it ends there.
    watch.sent.clear()
    watch.page(URL, CheckRef("news", "slot-2"), listing("/d", "/c"))
    assert watch.sent == []


POSTS = compile_mapping(
    "posts.json",
    {
        "name": "posts",
        "url_patterns": [{"type": "domain", "pattern": "news.example"}],
        "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
        "fields": [{"name": "id", "processors": [{"type": "css", "parameters": {"selector": "li"}}]}],
    },
)
CURSOR = Source("posts", URL, "posts", identity="id", pagination="cursor", pagination_parameter="max_id")


def ids(*numbers: int) -> bytes:
    return ("<ul>" + "".join(f"<li>{n}</li>" for n in numbers) + "</ul>").encode()


def test_a_cursor_checks_highest_id_is_kept_and_the_next_check_stops_below_it(tmp_path: Path) -> None:
    watch = Watch(tmp_path, RuleSet((POSTS,)), CURSOR)
    watch.page(URL, CheckRef("posts", "slot-1"), ids(120, 110))
    [step] = watch.sent
    assert step.url == f"{URL}?max_id=110" and step.check == CheckRef("posts", "slot-1", 2, first_items=2)
    assert watch.store.validators(["posts"]) == {"posts": Validators(highest_id="120")}
    # The next check carries 120 to every page, though its own first page keeps 125.
    watch.sent.clear()
    watch.page(URL, CheckRef("posts", "slot-2", 1, highest_id="120"), ids(125, 123))
    [step] = watch.sent
    assert step.check == CheckRef("posts", "slot-2", 2, highest_id="120", first_items=2)
    assert watch.store.validators(["posts"]) == {"posts": Validators(highest_id="125")}
    # Its second page holds only new posts, but reaches below 120: the rest was there at the last check.
    watch.sent.clear()
    assert len(watch.page(f"{URL}?max_id=123", step.check, ids(122, 119))) == 2
    assert watch.sent == []
