"""The demo's JSON post API and its journal, crawled end to end with the demo's rules.

The API (127.0.0.4) is the reblog-graph crawl of the design notes in small:
three pages of posts linked by ``response._links.next.href``, whose
``source_url`` point at articles on the journal (127.0.0.5), or elsewhere.
The ``reblogs`` mapping reads them with jsonpath (and only as JSON:
``content_types``); the ``article`` mapping reads the journal with CSS
selectors and follows each article's related articles.

Only the API's first page is a seed.  The crawl is judged from the server's
request log (each page fetched once, pagination followed to the end, no
other host touched) and from records.jsonl, against the served files
themselves.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from webs import Crawl, allow_ports, bare_paths, describe

from crawlstack.demo.server import RULES_DIR, SITE_DIR, LoopbackWeb, demo_web

BOOKS, AUTHORS, API, JOURNAL = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"
POSTS = "/v2/blog/bookish/posts"
API_PAGES = [f"{POSTS}/page-{n}.json" for n in (1, 2, 3)]

# slug -> title, author, date, tags, books it links to (slugs on the books host)
ARTICLES = {
    "reading-emma-again": (
        "Reading Emma again",
        "Harriet Smith",
        "2025-05-31",
        ["Austen", "Rereading"],
        ["emma", "pride-and-prejudice"],
    ),
    "the-fog-in-bleak-house": (
        "The fog in Bleak House",
        "Esther Summerson",
        "2025-05-27",
        ["Dickens", "London"],
        ["bleak-house"],
    ),
    "middlemarch-slowly": (
        "Reading Middlemarch slowly",
        "Dorothea Brooke",
        "2025-05-19",
        ["Eliot", "Slow reading"],
        ["middlemarch"],
    ),
    "a-year-of-dickens": (
        "A year of Dickens",
        "Esther Summerson",
        "2025-05-17",
        ["Dickens", "Reading year"],
        ["great-expectations", "bleak-house"],
    ),
    # Not a source of any post: reached through reading-emma-again's related articles only.
    "frankenstein-in-winter": (
        "Frankenstein in winter",
        "Harriet Smith",
        "2025-01-12",
        ["Shelley", "Winter reading"],
        ["frankenstein"],
    ),
}


def served_json(web: LoopbackWeb, path: str) -> dict[str, Any]:
    """An API page as the server sends it (placeholders filled in), read with plain json."""
    text = (SITE_DIR / "api" / path.lstrip("/")).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(web.substitute(text, web.host(API)))
    return data


def expected_reblogs(data: dict[str, Any]) -> dict[str, Any]:
    posts = data["response"]["posts"]
    return {
        "blog": data["response"]["blog"]["name"],
        "post_ids": [post["id"] for post in posts],
        "reblogged_from": [post["reblogged_from_name"] for post in posts if "reblogged_from_name" in post] or None,
        "sources": [post["source_url"] for post in posts if "source_url" in post] or None,
        "newest_post": datetime.fromtimestamp(posts[0]["timestamp"], UTC).isoformat(),
    }


def test_api_pagination_reblog_sources_and_articles(crawl: Crawl) -> None:
    with demo_web() as web:
        seed = web.url(API, API_PAGES[0])
        # Only the API is seeded: the journal's port needs allowing.
        result = crawl(seed, rules=RULES_DIR, max_depth=3, delay=0.05, server=web, extra=allow_ports(web, JOURNAL))
        pages = {path: served_json(web, path) for path in API_PAGES}

    # The fixture is what the test says it is: each page's next link is the
    # following page, and the last page has none.
    for path, following in zip(API_PAGES, [*API_PAGES[1:], None], strict=True):
        next_link = pages[path]["response"]["_links"].get("next")
        assert (next_link["href"] if next_link else None) == following

    # Every API page fetched exactly once, in `next` order, to the last page; robots.txt first.
    assert bare_paths(web, API) == ["/robots.txt", *API_PAGES], describe(web.requests_for(API))
    for depth, path in enumerate(API_PAGES):
        entry = result.log_entry(web.url(API, path))
        assert (entry["outcome"], entry["depth"]) == ("fetched", depth), entry

    # One record per API page, its fields as plain json reads the served file.
    for path in API_PAGES:
        record = result.record(web.url(API, path))
        assert record["mapping"] == "reblogs"
        assert record["fields"] == expected_reblogs(pages[path]), path

    # Every journal article fetched exactly once, though one is the source of
    # two posts and others are each other's related articles.
    journal = Counter(bare_paths(web, JOURNAL))
    assert journal == Counter(["/robots.txt", *(f"/posts/{slug}.html" for slug in ARTICLES)]), describe(
        web.requests_for(JOURNAL)
    )
    sources = [post.get("source_url") for data in pages.values() for post in data["response"]["posts"]]
    assert sources.count(web.url(JOURNAL, "/posts/reading-emma-again.html")) == 2
    assert result.log_entry(web.url(JOURNAL, "/posts/frankenstein-in-winter.html"))["depth"] == 2

    for slug, (title, author, date, tags, books) in ARTICLES.items():
        url = web.url(JOURNAL, f"/posts/{slug}.html")
        record = result.record(url)
        assert record["mapping"] == "article"
        assert record["fields"] == {
            "title": title,
            "author": author,
            "published": date,
            "tags": tags,
            "books": [web.url(BOOKS, f"/books/{book}.html") for book in books],
            "canonical_url": url,
        }

    # Sources off the journal (example.com) are not followed, and the links
    # articles make to the bookshop are data, not crawl links.
    assert any("example.com" in str(source) for source in sources)
    assert not [e for e in result.log if "example.com" in str(e.get("url"))], result.log_text()
    assert web.requests_for(BOOKS) == [] and web.requests_for(AUTHORS) == [], describe(web.log)
    assert Counter(r["mapping"] for r in result.records) == {"reblogs": len(API_PAGES), "article": len(ARTICLES)}
