"""The ``Backlog`` port's contract: on DynamoDB (``BacklogStore`` on the embedded emulator), on SQLite (local mode's
``SqliteBacklog``) and ``FakeBacklog`` alike.

Bundles are served shallowest first, in the order added within a depth,
each host apart; a long list is cut into bundles within the byte budget,
none lost; ``replace`` keeps a bundle's place and ``delete`` ends it; every
field of a task comes back as it went in.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBacklog

from crawlstack import aws, settings
from crawlstack.aws import backlog as backlog_module
from crawlstack.aws.backlog import BacklogStore
from crawlstack.local.sqlite import SqliteBacklog, StateDb
from crawlstack.messages import FetchTask
from crawlstack.urls import fingerprint

HOST = "news.invalid"
OTHER = "blog.invalid"
CRAWL = "itest"


@dataclass
class Impl:
    backlog: Any
    sizes: Callable[[str], list[int]]  # each of a host's stored bundles' bytes, as the budget counts them


@pytest.fixture(params=["moto", "fake", "sqlite"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Impl]:
    if request.param == "fake":
        fake = FakeBacklog()
        yield Impl(fake, fake.sizes)
        return
    if request.param == "sqlite":
        db = StateDb(tmp_path / "state.sqlite")

        def stored(host: str) -> list[int]:
            with db.reading() as conn:
                rows = conn.execute("SELECT tasks FROM backlog WHERE host = ? ORDER BY key", (host,)).fetchall()
            return [len(blob) for (blob,) in rows]

        yield Impl(SqliteBacklog(db), stored)
        db.close()
        return
    names: aws.StackNames = request.getfixturevalue("stack_names")
    store = BacklogStore(names.parked)

    def sizes(host: str) -> list[int]:
        resp = aws.client("dynamodb").query(
            TableName=names.parked,
            KeyConditionExpression="#h = :h",
            ExpressionAttributeNames={"#h": "host"},
            ExpressionAttributeValues={":h": {"S": host}},
            ConsistentRead=True,
        )
        return [len(item["tasks"]["B"]) for item in resp["Items"]]

    yield Impl(store, sizes)


def task(url: str, depth: int = 1, host: str = HOST, **fields: Any) -> FetchTask:
    values: dict[str, Any] = {"fp": fingerprint(url), "host": host, "depth": depth, "crawl_id": CRAWL}
    values.update(not_before=0.0, referrer=f"https://{host}/")
    values.update(fields)
    return FetchTask(url=url, **values)


def urls_of(bundles: Any) -> list[str]:
    return [t.url for b in bundles for t in b.tasks]


def long_urls(count: int, length: int = 300, seed: int = 7) -> list[str]:
    """Distinct URLs of ``length`` characters, of lowercase words, as a news site's slugs are."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        path = f"https://{HOST}/archive/{i:05d}/"
        while len(path) < length:
            path += "".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(3, 9))) + "-"
        out.append(path[:length])
    return out


def test_the_shallowest_bundles_come_first_and_hosts_are_kept_apart(impl: Impl) -> None:
    backlog = impl.backlog
    deep = backlog.add(HOST, 3, [task(f"https://{HOST}/d3/{i}", 3) for i in range(2)])
    shallow = backlog.add(HOST, 1, [task(f"https://{HOST}/d1/{i}") for i in range(2)])
    middle = backlog.add(HOST, 2, [task(f"https://{HOST}/d2/0", 2)])
    backlog.add(OTHER, 0, [task(f"https://{OTHER}/", 0, host=OTHER)])
    bundles = backlog.peek(HOST, 10)
    assert [b.key for b in bundles] == [*shallow, *middle, *deep]
    assert all(b.host == HOST for b in bundles)
    assert urls_of(bundles) == [f"https://{HOST}/d1/0", f"https://{HOST}/d1/1", f"https://{HOST}/d2/0"] + [
        f"https://{HOST}/d3/{i}" for i in range(2)
    ]
    assert [[t.depth for t in b.tasks] for b in bundles] == [[1, 1], [2], [3, 3]]
    assert urls_of(backlog.peek(OTHER, 10)) == [f"https://{OTHER}/"]
    assert [b.key for b in backlog.peek(HOST, 2)] == [*shallow, *middle]
    assert backlog.peek("nobody.invalid", 5) == []
    assert backlog.add(HOST, 1, []) == []
    with pytest.raises(ValueError):
        backlog.add(HOST, 10_000, [task(f"https://{HOST}/too-deep", 10_000)])


