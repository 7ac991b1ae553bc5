"""The urls table's claims on the embedded emulator (moto): skips for complete records leave the URL claimable.

A URL passed over because its record was complete (``note_skip`` in dispatch,
``unclaim`` in fetch) was never fetched, so another record's claim may take it;
everything else about a claim stays once per crawl and URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from crawlstack import aws, settings, wiring
from crawlstack.local import resources
from crawlstack.local.emulator import EmbeddedAws
from crawlstack.resolution import RECORD_COMPLETE
from crawlstack.urls import fingerprint

CRAWL = "itest"
URL = "http://shop.invalid/p/new.html"
FP = fingerprint(URL)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    monkeypatch.setenv(settings.ENV_RULES_DIR, "")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    with EmbeddedAws():
        wiring.reset()
        names = resources.create_all(visibility_timeout=30)
        for key, value in names.items():
            monkeypatch.setenv(key, value)
        try:
            yield names
        finally:
            wiring.reset()


@pytest.fixture
def urls(stack: dict[str, str]) -> aws.UrlStore:
    return aws.UrlStore()


def item(urls: aws.UrlStore) -> dict[str, Any]:
    [found] = [i for i in urls.scan_crawl(CRAWL) if i["url"] == URL]
    return found


def test_a_noted_skip_is_taken_over_by_the_next_claim(urls: aws.UrlStore) -> None:
    assert urls.note_skip(CRAWL, FP, URL, 2, RECORD_COMPLETE)
    noted = item(urls)
    assert (noted["state"], noted["reason"], noted["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    assert noted["depth"] == 2
    assert "seen_at" in noted and "finished_at" in noted  # the crawl log sorts and reports it
    assert not urls.note_skip(CRAWL, FP, URL, 3, RECORD_COMPLETE)  # a second note changes nothing
    assert item(urls) == noted

    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-b")
    claimed = item(urls)
    assert (claimed["state"], claimed["claimed_by"], claimed["depth"]) == ("queued", "m-b", 1)
    assert "claimable" not in claimed and "reason" not in claimed and "record_id" not in claimed
    # From then on, once per crawl and URL as always; the redelivered message may claim again.
    assert not urls.claim(CRAWL, FP, URL, 1, claimer="m-c")
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-b")
    assert not urls.note_skip(CRAWL, FP, URL, 1, RECORD_COMPLETE)
    assert item(urls)["state"] == "queued"


def test_unclaim_only_by_the_claiming_record_and_only_before_the_page_is_fetched(urls: aws.UrlStore) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-a", record_id="r1")
    assert item(urls)["record_id"] == "r1"
    assert not urls.unclaim(CRAWL, FP, "r2", RECORD_COMPLETE, stale_before=0.0)
    # Being fetched (and not stale): left alone.
    assert urls.start_fetch(CRAWL, FP, now=1000.0, stale_before=0.0)
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=999.0)
    # Its fetcher died long ago: the URL is given back.
    assert urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=1001.0)
    given = item(urls)
    assert (given["state"], given["reason"], given["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=1001.0)
    assert not urls.start_fetch(CRAWL, FP, now=1002.0, stale_before=1001.0)

    # Another seed takes it; a late copy of r1's task can no longer take it back.
    assert urls.claim(CRAWL, FP, URL, 2, claimer="m-b")
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=2000.0)
    assert urls.start_fetch(CRAWL, FP, now=1003.0, stale_before=0.0)
    urls.set_outcome(CRAWL, FP, "fetched", status=200)
    assert not urls.claim(CRAWL, FP, URL, 2, claimer="m-c")


def test_a_fetched_page_is_never_given_back(urls: aws.UrlStore) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-a", record_id="r1")
    urls.set_outcome(CRAWL, FP, "fetched", status=200)
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=10.0**12)
    assert not urls.claim(CRAWL, FP, URL, 1, claimer="m-b")
