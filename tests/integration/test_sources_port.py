"""The sources store (``watch.sources.SourceStore``): one contract for each implementation.

Local mode's SQLite store is the only one until the deployed watch (DynamoDB) is built;
this suite is where that one joins.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlstack.local.sqlite import StateDb
from crawlstack.local.sqlite.sources import SqliteSources
from crawlstack.watch.sources import DuplicateSource, Source, SourceStore


def a_source(source_id: str, url: str = "http://news.example/") -> Source:
    return Source(source_id, url, "listing", pagination="cursor", pagination_parameter="max_id")


@pytest.fixture(params=["sqlite-file", "sqlite-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SourceStore:
    path = tmp_path / "state.sqlite" if request.param == "sqlite-file" else ":memory:"
    return SqliteSources(StateDb(path))


def test_added_sources_read_back_whole_and_by_id(store: SourceStore) -> None:
    store.add_all([a_source("b"), a_source("a", "http://news.example/a")])
    assert [s.id for s in store.list()] == ["a", "b"]
    assert store.get("b") == a_source("b") and store.get("zz") is None


@pytest.mark.parametrize("batch", [["a", "c"], ["c", "c"]], ids=["taken", "twice"])
def test_a_batch_with_a_duplicate_id_adds_nothing(store: SourceStore, batch: list[str]) -> None:
    store.add_all([a_source("a")])
    with pytest.raises(DuplicateSource) as raised:
        store.add_all([a_source(i) for i in batch])
    assert raised.value.source_id in batch
    assert [s.id for s in store.list()] == ["a"]


def test_remove_says_whether_there_was_one(store: SourceStore) -> None:
    store.add_all([a_source("a")])
    assert store.remove("a") and not store.remove("a") and store.list() == []
