"""The crawls table's counts of outcomes only the crawl log holds, on moto and on ``tests/fakes.py``'s ``FakeCrawls``.

One suite for both, so the fake cannot drift from the adapter; ``crawlstack
status`` reads these counts beside the urls table's (``deployed.url_counts``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from fakes import FakeCrawls

from crawlstack import aws, settings
from crawlstack.aws.crawls import CrawlStore
from crawlstack.config import CrawlConfig


@dataclass
class Impl:
    crawls: Any
    logged: Callable[[str], dict[str, int]]  # a crawl's counts, outcome -> tries


@pytest.fixture(params=["moto", "fake"])
def impl(request: pytest.FixtureRequest) -> Impl:
    if request.param == "fake":
        fake = FakeCrawls()
        return Impl(fake, lambda c: dict(fake.logged.get(c, {})))
    names: aws.StackNames = request.getfixturevalue("stack_names")
    store = CrawlStore(names.crawls, cache_seconds=0)

    def logged(crawl_id: str) -> dict[str, int]:
        item = aws.client("dynamodb").get_item(TableName=names.crawls, Key={"crawl_id": {"S": crawl_id}}).get("Item")
        prefix = settings.LOGGED_COUNTER_PREFIX
        return {k[len(prefix) :]: int(v["N"]) for k, v in (item or {}).items() if k.startswith(prefix) and "N" in v}

    return Impl(store, logged)


def crawl_id() -> str:
    return f"c-{uuid.uuid4().hex[:8]}"


def test_counts_add_up_per_crawl_and_outcome(impl: Impl) -> None:
    a, b = crawl_id(), crawl_id()
    impl.crawls.count_logged(a, {"fetched": 3, "skipped": 1})
    impl.crawls.count_logged(a, {"fetched": 2, "skipped": 0})
    impl.crawls.count_logged(b, {"skipped": 4})
    impl.crawls.count_logged(b, {})
    assert impl.logged(a) == {"fetched": 5, "skipped": 1}
    assert impl.logged(b) == {"skipped": 4}


def test_counts_leave_the_crawls_config_as_it_was(impl: Impl) -> None:
    c = crawl_id()
    impl.crawls.put(CrawlConfig(crawl_id=c, delay=2.0, max_pages=7))
    impl.crawls.count_logged(c, {"fetched": 1})
    config = impl.crawls.get(c)
    assert (config.delay, config.max_pages) == (2.0, 7)
    # A crawl with no item (the stack's defaults) reads as its defaults with counts beside them.
    fresh = crawl_id()
    impl.crawls.count_logged(fresh, {"fetched": 1})
    assert impl.crawls.get(fresh).crawl_id == fresh
