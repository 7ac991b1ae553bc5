"""Dispatch's scope bookkeeping (per-host page caps, notes of dropped URLs): one contract on DynamoDB (moto),
on local mode's SQLite and on ``tests/fakes.py``'s ``FakeScopeStore``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeScopeStore, FakeUrls

from crawlstack import aws
from crawlstack.local.sqlite import SqliteScope, SqliteUrls, StateDb

CRAWL = "scope"


@dataclass
class Impl:
    scope: Any
    urls: Any


@pytest.fixture(params=["moto", "fake", "sqlite"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Impl:
    if request.param == "fake":
        urls = FakeUrls()
        return Impl(FakeScopeStore(urls), urls)
    if request.param == "sqlite":
        db = StateDb(tmp_path / "state.sqlite")
        local = SqliteUrls(db)
        return Impl(SqliteScope(db, local), local)
    names: aws.StackNames = request.getfixturevalue("stack_names")
    return Impl(aws.ScopeStore(names.hosts, names.urls), aws.UrlStore(names.urls))


def test_a_hosts_pages_are_taken_in_chunks_within_its_cap_per_crawl(impl: Impl) -> None:
    assert impl.scope.count_host_page(CRAWL, "a.example", 5, pages=3)
    assert not impl.scope.count_host_page(CRAWL, "a.example", 5, pages=3)  # more than is left: none taken
    assert impl.scope.count_host_page(CRAWL, "a.example", 5, pages=2)
    assert not impl.scope.count_host_page(CRAWL, "a.example", 5)
    # Another host, and the same host in another crawl, count apart.
    assert impl.scope.count_host_page(CRAWL, "b.example", 5, pages=5)
    assert impl.scope.count_host_page(f"{CRAWL}-2", "a.example", 5)


def test_a_drop_is_noted_only_where_the_crawl_has_no_item_and_a_claim_takes_it_over(impl: Impl) -> None:
    url = "http://a.example/dropped"
    assert impl.scope.note_drop(CRAWL, "fp-d", url, 2, "port 8081 is not allowed")
    assert not impl.scope.note_drop(CRAWL, "fp-d", url, 2, "port 8081 is not allowed")
    assert impl.urls.state(CRAWL, "fp-d") == "dropped"
    assert impl.urls.claim(CRAWL, "fp-d", url, 1, claimer="m1")  # claimable: found again, in scope now
    assert impl.urls.state(CRAWL, "fp-d") == "queued"
    assert impl.urls.claim(CRAWL, "fp-c", "http://a.example/claimed", 1)
    assert not impl.scope.note_drop(CRAWL, "fp-c", "http://a.example/claimed", 1, "deeper than max depth 2")