def test_bundles_of_one_depth_are_served_in_the_order_they_were_added(impl: Impl) -> None:
    keys = [impl.backlog.add(HOST, 2, [task(f"https://{HOST}/{i}", 2)])[0] for i in range(12)]
    assert len(set(keys)) == 12
    bundles = impl.backlog.peek(HOST, 20)
    assert [b.key for b in bundles] == keys
    assert urls_of(bundles) == [f"https://{HOST}/{i}" for i in range(12)]


def test_peek_after_a_key_reads_on_past_it(impl: Impl) -> None:
    first = impl.backlog.add(HOST, 1, [task(f"https://{HOST}/a")])
    second = impl.backlog.add(HOST, 1, [task(f"https://{HOST}/b")])
    deeper = impl.backlog.add(HOST, 2, [task(f"https://{HOST}/c", 2)])
    assert [b.key for b in impl.backlog.peek(HOST, 5, after=first[0])] == [*second, *deeper]
    assert [b.key for b in impl.backlog.peek(HOST, 1, after=first[0])] == second
    assert impl.backlog.peek(HOST, 5, after=deeper[0]) == []
    # A key that is no longer stored (deleted since) still places the read.
    impl.backlog.delete(HOST, second[0])
    assert [b.key for b in impl.backlog.peek(HOST, 5, after=second[0])] == deeper


def test_a_long_list_is_cut_into_bundles_within_the_budget_and_none_is_lost(impl: Impl) -> None:
    tasks = [task(url) for url in long_urls(2000)]
    keys = impl.backlog.add(HOST, 1, tasks)
    assert len(keys) > 1
    bundles = impl.backlog.peek(HOST, len(keys) + 5)
    assert [b.key for b in bundles] == keys
    assert [t for b in bundles for t in b.tasks] == tasks  # every task, once, in order
    sizes = impl.sizes(HOST)
    assert len(sizes) == len(keys)
    assert all(0 < size <= settings.BACKLOG_BUNDLE_BYTES for size in sizes), sizes


def test_500_tasks_of_300_byte_urls_take_few_items(impl: Impl) -> None:
    tasks = [task(url) for url in long_urls(500)]
    total = sum(len(t.to_json()) for t in tasks)
    keys = impl.backlog.add(HOST, 1, tasks)
    assert len(keys) <= math.ceil(total / settings.BACKLOG_BUNDLE_BYTES) + 1, (len(keys), total)
    assert sum(len(b.tasks) for b in impl.backlog.peek(HOST, 100)) == 500


def test_replace_keeps_the_bundles_place_with_fewer_tasks_and_none_deletes_it(impl: Impl) -> None:
    backlog = impl.backlog
    [first] = backlog.add(HOST, 1, [task(f"https://{HOST}/a/{i}") for i in range(5)])
    [second] = backlog.add(HOST, 1, [task(f"https://{HOST}/b/{i}") for i in range(2)])
    backlog.replace(HOST, first, [task(f"https://{HOST}/a/{i}") for i in (3, 4)])
    bundles = backlog.peek(HOST, 5)
    assert [b.key for b in bundles] == [first, second]
    assert urls_of(bundles[:1]) == [f"https://{HOST}/a/3", f"https://{HOST}/a/4"]
    backlog.replace(HOST, first, [])
    assert [b.key for b in backlog.peek(HOST, 5)] == [second]
    # A bundle another holder finished stays gone.
    backlog.replace(HOST, first, [task(f"https://{HOST}/a/4")])
    assert [b.key for b in backlog.peek(HOST, 5)] == [second]


