"""The conditions retries and the adaptive delay rely on, on the embedded emulator and on the unit tests' fakes alike.

``UrlStore.start_fetch`` per try, ``retrying``, ``unclaim`` of a URL waiting
for a retry; ``HostStore.set_adaptive`` and ``reserve``'s condition on the
adaptive delay.  Each test runs against ``crawlstack.aws`` (moto) and
``tests/unit/fakes.py``, so the fakes keep DynamoDB's semantics.
"""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeHosts, FakeUrls

from crawlstack import aws
from crawlstack.politeness import HostSlot
from crawlstack.urls import fingerprint

CRAWL = "itest"
URL = "http://shop.invalid/p/flaky.html"
FP = fingerprint(URL)
HOST = "shop.invalid"


@pytest.fixture(params=["moto", "fake"])
def urls(request: pytest.FixtureRequest) -> Any:
    if request.param == "fake":
        return FakeUrls()
    return aws.UrlStore(request.getfixturevalue("stack_names").urls)


@pytest.fixture(params=["moto", "fake"])
def hosts(request: pytest.FixtureRequest) -> Any:
    if request.param == "fake":
        return FakeHosts()
    return aws.HostStore(request.getfixturevalue("stack_names").hosts)


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
    # A dead fetcher's try 2 is taken over by try 2 only, once its mark is stale.
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


def test_the_adaptive_delay_is_set_and_removed_conditionally(hosts: Any) -> None:
    assert hosts.read_slot(HOST).adaptive_delay == 0.0
    assert hosts.set_adaptive(HOST, 0.0, 2.5) is None
    assert hosts.read_slot(HOST).adaptive_delay == 2.5
    conflict = hosts.set_adaptive(HOST, 0.0, 9.0)
    assert isinstance(conflict, HostSlot) and conflict.adaptive_delay == 2.5
    assert hosts.set_adaptive(HOST, 2.5, 2.25) is None
    assert hosts.set_adaptive(HOST, 2.25, None) is None
    assert hosts.read_slot(HOST).adaptive_delay == 0.0


def test_a_reservation_holds_only_with_the_adaptive_delay_it_was_spaced_by(hosts: Any) -> None:
    empty = hosts.read_slot(HOST)
    assert hosts.reserve(HOST, "c#a", empty, 10.0, 2) is None
    seen = hosts.read_slot(HOST)
    assert hosts.set_adaptive(HOST, 0.0, 4.0) is None
    conflict = hosts.reserve(HOST, "c#b", seen, 12.0, 2)
    assert conflict is not None and conflict.adaptive_delay == 4.0 and conflict.next_slot == 10.0
    assert hosts.reserve(HOST, "c#b", conflict, 14.0, 2) is None
    assert hosts.read_slot(HOST).window == {"c#a", "c#b"}
