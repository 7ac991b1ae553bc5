"""The urls table's claims on the embedded emulator (moto): skips for complete records leave the URL claimable.

A URL passed over because its record was complete (``note_skip`` in dispatch,
``unclaim`` in fetch) was never fetched, so another record's claim may take it;
everything else about a claim stays once per crawl and URL.  Also the fetch
handler's skip, end to end.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeUrls
from test_handlers import sqs_event

from crawlstack import aws, settings
from crawlstack.config import CrawlConfig
from crawlstack.local.pump import LambdaContext
from crawlstack.local.sqlite import SqliteUrls, StateDb
from crawlstack.messages import FetchTask
from crawlstack.records.resolution import RECORD_COMPLETE
from crawlstack.runs.admission import RunAdmissions, admit
from crawlstack.urls import fingerprint
from functions.fetch import handler as fetch

CRAWL = "itest"
URL = "http://shop.invalid/p/new.html"
FP = fingerprint(URL)


@pytest.fixture(params=["moto", "sqlite"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The urls table on DynamoDB (the embedded emulator) and on local mode's SQLite: one contract."""
    if request.param == "sqlite":
        return SqliteUrls(StateDb(tmp_path / "state.sqlite"))
    return aws.UrlStore(request.getfixturevalue("stack_names").urls)


def item(urls: Any) -> dict[str, Any]:
    [found] = [i for i in urls.scan_crawl(CRAWL) if i["url"] == URL]
    return found


def test_a_noted_skip_is_taken_over_by_the_next_claim(urls: Any) -> None:
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


def test_unclaim_only_by_the_claiming_record_and_only_before_the_page_is_fetched(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-a", record_id="r1")
    assert item(urls)["record_id"] == "r1"
    assert not urls.unclaim(CRAWL, FP, "r2", RECORD_COMPLETE, stale_before=0.0)
    assert urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=1001.0)
    given = item(urls)
    assert (given["state"], given["reason"], given["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=1001.0)

    # Another seed takes it; a late copy of r1's task can no longer take it back.
    assert urls.claim(CRAWL, FP, URL, 2, claimer="m-b")
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=2000.0)
    urls.set_outcome(CRAWL, FP, "fetched", status=200)
    assert not urls.claim(CRAWL, FP, URL, 2, claimer="m-c")


def test_a_fetched_page_is_never_given_back(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-a", record_id="r1")
    urls.set_outcome(CRAWL, FP, "fetched", status=200)
    assert not urls.unclaim(CRAWL, FP, "r1", RECORD_COMPLETE, stale_before=10.0**12)
    assert not urls.claim(CRAWL, FP, URL, 1, claimer="m-b")


def test_the_fetch_handler_skips_tasks_of_complete_records_without_a_request(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    urls = aws.UrlStore(stack_names.urls)
    # The host does not exist: a request (robots.txt's or a page's) would end the URL 'failed', not 'skipped'.
    aws.CrawlStore(stack_names.crawls).put(
        CrawlConfig(crawl_id=CRAWL, delay=1.0, seed_hosts=frozenset({"shop.invalid"}))
    )
    aws.ResolvedStore(stack_names.resolved).merge(CRAWL, "r1", ("title",), {"title": "Emma"}, "http://shop.invalid/1")
    admissions = RunAdmissions()
    for n in range(9):
        url = f"http://shop.invalid/p/{n}.html"
        assert urls.claim(CRAWL, fingerprint(url), url, 1, claimer=f"m-{n}", record_id="r1")
        admissions.add(
            FetchTask(
                url=url,
                fp=fingerprint(url),
                host="shop.invalid",
                depth=1,
                crawl_id=CRAWL,
                not_before=0.0,
                record_id="r1",
                want=("title",),
            )
        )
    backlog, runs = aws.BacklogStore(stack_names.parked), aws.RunStore(stack_names.hosts)
    [run] = admit(admissions, backlog, runs, time.time())

    spec = settings.FUNCTIONS["fetch"]
    context = LambdaContext("crawlstack-fetch", spec.memory_mb, spec.timeout_seconds)
    assert fetch.handler(sqs_event(stack, "fetch", run.to_json()), context) == {"batchItemFailures": []}

    items = {i["url"]: i for i in urls.scan_crawl(CRAWL)}
    assert len(items) == 9
    for skipped in items.values():
        assert (skipped["state"], skipped["reason"], skipped["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    blobs = aws.BlobStore(stack_names.bucket)
    assert not list(blobs.keys(settings.PAGES_PREFIX))
    # The crawl log has each skip, with its reason.
    logged = [
        json.loads(line)
        for key in blobs.keys(settings.CRAWL_LOG_PREFIX)
        for line in gzip.decompress(blobs.get(key)).decode().splitlines()
    ]
    assert sorted(e["url"] for e in logged) == sorted(items)
    assert {(e["outcome"], e["reason"]) for e in logged} == {("skipped", RECORD_COMPLETE)}
    # No request at all, not even robots.txt's; the skips took none of the host's spacing, and the run ended.
    assert aws.HostStore(stack_names.hosts).get_robots("http://shop.invalid") is None
    ended = runs.get("shop.invalid")
    assert (ended.run_id, ended.holder, ended.last_start) == (None, None, 0.0)
    assert backlog.peek("shop.invalid", 10) == []
    attrs = aws.client("sqs").get_queue_attributes(
        QueueUrl=stack[settings.ENV_QUEUE_URL["fetch"]],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    assert int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesDelayed"]) == 0


@pytest.mark.parametrize("kind", ["fake", "store"])
def test_a_lost_claim_says_the_depth_found_and_only_an_unfetched_url_takes_a_smaller_one(kind: str, urls: Any) -> None:
    """One contract, every implementation: what dispatch's dedupe and extract rely on for depth."""
    store: Any = FakeUrls() if kind == "fake" else urls
    other = fingerprint("http://shop.invalid/other")
    assert store.claim(CRAWL, FP, URL, 3)
    lost = store.claim(CRAWL, FP, URL, 1)
    assert not lost and (lost.depth, lost.state) == (3, "queued")
    assert not store.lower_depth(CRAWL, FP, 4)  # deeper: no change
    assert store.lower_depth(CRAWL, FP, 1)
    assert not store.lower_depth(CRAWL, FP, 1)
    assert store.depths(CRAWL, [FP, other]) == {FP: 1}
    store.set_outcome(CRAWL, FP, "fetched", status=200)
    assert not store.lower_depth(CRAWL, FP, 0)  # extracted already: its links went out at depth 2
    assert store.depths(CRAWL, [FP]) == {FP: 1}
    assert not store.lower_depth(CRAWL, other, 0)  # no item: never made one
    assert store.depths(CRAWL, [other]) == {}
