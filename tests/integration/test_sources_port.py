"""The sources store (``watch.sources.SourceStore``): one contract for local mode's SQLite and the watch table."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlstack.aws import DynamoSources
from crawlstack.local.sqlite import StateDb
from crawlstack.local.sqlite.sources import SqliteSources
from crawlstack.watch.sources import DuplicateSource, Source, SourceStore


def a_source(source_id: str, url: str = "http://news.example/") -> Source:
    return Source(source_id, url, "listing", pagination="cursor", pagination_parameter="max_id")


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SourceStore:
    if request.param == "dynamodb":
        return DynamoSources(request.getfixturevalue("stack_names").watch)
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


def test_a_batch_over_one_transaction_is_added_whole_or_not_at_all(store: SourceStore) -> None:
    store.add_all([a_source("s-150")])
    many = [a_source(f"s-{n:03d}", f"http://news.example/{n}") for n in range(160)]
    with pytest.raises(DuplicateSource):
        store.add_all(many)
    assert [s.id for s in store.list()] == ["s-150"]
    store.add_all([s for s in many if s.id != "s-150"])
    assert len(store.list()) == 160