def test_delete_removes_one_bundle(impl: Impl) -> None:
    backlog = impl.backlog
    keys = [backlog.add(HOST, 1, [task(f"https://{HOST}/{i}")])[0] for i in range(3)]
    backlog.delete(HOST, keys[1])
    assert [b.key for b in backlog.peek(HOST, 5)] == [keys[0], keys[2]]
    backlog.delete(HOST, keys[1])  # again: nothing there, no error
    for key in (keys[0], keys[2]):
        backlog.delete(HOST, key)
    assert backlog.peek(HOST, 5) == []


def test_every_field_of_a_task_comes_back_as_it_went_in(impl: Impl) -> None:
    tasks = [
        task(
            f"https://{HOST}/p?q=ü&n=1",
            4,
            not_before=1764067550.123456,
            window=3,
            hops=2,
            referrer=None,
            record_id="rec-1",
            want=("title", "price"),
            attempt=3,
            adaptive_delay=4.25,
        ),
        task(f"https://{HOST}/plain", 4, crawl_id="other-crawl"),
        task(f"https://{HOST}/third", 4, record_id="rec-2", want=("title",), not_before=17.0),
    ]
    impl.backlog.add(HOST, 4, tasks)
    [bundle] = impl.backlog.peek(HOST, 5)
    assert bundle.tasks == tuple(tasks)
    assert [type(t.want) for t in bundle.tasks] == [tuple] * 3
    # And after a replace.
    impl.backlog.replace(HOST, bundle.key, tasks[:1])
    assert impl.backlog.peek(HOST, 5)[0].tasks == (tasks[0],)


def test_add_retries_the_items_dynamodb_left_unprocessed(
    stack_names: aws.StackNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = aws.client("dynamodb")
    real = client.batch_write_item
    calls: list[int] = []

    def flaky(**request: Any) -> dict[str, Any]:
        requests = request["RequestItems"][stack_names.parked]
        calls.append(len(requests))
        if len(calls) > 1:
            return real(**request)
        kept, left = requests[:-3], requests[-3:]
        real(RequestItems={stack_names.parked: kept})
        return {"UnprocessedItems": {stack_names.parked: left}}

    monkeypatch.setattr(client, "batch_write_item", flaky)
    store = BacklogStore(stack_names.parked, bundle_bytes=1024)
    tasks = [task(url) for url in long_urls(200, seed=11)]
    keys = store.add(HOST, 1, tasks)
    assert len(keys) > 28  # more than one batch of 25
    assert calls[:2] == [25, 3]
    bundles = store.peek(HOST, len(keys) + 5)
    assert [b.key for b in bundles] == keys
    assert [t for b in bundles for t in b.tasks] == tasks


def test_add_raises_when_items_stay_unprocessed(stack_names: aws.StackNames, monkeypatch: pytest.MonkeyPatch) -> None:
    client = aws.client("dynamodb")
    monkeypatch.setattr(client, "batch_write_item", lambda **request: {"UnprocessedItems": request["RequestItems"]})
    with pytest.raises(backlog_module.BacklogUnwritten):
        BacklogStore(stack_names.parked).add(HOST, 1, [task(f"https://{HOST}/x")])


def test_an_eventually_consistent_peek_reads_the_same_bundles(impl: Impl) -> None:
    keys = [impl.backlog.add(HOST, 1, [task(f"https://{HOST}/e{i}")])[0] for i in range(3)]
    assert [b.key for b in impl.backlog.peek(HOST, 5, consistent=False)] == keys
    assert [b.key for b in impl.backlog.peek(HOST, 5, after=keys[0], consistent=False)] == keys[1:]
