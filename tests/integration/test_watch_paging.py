"""``crawlstack watch --local`` pages a check on only while a deeper page can hold something new.

Judged from the servers' request logs: a listing by page number that gains
two items before each first page is read, and a cursor API whose last page's
cursor is null.  Neither grows on a clock, so the requests a check makes are
the same on every run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qs

from webs import ALLOW_LOOPBACK, describe, page_requests, write_rules

from crawlstack.demo.server import LoopbackWeb, Request, Response

A, B = "127.0.0.2", "127.0.0.3"
PER_PAGE = 5
LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": "/list"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [
        {
            "name": "url",
            "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}, {"type": "absolute_url"}],
        }
    ],
}
POSTS = {
    "name": "posts",
    "url_patterns": [{"type": "regex", "pattern": "/api/posts"}],
    "content_types": ["application/json"],
    "items": {"processors": [{"type": "jsonpath", "parameters": {"expression": "$.posts[*]"}}]},
    "fields": [{"name": "id", "processors": [{"type": "jsonpath", "parameters": {"expression": "$.id"}}]}],
    "url_parsers": [
        {
            "processors": [
                {"type": "jsonpath", "parameters": {"expression": "$.next_max_id"}},
                {"type": "url_template", "parameters": {"template": "{page_url}?max_id={value}"}},
            ]
        }
    ],
}


class GrowingListing:
    """Newest first, PER_PAGE to a page (``?p=N``); 12 items, and two more before each first page after the first."""

    def __init__(self) -> None:
        self.count, self.first_pages = 10, 0
        self.shown: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        number = int(parse_qs(request.query).get("p", ["1"])[0])
        with self.lock:
            if number == 1:
                self.count, self.first_pages = self.count + 2, self.first_pages + 1
            paths = [f"/item/{i}" for i in range(self.count, 0, -1)][(number - 1) * PER_PAGE : number * PER_PAGE]
            self.shown.update(paths)
        return Response("<ul>" + "".join(f'<li><a href="{p}">{p}</a></li>' for p in paths) + "</ul>")


def posts(request: Request) -> Response:
    """Posts 107 down to 101, three to a page below ``max_id``; the last page's ``next_max_id`` is null."""
    below = int(parse_qs(request.query).get("max_id", ["108"])[0])
    ids = [i for i in range(107, 100, -1) if i < below][:3]
    following = ids[-1] if ids and ids[-1] > 101 else None
    body = {"posts": [{"id": i} for i in ids], "next_max_id": following}
    return Response(json.dumps(body), content_type="application/json")


def cli(*argv: str) -> list[str]:
    return [str(Path(sys.executable).parent / "crawlstack"), *argv]


def test_a_check_stops_at_the_first_seen_item_a_short_page_and_a_null_cursor(tmp_path: Path, web: LoopbackWeb) -> None:
    listing = GrowingListing()
    web.add_host(A, {"/list": listing})
    web.add_host(B, {"/api/posts": posts})
    rules = write_rules(tmp_path / "rules", [LISTING, POSTS])
    out = tmp_path / "watch"
    sources = [
        {"url": web.url(A, "/list"), "mapping": "listing", "id": "list", "pagination": "page",
         "pagination_parameter": "p", "priority_max": 1440},
        {"url": web.url(B, "/api/posts"), "mapping": "posts", "id": "posts", "identity": "id",
         "pagination": "cursor", "priority_max": 1440},
    ]  # fmt: skip
    lines = tmp_path / "sources.jsonl"
    lines.write_text("".join(json.dumps(s) + "\n" for s in sources))
    added = subprocess.run(cli("sources", "add", "--file", str(lines), "--rules", str(rules), "--local", str(out)),
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert added.returncode == 0, added.stderr
    watch = ("--simulate-days", "0.004", "--speed", "100", "--delay", "1", *ALLOW_LOOPBACK, "--no-progress")
    done = subprocess.run(cli("watch", "--local", str(out), *watch), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    listed = [e.path for e in page_requests(web, A)]
    assert listing.first_pages >= 2, describe(web.log)  # the first check, and later ones
    # The first check reads 12 items: pages 1 and 2 full, page 3 short, and no page 4 (empty).  Each
    # later check's first page holds two new items and three seen: no page 2, all of whose items were seen.
    assert [p for p in listed if "?" in p] == ["/list?p=2", "/list?p=3"], describe(web.log)
    # The cursor API's first check follows its cursor to the last page, whose null cursor ends it: no
    # page below the lowest id.  Later checks' first pages hold only seen posts.
    asked = [e.path for e in page_requests(web, B)]
    assert [p for p in asked if "?" in p] == ["/api/posts?max_id=105", "/api/posts?max_id=102"], describe(web.log)
    assert len(asked) >= 4, describe(web.log)

    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    published = {(e["source_id"], e["identity"]) for e in events}
    assert len(events) == len(published)
    shown = {("list", web.url(A, p)) for p in listing.shown} | {("posts", str(i)) for i in range(101, 108)}
    assert published == shown
