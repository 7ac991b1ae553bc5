"""The crawl-log objects the fetch Lambda writes under crawl-log/ for Athena."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace

import pytest
from fakes import FakeBlobs
from hostruns import HOST, Env

from crawlstack import settings
from crawlstack.fetch import http
from crawlstack.fetch.crawllog import crawl_log_objects, log_only, outcome_of, url_ends, write_crawl_log
from crawlstack.fetch.outcomes import Fetched
from crawlstack.fetch.warc import Exchange
from crawlstack.messages import FetchTask
from crawlstack.records.resolution import RECORD_COMPLETE
from crawlstack.urls import fingerprint

NOW = 1_700_000_000.0  # 2023-11-14


def task(url: str, crawl_id: str = "c", depth: int = 1) -> FetchTask:
    host = url.split("/")[2]
    return FetchTask(url=url, fp=fingerprint(url), host=host, depth=depth, crawl_id=crawl_id, not_before=0)


def fetched(url: str, crawl_id: str = "c", started_at: float | None = None) -> Fetched:
    exchange = Exchange(
        url=url,
        method="GET",
        request_headers=[],
        status=200,
        reason="OK",
        response_headers=[],
        body=b"",
        ip_address=None,
        metadata={"fetched_at": NOW - 5},
    )
    return Fetched(task(url, crawl_id), "fetched", 200, exchange=exchange, started_at=started_at)


def lines(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in gzip.decompress(data).decode().splitlines()]


def test_one_object_per_crawl_with_one_line_per_outcome() -> None:
    batch = [
        fetched("http://a.example/1", started_at=NOW - 5.25),
        Fetched(task("http://b.example/robots-no", depth=2), "skipped", reason="robots.txt"),
        Fetched(task("http://a.example/2", crawl_id="other"), "failed", reason="timeout"),
    ]
    blobs = FakeBlobs()
    keys = write_crawl_log(blobs, batch, NOW)
    assert len(keys) == 2 and sorted(keys) == blobs.keys(settings.CRAWL_LOG_PREFIX)
    by_crawl = {k.split("/")[1]: k for k in keys}
    assert set(by_crawl) == {"crawl_id=c", "crawl_id=other"}
    for key in keys:
        assert key.startswith(settings.CRAWL_LOG_PREFIX) and "/dt=2023-11-14/" in key and key.endswith(".jsonl.gz")
        assert "example" not in key
        assert blobs.objects[(blobs.bucket, key)][1] == "application/x-ndjson"
    assert lines(blobs.get(by_crawl["crawl_id=c"])) == [
        {
            "url": "http://a.example/1",
            "outcome": "fetched",
            "reason": None,
            "status": 200,
            "depth": 1,
            "crawl_id": "c",
            "host": "a.example",
            "fetched_at": NOW - 5,
            "started_at": "2023-11-14T22:13:14.750000+00:00",
            "truncated": None,
            "attempt": 1,
            "warc": None,
        },
        {
            "url": "http://b.example/robots-no",
            "outcome": "skipped",
            "reason": "robots.txt",
            "status": None,
            "depth": 2,
            "crawl_id": "c",
            "host": "b.example",
            "fetched_at": NOW,
            "started_at": None,
            "truncated": None,
            "attempt": 1,
            "warc": None,
        },
    ]
    [other] = lines(blobs.get(by_crawl["crawl_id=other"]))
    assert (other["outcome"], other["reason"], other["crawl_id"]) == ("failed", "timeout", "other")


def test_a_redelivered_batch_overwrites_its_object() -> None:
    first = crawl_log_objects([fetched("http://a.example/1"), fetched("http://a.example/2")], NOW)
    again = crawl_log_objects([fetched("http://a.example/2"), fetched("http://a.example/1")], NOW + 10)
    assert list(first) == list(again)
    assert crawl_log_objects([fetched("http://a.example/1")], NOW).keys() != first.keys()


def test_no_outcomes_no_object() -> None:
    blobs = FakeBlobs()
    assert write_crawl_log(blobs, [], NOW) == [] and blobs.objects == {}


def test_odd_crawl_ids_cannot_break_the_partition_layout() -> None:
    [key] = crawl_log_objects([fetched("http://a.example/1", crawl_id="x/y=z")], NOW)
    assert key.split("/")[1] == "crawl_id=x%2Fy%3Dz"


def test_a_host_runs_flush_writes_a_line_for_every_outcome_of_its_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch)
    origin = f"http://{HOST}"
    env.robots[origin] = lambda: http.FetchResult(
        origin + "/robots.txt", status=200, body=b"User-agent: *\nDisallow: /private\n", finished_at=env.clock.now
    )
    msg = env.admit(["a", "private/b", "gone", "busy"], robots=False)
    env.web.page(env.url("gone"), status=None, error="DNS lookup failed: no such host")
    env.web.page(env.url("busy"), status=503, reason="Service Unavailable")
    t0 = env.clock.now
    result = env.run(msg)
    [key] = env.crawl_logs()
    assert key.startswith(f"{settings.CRAWL_LOG_PREFIX}crawl_id=c/dt=") and "example" not in key
    by_url = {str(line["url"]): line for line in lines(env.blobs.get(key))}
    # The robots.txt request is the host's, not a task's: no line of its own.
    assert set(by_url) == {env.url(p) for p in ("a", "private/b", "gone", "busy")}
    summary = {
        url.rsplit("/", 1)[-1]: (line["outcome"], line["status"], line["reason"]) for url, line in by_url.items()
    }
    assert summary == {
        "a": ("fetched", 200, None),
        "b": ("skipped", None, "robots: disallowed by robots.txt"),
        "gone": ("failed", None, "DNS lookup failed: no such host"),
        "busy": ("retry", 503, "503 Service Unavailable on attempt 1 of 3; retry in 2.0s"),
    }
    # A response's line has its request's time; a skip, the flush's.
    assert by_url[env.url("a")]["fetched_at"] == t0 + 0.25
    assert by_url[env.url("private/b")]["fetched_at"] == env.clock.now
    assert {line["host"] for line in by_url.values()} == {HOST}
    assert result.ends == {HOST: "rescheduled"}


def test_a_urls_end_is_the_tables_or_else_the_last_line_only_the_crawl_log_holds() -> None:
    claimed = {"url": "http://a.example/1", "state": "queued", "depth": 1, "seen_at": NOW + 50}
    fetched_line = {"url": claimed["url"], "outcome": "fetched", "status": 200, "attempt": 1, "fetched_at": NOW}
    # A first try's page: the table keeps its claim, even one a redelivered message wrote again since.
    assert outcome_of(claimed, fetched_line)["state"] == "fetched"
    assert outcome_of(claimed, fetched_line)["status"] == 200
    # The table's end wins: extract's failure of a page fetched.
    failed = {**claimed, "state": "failed", "reason": "extraction failed: X"}
    assert outcome_of(failed, fetched_line) == failed
    # A record's skip is the table's (unclaim wrote it): a claim that took it over since is queued.
    record_skip = {**fetched_line, "outcome": "skipped", "reason": RECORD_COMPLETE, "status": None}
    assert not log_only(record_skip)
    assert outcome_of(claimed, record_skip) == claimed
    # A retry's lines are the table's too.
    assert not log_only({**fetched_line, "outcome": "retry"}) and not log_only({**fetched_line, "attempt": 2})


def test_url_ends_reads_a_crawls_objects_and_keeps_the_last_line_only_the_log_holds() -> None:
    blobs = FakeBlobs()
    first = Fetched(task("http://a.example/1"), "retry", 503, reason="503 Service Unavailable", started_at=NOW - 11)
    again = fetched("http://a.example/1", started_at=NOW - 6)  # a refetch after a crash: the same first try, later
    write_crawl_log(blobs, [first], NOW - 10)
    write_crawl_log(blobs, [again], NOW)
    write_crawl_log(blobs, [fetched("http://a.example/1", crawl_id="other")], NOW)
    items = [{"url": "http://a.example/1", "state": "retrying", "attempt": 1}]
    [end] = url_ends(items, blobs, "c")
    assert (end["state"], end["status"]) == ("fetched", 200)
    # The refetch's line replaced the first try's (same object), so one start; the other crawl's is not this one's.
    assert end["tries"] == [("2023-11-14T22:13:14.000000+00:00", NOW - 5)]


def test_url_ends_gives_every_tries_start_in_order() -> None:
    blobs = FakeBlobs()
    second = Fetched(
        replace(task("http://a.example/1"), attempt=2), "failed", 503, started_at=NOW - 1, finished_at=NOW - 0.5
    )
    first = Fetched(
        task("http://a.example/1"),
        "retry",
        503,
        reason="503 Service Unavailable",
        started_at=NOW - 11,
        finished_at=NOW - 10.5,
    )
    write_crawl_log(blobs, [second], NOW)
    write_crawl_log(blobs, [first], NOW - 10)
    write_crawl_log(blobs, [first], NOW - 10 + 86_400)  # redelivered a day later: another object, one try
    items = [{"url": "http://a.example/1", "state": "fetched", "attempt": 2}]
    [end] = url_ends(items, blobs, "c")
    # Each try once, with when its response ended.
    assert end["tries"] == [
        ("2023-11-14T22:13:09.000000+00:00", NOW - 10.5),
        ("2023-11-14T22:13:19.000000+00:00", NOW - 0.5),
    ]
