"""A watch's SQLite state: new items decided by the insert that took, events in OUT/events.jsonl exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlstack.local.outdir import StateError
from crawlstack.local.sqlite import StateDb
from crawlstack.local.sqlite.watch import SqliteWatch
from crawlstack.watch.check import Validators, event_id
from crawlstack.watch.schedule import Check, SourceState


def events_for(source_id: str, *identities: str) -> dict[str, dict[str, Any]]:
    return {i: {"event_id": event_id(source_id, i), "source_id": source_id, "identity": i} for i in identities}


def file_ids(path: Path) -> list[str]:
    return [json.loads(line)["identity"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_an_item_is_new_once_and_its_event_is_written_once(tmp_path: Path) -> None:
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
    first = {"a": "k1 p1", "b": "k1 p1"}
    assert watch.record_page("s", "k1 p1", ["a", "b", "a"], events_for("s", "a", "b"), 10.0) == first
    # The same page again (a redelivery): the same answer, and no event twice.
    assert watch.record_page("s", "k1 p1", ["a", "b"], events_for("s", "a", "b"), 11.0) == first
    # A later check's page overlapping it: b was first seen on the first.
    assert watch.record_page("s", "k2 p1", ["b", "c"], events_for("s", "b", "c"), 12.0) == {"b": "k1 p1", "c": "k2 p1"}
    # Identities are per source.
    assert watch.record_page("t", "k1 p1", ["a"], events_for("t", "a"), 12.0) == {"a": "k1 p1"}
    assert watch.publish() == 4 and watch.publish() == 0
    assert file_ids(tmp_path / "events.jsonl") == ["a", "b", "c", "a"]
    assert watch.items_seen("s") == 3


def test_lines_a_kill_left_after_the_last_commit_are_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    db = StateDb(tmp_path / "state.sqlite")
    watch = SqliteWatch(db, path)
    watch.record_page("s", "k1 p1", ["a"], events_for("s", "a"), 1.0)
    watch.publish()
    # A publish whose commit never happened: its lines are in the file, not in the state.
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"identity": "ghost"}\n{"identity": "half')
    db.close()
    resumed = SqliteWatch(StateDb(tmp_path / "state.sqlite"), path)
    resumed.claim_events()
    assert file_ids(path) == ["a"]
    resumed.record_page("s", "k2 p1", ["a", "b"], events_for("s", "a", "b"), 2.0)
    resumed.publish()
    assert file_ids(path) == ["a", "b"]


def test_a_sources_schedule_state_and_validators_read_back(tmp_path: Path) -> None:
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
    state = SourceState(1.25, 0.5, (Check(1.0, 3), Check(2.0, 0)))
    watch.save_state("s", state, Validators('"v1"', None))
    watch.save_state("t", SourceState(0.07, 2.0), None)
    assert watch.states() == {"s": (state, Validators('"v1"', None)), "t": (SourceState(0.07, 2.0), None)}


def test_a_checks_end_counts_its_pages_new_items_once(tmp_path: Path) -> None:
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
    first = SourceState(1.0, 0.0)
    watch.set_validators("s", Validators('"v1"', None), first)
    watch.page_done("s", "k1", 1, 3)
    watch.page_done("s", "k1", 2, 2)
    watch.page_done("s", "k1", 2, 2)  # a redelivered page replaces its own count
    seen: list[int] = []

    def update(state: SourceState, new_items: int) -> SourceState:
        seen.append(new_items)
        return SourceState(state.priority + new_items, state.tokens, (*state.history, Check(5.0, new_items)))

    assert watch.finish_check("s", "k1", update, first)
    assert not watch.finish_check("s", "k1", update, first)  # the last page redelivered: once only
    assert seen == [5]
    state, validators = watch.states()["s"]
    assert (state.priority, state.history, validators) == (6.0, (Check(5.0, 5),), Validators('"v1"', None))


def test_a_plan_changes_tokens_on_the_state_as_it_is_now(tmp_path: Path) -> None:
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
    first = SourceState(2.0, 2.0)
    watch.page_done("s", "k1", 1, 4)
    # A check ends between reading the states for a plan and writing it: its history must survive the plan.
    assert watch.finish_check("s", "k1", lambda st, n: SourceState(3.0, st.tokens, (Check(1.0, n),)), first)
    watch.plan([("s", 10.0), ("t", 11.0)], {"s": -1.0, "t": 0.5}, {"s": first, "t": SourceState(1.0, 1.0)}, 100.0)
    states = {sid: st for sid, (st, _) in watch.states().items()}
    assert states["s"] == SourceState(3.0, 1.0, (Check(1.0, 4),))
    assert states["t"] == SourceState(1.0, 1.5)
    assert watch.due(10.5) == [("s", 10.0)] and watch.day_end() == 100.0


def test_checks_that_never_ended_are_closed_with_what_their_pages_found(tmp_path: Path) -> None:
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
    first = SourceState(1.0, 0.0)
    watch.plan([("s", 10.0), ("s", 20.0)], {"s": 0.0}, {"s": first}, 100.0)
    watch.mark_sent([("s", 10.0), ("s", 20.0)], wall=1000.0)
    watch.page_done("s", "slot-10", 1, 2)  # the check at 10 read a page, then its next page was dropped
    ended: list[tuple[str, str]] = []

    def end(source_id: str, slot: str) -> None:
        ended.append((source_id, slot))
        watch.finish_check(
            source_id, slot, lambda st, n: SourceState(st.priority, st.tokens, (*st.history, Check(0, n))), first
        )

    assert watch.settle(999.0, lambda at: f"slot-{at:g}", end) == 0  # not stale yet
    assert watch.settle(1001.0, lambda at: f"slot-{at:g}", end) == 2
    assert ended == [("s", "slot-10"), ("s", "slot-20")]
    assert [c.new_items for c in watch.states()["s"][0].history] == [2, 0]
    assert watch.settle(2000.0, lambda at: f"slot-{at:g}", end) == 0  # closed rows are not looked at again


def test_an_events_file_the_state_did_not_write_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"identity": "another watch\'s"}\n', encoding="utf-8")
    before = path.read_bytes()
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), path)
    with pytest.raises(StateError, match="this watch's state did not write"):
        watch.claim_events()
    assert path.read_bytes() == before


def test_an_events_file_moved_away_starts_again_and_one_cut_short_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), path)
    watch.claim_events()
    watch.record_page("s", "k1 p1", ["a", "b"], events_for("s", "a", "b"), 1.0)
    watch.publish()
    path.rename(tmp_path / "events-1.jsonl")  # a consumer took the file
    watch.claim_events()
    watch.record_page("s", "k2 p1", ["c"], events_for("s", "c"), 2.0)
    watch.publish()
    assert file_ids(path) == ["c"]  # a new file of the new events, with no gap of NULs where the old ones were
    path.write_text("", encoding="utf-8")  # emptied meanwhile: appended to, never padded out
    watch.record_page("s", "k3 p1", ["d"], events_for("s", "d"), 3.0)
    watch.publish()
    assert file_ids(path) == ["d"]
    path.write_bytes(path.read_bytes()[:5])
    with pytest.raises(StateError, match="5 bytes this watch's state did not write"):
        watch.claim_events()


def test_a_local_watch_run_again_releases_the_claims_its_killed_run_left(tmp_path: Path) -> None:
    # Issue 28: claims age in wall time, 600 s: at --speed 1200, a killed run's claimed check waited 8 days.
    watch = SqliteWatch(StateDb(tmp_path / "state.sqlite"), tmp_path / "events.jsonl")
    watch.plan([("s", 10.0), ("s", 20.0)], {"s": 0.0}, {"s": SourceState(1.0, 0.0)}, 100.0)
    assert watch.claim_due(15.0, wall=1000.0) == [("s", 10.0)]
    watch.mark_sent([], wall=1000.0)  # killed before the send
    assert watch.claim_due(30.0, wall=1001.0) == [("s", 20.0)]
    watch.mark_sent([("s", 20.0)], wall=1001.0)
    assert watch.release_claims() == 1
    assert watch.claim_due(30.0, wall=1002.0) == [("s", 10.0)]  # the sent one stays sent
