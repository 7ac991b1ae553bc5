"""Held work of stopped crawls: one contract on DynamoDB (moto), on local mode's SQLite and on the tests' fake."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeCrawls, FakeHeld

from crawlstack import aws, jobs
from crawlstack.config import CrawlConfig
from crawlstack.local.sqlite import SqliteCrawls, SqliteHeld, StateDb


@dataclass
class Impl:
    held: Any
    crawls: Any


@pytest.fixture(params=["moto", "fake", "sqlite"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Impl:
    if request.param == "fake":
        crawls = FakeCrawls()
        return Impl(FakeHeld(crawls), crawls)
    if request.param == "sqlite":
        db = StateDb(tmp_path / "state.sqlite")
        local = SqliteCrawls(db)
        return Impl(SqliteHeld(db, local), local)
    names: aws.StackNames = request.getfixturevalue("stack_names")
    return Impl(aws.HeldStore(names.parked, names.crawls), aws.CrawlStore(names.crawls, cache_seconds=0))


def test_work_is_held_only_while_its_crawl_is_stopped_and_read_back_in_key_order(impl: Impl) -> None:
    c = f"held-{uuid.uuid4().hex[:8]}"
    assert not impl.held.hold(c, "t#1", "{}")  # no such crawl
    impl.crawls.put(CrawlConfig(crawl_id=c))
    assert not impl.held.hold(c, "t#1", "{}")  # running
    impl.crawls.set_state(c, jobs.STOPPED)
    assert impl.held.hold(c, "t#2", '{"n": 2}')
    assert impl.held.hold(c, "m#1", '{"n": 1}')
    assert impl.held.held(c, 10) == [("m#1", '{"n": 1}'), ("t#2", '{"n": 2}')]
    assert impl.held.held(c, 1) == [("m#1", '{"n": 1}')]
    impl.held.release(c, "m#1")
    impl.crawls.set_state(c, jobs.RUNNING)
    assert not impl.held.hold(c, "t#3", "{}")  # resumed: nothing lands after
    assert impl.held.held(c, 10) == [("t#2", '{"n": 2}')]


def test_sqlite_held_work_shares_the_crawls_database(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SqliteHeld(StateDb(tmp_path / "a.sqlite"), SqliteCrawls(StateDb(tmp_path / "b.sqlite")))
