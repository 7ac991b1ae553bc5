"""The crawls table's contract on moto, on local mode's SQLite and on ``tests/fakes.py``'s ``FakeCrawls``.

One suite for both, so the fake cannot drift from the adapter; ``crawlstack
status`` reads these counts beside the urls table's (``crawlstack.cli.status.url_counts``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeCrawls

from crawlstack import aws, jobs, settings
from crawlstack.aws.crawls import CrawlStore
from crawlstack.config import CrawlConfig
from crawlstack.local.sqlite import SqliteCrawls, StateDb


@dataclass
class Impl:
    crawls: Any
    logged: Callable[[str], dict[str, int]]  # a crawl's counts, outcome -> tries


@pytest.fixture(params=["moto", "fake", "sqlite"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Impl:
    if request.param == "fake":
        fake = FakeCrawls()
        return Impl(fake, lambda c: dict(fake.logged.get(c, {})))
    if request.param == "sqlite":
        local = SqliteCrawls(StateDb(tmp_path / "state.sqlite"))
        prefix = settings.LOGGED_COUNTER_PREFIX
        return Impl(local, lambda c: {k[len(prefix) :]: v for k, v in local.item(c).items() if k.startswith(prefix)})
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


def test_the_page_budget_is_taken_in_chunks_and_never_past_its_cap(impl: Impl) -> None:
    c = crawl_id()
    impl.crawls.put(CrawlConfig(crawl_id=c, max_pages=10))
    assert impl.crawls.take_pages(c, 10, 4) == 4
    assert impl.crawls.take_pages(c, 10, 7) is None  # more than is left: nothing taken
    assert impl.crawls.take_pages(c, 10, 6) == 10
    assert not impl.crawls.count_page(c, 10)


def test_seed_hosts_add_up_and_a_crawl_is_stopped_and_run_again(impl: Impl) -> None:
    c = crawl_id()
    impl.crawls.put(CrawlConfig(crawl_id=c, seed_hosts=frozenset({"a.example"})))
    impl.crawls.add_seed_host(c, "b.example")
    impl.crawls.add_seed_host(c, "a.example")
    assert impl.crawls.get(c, max_age=0).seed_hosts >= {"a.example", "b.example"}
    impl.crawls.set_state(c, jobs.STOPPED)
    assert impl.crawls.get(c, max_age=0).stopped
    impl.crawls.set_state(c, jobs.RUNNING)
    assert not impl.crawls.get(c, max_age=0).stopped
    with pytest.raises(jobs.UnknownCrawl):
        impl.crawls.set_state(crawl_id(), jobs.STOPPED)


def test_a_new_config_is_stored_once_and_an_existing_one_kept(impl: Impl) -> None:
    c = crawl_id()
    assert impl.crawls.put_new(CrawlConfig(crawl_id=c, max_depth=0, delay=2.0))
    assert not impl.crawls.put_new(CrawlConfig(crawl_id=c, max_depth=5))
    kept = impl.crawls.get(c, max_age=0)
    assert (kept.max_depth, kept.delay) == (0, 2.0)


def test_a_new_crawl_stored_with_only_some_settings_takes_the_rest_from_the_defaults(
    impl: Impl, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As ``crawlstack seed --crawl-id`` stores the flags given: the others follow the stack's defaults.
    monkeypatch.delenv(settings.ENV_USER_AGENT, raising=False)
    c = crawl_id()
    given = CrawlConfig(crawl_id=c, max_pages=9, user_agent="not/stored", max_pages_per_host=None)
    assert impl.crawls.put_new(given, only=("max_pages", "max_pages_per_host"))
    kept = impl.crawls.get(c, max_age=0)
    assert (kept.max_pages, kept.max_pages_per_host, kept.state) == (9, None, "running")
    assert kept.user_agent == settings.DEFAULT_USER_AGENT
