"""The urls table's reads that dispatch and fetch rely on, on moto and on ``tests/fakes.py``'s ``FakeUrls``.

One suite for both, so the fake cannot drift from the adapter.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeUrls

from crawlstack.aws.urls import UrlStore
from crawlstack.local.sqlite import SqliteUrls, StateDb
from crawlstack.ports import Claim, Urls
from crawlstack.records.resolution import RECORD_COMPLETE

CRAWL = "c"
URL = "http://a.example/x"
FP = "fp-x"


@pytest.fixture(params=["moto", "fake", "sqlite"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Urls:
    if request.param == "fake":
        return FakeUrls()
    if request.param == "sqlite":
        return SqliteUrls(StateDb(tmp_path / "state.sqlite"))
    return UrlStore(request.getfixturevalue("stack_names").urls)


def test_seen_is_none_for_a_url_the_crawl_never_claimed(urls: Urls) -> None:
    assert urls.seen(CRAWL, FP) is None


def test_seen_gives_a_claimed_urls_depth_state_and_claimer(urls: Urls) -> None:
    assert urls.claim(CRAWL, FP, URL, 3, claimer="m1")
    assert urls.seen(CRAWL, FP) == Claim(False, 3, "queued", "m1")
    assert urls.seen("other crawl", FP) is None
    assert urls.lower_depth(CRAWL, FP, 1)
    assert urls.seen(CRAWL, FP) == Claim(False, 1, "queued", "m1")


def test_seen_many_says_what_seen_says_of_each_key(urls: Urls) -> None:
    assert urls.claim(CRAWL, FP, URL, 3, claimer="m1")
    assert urls.note_skip(CRAWL, "fp-skipped", "http://a.example/s", 2, RECORD_COMPLETE)
    keys = [(CRAWL, FP), (CRAWL, "fp-skipped"), (CRAWL, "fp-never"), ("other crawl", FP), (CRAWL, FP)]
    assert urls.seen_many(keys) == {
        (CRAWL, FP): Claim(False, 3, "queued", "m1"),
        (CRAWL, "fp-skipped"): None,  # claimable
        (CRAWL, "fp-never"): None,
        ("other crawl", FP): None,
    }
    assert urls.seen_many([]) == {}


def test_seen_many_reads_past_a_hundred_keys(urls: Urls) -> None:
    for i in range(0, 230, 23):
        assert urls.claim(CRAWL, f"fp-{i}", f"http://a.example/{i}", 1)
    found = urls.seen_many((CRAWL, f"fp-{i}") for i in range(230))
    assert len(found) == 230
    assert {fp for (_, fp), claim in found.items() if claim is not None} == {f"fp-{i}" for i in range(0, 230, 23)}


def test_seen_is_none_for_a_url_a_complete_record_passed_over(urls: Urls) -> None:
    assert urls.note_skip(CRAWL, FP, URL, 2, RECORD_COMPLETE)
    assert urls.seen(CRAWL, FP) is None  # claimable: the next message claims it
    assert urls.claim(CRAWL, FP, URL, 2, claimer="m2")
    assert urls.seen(CRAWL, FP) == Claim(False, 2, "queued", "m2")
