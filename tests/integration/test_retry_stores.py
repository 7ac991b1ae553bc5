"""The conditions retries rely on, on the embedded emulator and on the tests' fakes alike.

``UrlStore.start_fetch`` per try, ``retrying``, ``unclaim`` of a URL waiting
for a retry.  Each test runs against ``crawlstack.aws`` (moto) and
``tests/fakes.py``, so the fakes keep DynamoDB's semantics.  The host's
adaptive delay is the run item's, recorded by the lease holder's release
(``tests/integration/test_runs_port.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeUrls

from crawlstack import aws
from crawlstack.urls import fingerprint

CRAWL = "itest"
URL = "http://shop.invalid/p/flaky.html"
FP = fingerprint(URL)


@pytest.fixture(params=["moto", "fake"])
def urls(request: pytest.FixtureRequest) -> Any:
    if request.param == "fake":
        return FakeUrls()
    return aws.UrlStore(request.getfixturevalue("stack_names").urls)


def test_each_try_starts_once_and_only_after_the_one_before(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-1", record_id="r1")
    assert not urls.start_fetch(CRAWL, FP, 100.0, 0.0, attempt=2)  # no try 1 yet
    assert urls.start_fetch(CRAWL, FP, 100.0, 0.0)
    assert not urls.start_fetch(CRAWL, FP, 101.0, 0.0)  # a copy of try 1
    assert urls.retrying(CRAWL, FP) is None
    urls.set_outcome(CRAWL, FP, "retrying", status=503, reason="503", retry_at=130.5)
    assert urls.retrying(CRAWL, FP) == (1, 130.5)
    # A redelivered frontier message cannot claim it back to queued.
    assert not urls.claim(CRAWL, FP, URL, 1, claimer="m-1", record_id="r1")
    assert not urls.start_fetch(CRAWL, FP, 131.0, 0.0)  # try 1 again: never
    assert not urls.start_fetch(CRAWL, FP, 131.0, 0.0, attempt=3)
    assert urls.start_fetch(CRAWL, FP, 131.0, 0.0, attempt=2)
    assert not urls.start_fetch(CRAWL, FP, 132.0, 0.0, attempt=2)  # its copy
    # A dead holder's try 2 is taken over by try 2 only, once its mark is stale.
    assert not urls.start_fetch(CRAWL, FP, 999.0, 500.0)
    assert urls.start_fetch(CRAWL, FP, 999.0, 500.0, attempt=2)
    urls.set_outcome(CRAWL, FP, "failed", status=503, reason="503 Service Unavailable after 2 attempts")
    assert urls.retrying(CRAWL, FP) is None
    assert not urls.start_fetch(CRAWL, FP, 2000.0, 1500.0, attempt=3)


def test_a_stale_first_try_without_an_attempt_may_still_be_taken_over(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1)
    assert urls.start_fetch(CRAWL, FP, 100.0, 0.0)
    assert not urls.start_fetch(CRAWL, FP, 150.0, 50.0)
    assert urls.start_fetch(CRAWL, FP, 300.0, 200.0)


def test_a_url_waiting_for_a_retry_may_be_given_back_by_its_record(urls: Any) -> None:
    assert urls.claim(CRAWL, FP, URL, 1, claimer="m-1", record_id="r1")
    assert urls.start_fetch(CRAWL, FP, 100.0, 0.0)
    urls.set_outcome(CRAWL, FP, "retrying", status=500, retry_at=110.0)
    assert not urls.unclaim(CRAWL, FP, "r2", "record complete", 0.0)
    assert urls.unclaim(CRAWL, FP, "r1", "record complete", 0.0)
    assert not urls.start_fetch(CRAWL, FP, 111.0, 0.0, attempt=2)
