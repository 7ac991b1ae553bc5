"""The conditions retries rely on, on the embedded emulator and on the tests' fakes alike.

``UrlStore.fetch_states`` (what ``crawlstack.fetch.tries.next_try`` decides a try
on), the outcome of a try and ``unclaim`` of a URL waiting for a retry.
Each test runs against ``crawlstack.aws`` (moto) and ``tests/fakes.py``, so
the fakes keep DynamoDB's semantics.  The host's
adaptive delay is the run item's, recorded by the lease holder's release
(``tests/integration/test_runs_port.py``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeUrls

from crawlstack import aws
from crawlstack.fetch.tries import next_try
from crawlstack.local.sqlite import SqliteUrls, StateDb
from crawlstack.messages import FetchTask
from crawlstack.ports import UrlState
from crawlstack.urls import fingerprint

CRAWL = "itest"
URL = "http://shop.invalid/p/flaky.html"
FP = fingerprint(URL)


@pytest.fixture(params=["moto", "fake", "sqlite"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "fake":
        return FakeUrls()
    if request.param == "sqlite":
        return SqliteUrls(StateDb(tmp_path / "state.sqlite"))
    return aws.UrlStore(request.getfixturevalue("stack_names").urls)


def test_each_try_is_fetched_once_and_only_after_the_one_before(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-1", record_id="r1")
    task = FetchTask(URL, FP, "shop.invalid", 1, CRAWL, 0.0)

    def state() -> UrlState | None:
        return urls.fetch_states([(CRAWL, FP), (CRAWL, "not-claimed")]).get((CRAWL, FP))

    assert urls.fetch_states([(CRAWL, "not-claimed")]) == {}
    assert state() == UrlState("queued", 1, 0.0)
    assert next_try(replace(task, attempt=2), state())[0] is False  # no try 1 yet
    assert next_try(task, state()) == (True, None)
    urls.set_outcome(CRAWL, FP, "retrying", status=503, reason="503", retry_at=130.5, attempt=1)
    assert state() == UrlState("retrying", 1, 130.5)
    # A redelivered frontier message cannot claim it back to queued.
    assert not urls.claim(CRAWL, FP, URL, 1, claimer="m-1", record_id="r1")
    assert next_try(task, state()) == (False, replace(task, attempt=2, not_before=130.5))  # try 1 again: never
    assert next_try(replace(task, attempt=3), state()) == (False, None)
    assert next_try(replace(task, attempt=2), state()) == (True, None)
    urls.set_outcome(CRAWL, FP, "failed", status=503, reason="503 Service Unavailable after 2 attempts", attempt=2)
    assert state() == UrlState("failed", 2, 130.5)
    assert next_try(replace(task, attempt=2), state()) == (False, None)  # its copy
    assert next_try(replace(task, attempt=3), state()) == (False, None)


def test_a_url_waiting_for_a_retry_may_be_given_back_by_its_record(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-1", record_id="r1")
    urls.set_outcome(CRAWL, FP, "retrying", status=500, retry_at=110.0, attempt=1)
    assert not urls.unclaim(CRAWL, FP, "r2", "record complete", 0.0)
    assert urls.unclaim(CRAWL, FP, "r1", "record complete", 0.0)
    task = FetchTask(URL, FP, "shop.invalid", 1, CRAWL, 110.0, attempt=2)
    assert next_try(task, urls.fetch_states([(CRAWL, FP)]).get((CRAWL, FP))) == (False, None)
