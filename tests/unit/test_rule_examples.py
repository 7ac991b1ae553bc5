"""The example rules in rules/ work: each runs on a saved page of its site and gives exactly these fields and links.

Every ``rules/NAME.json`` has a hand-written page ``tests/fixtures/pages/NAME.*``
(its extension gives the Content-Type, as ``crawlstack rules test --file``
guesses it) and an entry in ``EXAMPLES``; a new example without both fails
here.  The whole directory is loaded, as a crawl loads it, so each page must be
taken by its own mapping and by no other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crawlstack.extract.rules_tester import guess_content_type, run_rules
from crawlstack.rules import load_rules

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "rules"
PAGES_DIR = ROOT / "tests" / "fixtures" / "pages"


@dataclass(frozen=True)
class Example:
    url: str  # where the saved page came from; the mapping must match it
    fields: dict[str, Any]
    links: list[str]


GHOST = "https://harbournotes.ghost.io"
TUMBLR_API = "https://api.tumblr.com/v2/blog/tidewatcher.tumblr.com/posts"
QUOTES = "https://quotes.toscrape.com"

EXAMPLES: dict[str, Example] = {
    "article": Example(
        url=f"{GHOST}/tides-of-the-old-port/",
        fields={
            "title": "The tides of the old port",
            "summary": "Twice a day the water leaves the old port and takes the town's noise with it."
            " Notes from a winter of tide tables.",
            "author": "Maren Holt",
            "published": "2024-03-14T08:30:00+00:00",
            "modified": "2024-03-15T10:02:11+00:00",
            "tags": ["Harbours", "Local history", "Tide tables"],
            "section": "uncategorised",
            "canonical_url": f"{GHOST}/tides-of-the-old-port/",
            "image": f"{GHOST}/content/images/size/w2000/2024/03/old-port-low-tide.jpg",
            "reading_minutes": 6,
        },
        links=[
            f"{GHOST}/lighthouse-keepers-logbooks/",
            f"{GHOST}/the-night-ferry/",
            f"{GHOST}/winter-market-on-the-quay/",
        ],
    ),
    "gravatar": Example(
        url="https://en.gravatar.com/adalindqvist",
        fields={
            "name": "Ada Lindqvist",
            "location": "Gothenburg, Sweden",
            "about": "Harbour engineer by day, amateur radio operator by night. I write about tides,"
            " old port machinery and the people who kept it running.",
            "photo": "https://secure.gravatar.com/avatar/5b6a0e7f4c1d2e3a9b8c7d6e5f4a3b2c?s=256&d=identicon&r=G",
            "accounts": [
                "https://twitter.com/adalindqvist",
                "https://github.com/adalindqvist",
                "https://www.flickr.com/photos/adalindqvist/",
            ],
            "websites": [f"{GHOST}/", "http://sm6xyz.example.se/logbook/"],
        },
        # Its url_parsers choose the profile's accounts and sites, all off-site, and no mapping
        # uses those pages: a plain crawl follows none of them.  A seed's record that still
        # wants a field the rules give follows them (tests/unit/test_scope.py).
        links=[],
    ),
    "quotes": Example(
        url=f"{QUOTES}/page/2/",
        fields={
            "quote": "“The person, be it gentleman or lady, who has not pleasure in a good novel,"
            " must be intolerably stupid.”",
            "author": "Jane Austen",
        },
        links=[f"{QUOTES}/page/3/", f"{QUOTES}/author/Jane-Austen", f"{QUOTES}/author/Mary-Shelley"],
    ),
    "quotes_author": Example(
        url=f"{QUOTES}/author/Mary-Shelley",
        fields={"name": "Mary Shelley", "born": "August 30, 1797", "born_in": "in London, The United Kingdom"},
        # No url_parsers: every in-scope link on the page (its own site's).
        links=[f"{QUOTES}/", f"{QUOTES}/login"],
    ),
    "reblogs": Example(
        url=f"{TUMBLR_API}?api_key=EXAMPLE_CONSUMER_KEY&reblog_info=true&limit=5",
        fields={
            "blog": "tidewatcher",
            "total_posts": 87,
            "post_ids": [
                "743231498212655104",
                "743190244532928512",
                "743102671250636800",
                "743055818870325248",
                "742998150372982784",
            ],
            "reblogged_from": ["lowwatermark", "harbourlights", "lowwatermark"],
            "source_blogs": ["lowwatermark", "lighthousediaries", "lowwatermark"],
            "tags": ["tides", "neaps", "harbours", "old port", "photography", "quotes", "tides", "springs"],
            "newest_post": "2024-03-16T09:12:44+00:00",
        },
        links=[
            # The next page, its query in canonical (sorted) order.
            f"{TUMBLR_API}?api_key=EXAMPLE_CONSUMER_KEY&limit=5&offset=5&page_number=2&reblog_info=true",
            # The sources on other tumblrs are chosen too, but no mapping uses those pages:
            # a plain crawl does not follow them (tests/unit/test_scope.py).
        ],
    ),
}


def saved_page(stem: str) -> Path:
    pages = sorted(PAGES_DIR.glob(f"{stem}.*"))
    assert len(pages) == 1, f"expected one saved page tests/fixtures/pages/{stem}.* for rules/{stem}.json, got {pages}"
    return pages[0]


def test_every_example_has_a_saved_page_and_expected_results() -> None:
    stems = sorted(p.stem for p in RULES_DIR.glob("*.json"))
    assert stems, f"no example rules in {RULES_DIR}"
    assert stems == sorted(EXAMPLES), "each rules/*.json needs an entry in EXAMPLES, and only those"
    for stem in stems:
        assert guess_content_type(str(saved_page(stem))) is not None


@pytest.mark.parametrize("stem", sorted(EXAMPLES))
def test_example_rule_on_its_saved_page(stem: str) -> None:
    example = EXAMPLES[stem]
    rules = load_rules(RULES_DIR, check_schema=True)
    name = json.loads((RULES_DIR / f"{stem}.json").read_text(encoding="utf-8"))["name"]
    page = saved_page(stem)

    result = run_rules(rules, example.url, page.read_bytes(), guess_content_type(str(page)))

    assert result["mapping"] == name
    assert result["fields"] == example.fields
    assert result["links"] == example.links
