"""The queue port (``crawlstack.queueing``): one contract on SQS (moto) and on local mode's SQLite queues.

The moto queues are the stack's own (``crawlstack.local.resources``: each
with its dead-letter queue after ``MAX_RECEIVE_COUNT`` receives); the
SQLite ones are made alike.  No test sleeps longer than a one-second delay.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from crawlstack import aws, settings
from crawlstack.local.sqlite import StateDb
from crawlstack.local.sqlite.queues import SqliteQueue
from crawlstack.queueing import Depth, MessageQueue


@dataclass
class Impl:
    queue: MessageQueue
    dead_letter: MessageQueue


@pytest.fixture(params=["moto", "sqlite"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Impl]:
    if request.param == "sqlite":
        db = StateDb(tmp_path / "state.sqlite")
        yield Impl(SqliteQueue(db, "frontier", dead_letter="frontier-dlq"), SqliteQueue(db, "frontier-dlq"))
        db.close()
        return
    names: aws.StackNames = request.getfixturevalue("stack_names")
    yield Impl(aws.Queue(names.frontier_queue, "frontier"), aws.Queue(names.dead_letter_queues["frontier"], "dlq"))


def test_messages_sent_are_received_once_each_and_gone_once_deleted(impl: Impl) -> None:
    assert impl.queue.send([(f"m{i}", 0) for i in range(13)]) == 13
    first = impl.queue.receive(10, 30)
    second = impl.queue.receive(10, 30)
    assert sorted(m.body for m in first + second) == sorted(f"m{i}" for i in range(13))
    assert all(m.receive_count == 1 and m.sent_at <= time.time() + 1 for m in first + second)
    assert impl.queue.depth() == Depth(visible=0, in_flight=13, delayed=0)
    impl.queue.delete([m.receipt for m in first + second])
    assert impl.queue.depth() == Depth(0, 0, 0) and impl.queue.receive(10, 30) == []


def test_a_delayed_message_is_not_received_before_its_delay(impl: Impl) -> None:
    impl.queue.send([("later", 1), ("now", 0)])
    assert [m.body for m in impl.queue.receive(10, 30)] == ["now"]
    assert impl.queue.depth().delayed == 1
    time.sleep(1.2)
    [later] = impl.queue.receive(10, 30)
    assert later.body == "later"


def test_a_message_not_deleted_comes_back_and_goes_to_the_dead_letter_queue_after_its_receives(impl: Impl) -> None:
    impl.queue.send([("poison", 0)])
    for count in range(1, settings.MAX_RECEIVE_COUNT + 1):
        [got] = impl.queue.receive(10, 30)
        assert (got.body, got.receive_count) == ("poison", count)
        assert impl.queue.receive(10, 30) == []  # hidden while in flight
        impl.queue.change_visibility([got.receipt], 0)  # failed: visible again at once
    assert impl.queue.receive(10, 30) == []  # received its last time: moved, not handed out
    [dead] = impl.dead_letter.receive(10, 30)
    assert dead.body == "poison"
    impl.dead_letter.delete([dead.receipt])


def test_receivers_at_once_never_get_one_message_twice(impl: Impl) -> None:
    impl.queue.send([(f"m{i}", 0) for i in range(60)])
    got: list[str] = []
    lock = threading.Lock()

    def drain() -> None:
        while batch := impl.queue.receive(7, 30):
            with lock:
                got.extend(m.body for m in batch)

    threads = [threading.Thread(target=drain) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == sorted(f"m{i}" for i in range(60))


def test_a_receive_hands_out_a_message_once_even_with_no_visibility_timeout(impl: Impl) -> None:
    impl.queue.send([("a", 0), ("b", 0)])
    got = impl.queue.receive(10, 0)
    assert sorted(m.body for m in got) == ["a", "b"] and all(m.receive_count == 1 for m in got)
    impl.queue.delete([m.receipt for m in impl.queue.receive(10, 30)])
