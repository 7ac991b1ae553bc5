"""A watch's plan and schedule state (``watch.scheduler.PlanStore``): one contract for each implementation.

Local mode's SQLite state and the deployed watch table (on moto) plan a day
once, claim each due check once until the claim is old, never hand out a
sent check again, and apply each check's end to its source once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crawlstack import aws, settings
from crawlstack.fetch.crawllog import iso_time
from crawlstack.local.sqlite import StateDb
from crawlstack.local.sqlite.sources import SqliteSources
from crawlstack.local.sqlite.watch import SqliteWatch
from crawlstack.messages import CheckRef, FrontierMessage
from crawlstack.watch.check import Validators
from crawlstack.watch.plan_clock import PlanClock
from crawlstack.watch.schedule import DAY, SourceState, check_ended
from crawlstack.watch.scheduler import check_messages, tick
from crawlstack.watch.sources import Source

T0 = 1_790_000_000.0  # a day's start
CLAIM = settings.WATCH_CLAIM_SECONDS


@dataclass
class Impl:
    sources: Any
    plans: Any


@pytest.fixture(params=["sqlite", "dynamodb"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Impl:
    if request.param == "sqlite":
        db = StateDb(tmp_path / "state.sqlite")
        return Impl(SqliteSources(db), SqliteWatch(db, tmp_path / "events.jsonl"))
    names: aws.StackNames = request.getfixturevalue("stack_names")
    return Impl(aws.DynamoSources(names.watch), aws.DynamoWatch(names.watch, aws.BlobStore(names.bucket)))


def source(source_id: str) -> Source:
    return Source(source_id, f"http://127.0.0.2/{source_id}", "listing")


def planned(impl: Impl, checks: list[tuple[str, float]], tokens: dict[str, float]) -> None:
    impl.sources.add_all([source(sid) for sid in tokens])
    first = {sid: SourceState.first(source(sid)) for sid in tokens}
    impl.plans.plan(checks, tokens, first, T0 + DAY)


def test_a_plan_sets_the_day_and_spends_tokens_once(impl: Impl) -> None:
    assert impl.plans.day_end() is None
    planned(impl, [("a", T0 + 100), ("a", T0 + 5000), ("b", T0 + 200)], {"a": -2.0, "b": -1.0})
    assert impl.plans.day_end() == T0 + DAY
    states = impl.plans.states()
    first = SourceState.first(source("a"))
    assert states["a"][0].tokens == pytest.approx(first.tokens - 2.0)
    assert states["b"][0].tokens == pytest.approx(first.tokens - 1.0)


def test_a_due_check_is_claimed_once_until_its_claim_is_old_and_never_once_sent(impl: Impl) -> None:
    planned(impl, [("a", T0 + 100), ("b", T0 + 200), ("a", T0 + 5000)], {"a": -2.0, "b": -1.0})
    assert impl.plans.claim_due(T0 + 50, T0 + 50) == []
    first = impl.plans.claim_due(T0 + 300, T0 + 300)
    assert sorted(first) == [("a", T0 + 100), ("b", T0 + 200)]
    # A second scheduler in the same minute, or this one invoked again: nothing twice.
    assert impl.plans.claim_due(T0 + 310, T0 + 310) == []
    impl.plans.mark_sent([("a", T0 + 100)], T0 + 320)
    assert impl.plans.oldest_unsent(T0 + 320) == T0 + 200
    # The send of b failed: its claim ages, and b is claimed again; a, sent, never is.
    later = T0 + 300 + CLAIM + 1
    assert impl.plans.claim_due(later, later) == [("b", T0 + 200)]
    impl.plans.mark_sent([("b", T0 + 200)], later)
    assert impl.plans.oldest_unsent(later) is None
    assert impl.plans.claim_due(T0 + 6000, T0 + 6000 + 2 * CLAIM) == [("a", T0 + 5000)]


def test_a_check_claimed_elsewhere_counts_as_waiting(impl: Impl) -> None:
    planned(impl, [("a", T0 + 100)], {"a": -1.0})
    assert impl.plans.claim_due(T0 + 120, T0 + 120) == [("a", T0 + 100)]
    assert impl.plans.claim_due(T0 + 180, T0 + 180) == []
    assert impl.plans.oldest_unsent(T0 + 180) == T0 + 100


def test_a_check_ends_once_whether_settled_or_ended_by_extract(impl: Impl) -> None:
    planned(impl, [("a", T0 + 100), ("a", T0 + 200)], {"a": -2.0})
    checks = impl.plans.claim_due(T0 + 300, T0 + 300)
    impl.plans.mark_sent(checks, T0 + 300)
    slot = iso_time(T0 + 100)
    impl.plans.page_done("a", slot, 1, 3)
    impl.plans.page_done("a", slot, 2, 1)
    first = SourceState.first(source("a"))
    assert impl.plans.finish_check("a", slot, check_ended(source("a"), T0 + 150), first)
    ended: list[tuple[str, str]] = []

    def end(source_id: str, at_slot: str) -> None:
        ended.append((source_id, at_slot))
        impl.plans.finish_check(source_id, at_slot, check_ended(source("a"), T0 + 900), first)

    assert impl.plans.settle(T0 + 301, iso_time, end) == 2
    assert sorted(ended) == [("a", slot), ("a", iso_time(T0 + 200))]
    assert impl.plans.settle(T0 + 9999, iso_time, end) == 0
    history = impl.plans.states()["a"][0].history
    # The first check's 4 new items, once; the settled one's none.
    assert [(c.at, c.new_items) for c in history] == [(T0 + 150, 4), (T0 + 900, 0)]


def test_validators_are_kept_per_source(impl: Impl) -> None:
    planned(impl, [], {"a": 0.0, "b": 0.0})
    impl.plans.set_validators("a", Validators('"v1"', "Tue, 01 Dec 2026 10:00:00 GMT"), SourceState.first(source("a")))
    assert impl.plans.validators(["a", "b"]) == {"a": Validators('"v1"', "Tue, 01 Dec 2026 10:00:00 GMT")}


def test_the_highest_id_a_check_saw_is_kept_with_the_validators_and_sent_with_the_next_check(impl: Impl) -> None:
    planned(impl, [], {"a": 0.0, "b": 0.0})
    first = SourceState.first(source("a"))
    impl.plans.set_validators("a", Validators(None, None, "1200"), first)
    impl.plans.set_validators("b", Validators('"v1"', None, "x9"), first)
    impl.plans.set_validators("b", Validators('"v2"', None), first)  # each write replaces all three
    kept = impl.plans.validators(["a", "b"])
    assert kept == {"a": Validators(highest_id="1200"), "b": Validators('"v2"')}
    assert impl.plans.states()["a"][1] == Validators(highest_id="1200")
    [body] = check_messages([("a", T0)], {"a": source("a")}, kept)
    assert FrontierMessage.from_json(body).check == CheckRef("a", iso_time(T0), 1, highest_id="1200")


def test_a_source_added_after_the_plan_is_planned_once_for_its_first_check(impl: Impl) -> None:
    planned(impl, [("a", T0 + 100)], {"a": -1.0})
    if impl.plans.unplanned():  # only a hint: a store may say so when nothing is new
        assert impl.plans.plan_first([], {}) == []
    assert not impl.plans.unplanned()
    impl.sources.add_all([source("b")])
    assert impl.plans.unplanned()
    state = SourceState(1.75, 0.75)
    assert impl.plans.plan_first([("b", T0 + 500)], {"b": state}) == ["b"]
    assert not impl.plans.unplanned()
    assert impl.plans.plan_first([("b", T0 + 900)], {"b": state}) == []  # planned already: not twice
    assert impl.plans.states()["b"][0] == state
    assert sorted(impl.plans.claim_due(T0 + 1000, T0 + 1000)) == [("a", T0 + 100), ("b", T0 + 500)]


def test_ticks_plan_the_day_send_what_falls_due_and_check_a_new_source_within_the_hour(impl: Impl) -> None:
    impl.sources.add_all([Source("a", "http://127.0.0.2/a", "listing", priority_max=48.0)])
    sent: list[str] = []
    first = tick(impl.sources, impl.plans, sent.extend, T0, T0, None, settings.WATCH_STALE_CHECK_SECONDS)
    assert (first.planned, first.sent) == (48, 0)
    assert tick(impl.sources, impl.plans, sent.extend, T0 + 3600, T0 + 3600, None, 3600.0).sent == 2
    # A source added mid-day: its first check within the hour, not at tomorrow's plan.
    impl.sources.add_all([Source("b", "http://127.0.0.3/b", "listing")])
    later = tick(impl.sources, impl.plans, sent.extend, T0 + 3660, T0 + 3660, None, 3600.0)
    assert later.planned == 1
    tick(impl.sources, impl.plans, sent.extend, T0 + 7260, T0 + 7260, None, 3600.0)
    checks = [FrontierMessage.from_json(body).check for body in sent]
    assert [c.source_id for c in checks if c is not None].count("b") == 1
    assert len(sent) == len({(c.source_id, c.slot) for c in checks if c is not None}) == 5


def test_checks_found_late_re_spread_the_rest_of_the_day_and_keep_their_spacing(impl: Impl) -> None:
    # Issue 28: a watch back from a stall sent what fell due meanwhile back to back.
    checks = [("a", T0 + 100), ("b", T0 + 400), ("a", T0 + 700), ("b", T0 + 1000)]
    planned(impl, checks, {"a": -2.0, "b": -2.0})  # the day ends at T0 + DAY
    sent: list[str] = []

    def at(now: float) -> Any:
        return tick(impl.sources, impl.plans, sent.extend, now, now, None, 3600.0, late_after=300.0)

    late = at(T0 + 1100)  # down since before the first check: four checks fell due
    assert (late.sent, late.moved, late.oldest_due_age) == (1, 1000.0, 1000.0)
    clock = impl.plans.plan_clock()
    # The rest of the day, from the oldest check's time, now fits into what is left of it: a little tighter.
    rate = (DAY - 1100) / (DAY - 100)
    assert clock.rate == pytest.approx(rate) and clock.real(T0 + 100) == pytest.approx(T0 + 1100)
    assert clock.real(T0 + DAY) == pytest.approx(T0 + DAY) and impl.plans.day_end() == T0 + DAY
    b_due = T0 + 1100 + 300 * rate  # b's check at 400: 300 planned seconds after the first, a little tighter
    assert at(b_due - 1).sent == 0
    assert (at(b_due + 1).sent, at(T0 + 1100 + 600 * rate + 1).sent) == (1, 1)
    assert at(T0 + 1100 + 900 * rate + 250).moved == 0.0  # 250 late: within late_after, sent as it is
    assert impl.plans.plan_clock() == clock and len(sent) == 4
    assert not impl.plans.move_plan_clock(PlanClock(), clock)  # another scheduler moved it since
    moved = PlanClock(T0, T0 + 5.0, 0.5)
    assert impl.plans.move_plan_clock(clock, moved) and impl.plans.plan_clock() == moved


def test_a_check_held_by_a_sender_that_died_does_not_re_spread_the_plan(impl: Impl) -> None:
    # Issue 28: a watch killed between a claim and its send left the check claimed; every tick then
    # re-spread the plan from it, and the whole plan waited out the claim (81 simulated hours at 1,200x).
    planned(impl, [("a", T0 + 100), ("b", T0 + 400)], {"a": -1.0, "b": -1.0})
    assert impl.plans.claim_due(T0 + 100, T0 + 450) == [("a", T0 + 100)]  # ...and its sender died
    assert impl.plans.oldest_unsent(T0 + 1000) == T0 + 100  # still waiting: the alarm's age counts it
    assert impl.plans.oldest_unsent(T0 + 1000, claimable_at=T0 + 1000) == T0 + 400
    assert impl.plans.oldest_unsent(T0 + 1000, claimable_at=T0 + 450 + CLAIM + 1) == T0 + 100  # its claim is old
    sent: list[str] = []
    late = tick(impl.sources, impl.plans, sent.extend, T0 + 1000, T0 + 1000, None, 3600.0, late_after=300.0)
    assert late.moved == 600.0 and impl.plans.plan_clock().real(T0 + 400) == pytest.approx(T0 + 1000)
    assert len(sent) == 1  # b, re-spread from now; a waits for its claim to age
