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
from typing import Any

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


# --- local mode's SQLite queue after a kill (SQS has no kills to tell apart: a Lambda killed is a failed receive)


def killed_and_resumed(db: StateDb, **kwargs: Any) -> SqliteQueue:
    """The queue as a resumed process opens it, after ``recover``: the earlier holders were killed."""
    queue = SqliteQueue(db, "frontier", dead_letter="frontier-dlq", **kwargs)
    queue.recover()
    return queue


def test_a_kill_gives_back_the_receive_it_cost(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    first = SqliteQueue(db, "frontier", dead_letter="frontier-dlq")
    first.send([("page", 0)])
    for kill in range(settings.MAX_RECEIVE_COUNT + 2):
        queue = first if kill == 0 else killed_and_resumed(db, max_kills=None)
        [got] = queue.receive(10, 300)  # in flight for minutes, as a long handler holds it
        assert got.receive_count == 1, kill
    queue = killed_and_resumed(db, max_kills=None)
    [got] = queue.receive(10, 300)
    assert got.receive_count == 1
    queue.delete([got.receipt])
    assert SqliteQueue(db, "frontier-dlq").depth() == Depth(0, 0, 0)
    db.close()


def test_a_message_in_flight_at_three_kills_in_a_row_is_dead_lettered_as_killed(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    queue = SqliteQueue(db, "frontier", dead_letter="frontier-dlq")
    queue.send([("poison", 0), ("bystander", 0)])
    for _ in range(settings.MAX_CONSECUTIVE_KILLS):
        got = {m.body: m for m in queue.receive(10, 300)}
        assert set(got) == {"poison", "bystander"}
        queue.change_visibility([got["bystander"].receipt], 0)  # its handler returned: not in flight at the kill
        queue = killed_and_resumed(db)
    assert [m.body for m in queue.receive(10, 300)] == ["bystander"]
    [dead] = SqliteQueue(db, "frontier-dlq").dead_letters(10)
    assert (dead.body, dead.reason, dead.receive_count) == ("poison", settings.KILLED_WHILE_PROCESSING, 0)
    db.close()


def test_a_kill_it_was_not_held_at_or_a_handler_that_returned_starts_the_count_again(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    queue = SqliteQueue(db, "frontier", dead_letter="frontier-dlq", max_kills=2)
    queue.send([("m", 0)])
    queue.receive(1, 300)
    queue = killed_and_resumed(db, max_kills=2)  # one kill
    queue = killed_and_resumed(db, max_kills=2)  # killed again before it was received: not its doing
    [got] = queue.receive(1, 300)
    queue = killed_and_resumed(db, max_kills=2)  # one kill
    [got] = queue.receive(1, 300)
    queue.change_visibility([got.receipt], 0)  # its handler returned, failed
    [got] = queue.receive(1, 300)
    assert got.receive_count == 2  # the failure counts, the kills do not
    queue = killed_and_resumed(db, max_kills=2)  # one kill
    assert [m.body for m in queue.receive(1, 300)] == ["m"]
    assert SqliteQueue(db, "frontier-dlq").depth() == Depth(0, 0, 0)
    db.close()


def test_failed_tries_are_dead_lettered_with_their_count_and_moved_back_as_new(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    queue = SqliteQueue(db, "frontier", dead_letter="frontier-dlq", max_receives=2)
    dlq = SqliteQueue(db, "frontier-dlq")
    queue.send([("a", 0), ("b", 0), ("c", 0)])
    for _ in range(2):
        queue.change_visibility([m.receipt for m in queue.receive(10, 300)], 0)
    assert queue.receive(10, 300) == []
    assert sorted((d.body, d.reason, d.receive_count) for d in dlq.dead_letters(10)) == [
        (body, "2 failed tries", 2) for body in ("a", "b", "c")
    ]
    assert dlq.move("frontier", limit=2) == 2
    [left] = dlq.dead_letters(10)
    moved = queue.receive(10, 300)
    assert sorted(m.body for m in moved) == sorted({"a", "b", "c"} - {left.body})
    assert all(m.receive_count == 1 for m in moved)
    db.close()


def test_a_state_from_before_kills_were_counted_gains_the_columns(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    db.ensure(
        "CREATE TABLE messages (queue TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, sent_at REAL NOT NULL,"
        " visible_at REAL NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0, receipt TEXT, PRIMARY KEY (queue, id))"
    )
    with db.transaction() as conn:  # in flight when an older crawlstack was killed
        conn.execute("INSERT INTO messages VALUES ('frontier', 'x', 'old', 0, 9e9, 1, 'r')")
    queue = killed_and_resumed(db)
    [got] = queue.receive(10, 300)
    assert (got.body, got.receive_count) == ("old", 2)  # its holder unknown: counted as before
    db.close()
