"""Per-host politeness on the in-memory stores: slots, windows, parking, claims, releases."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from fakes import FakeClock, FakeHosts, FakeParking

from crawlstack import settings
from crawlstack.messages import FetchTask
from crawlstack.politeness import (
    CLAIM_LEASE_SECONDS,
    IN_FLIGHT_POLL_SECONDS,
    UNPARK_STALE_SECONDS,
    Blocked,
    Contention,
    HostSlot,
    Politeness,
    effective_window,
    park_order,
    sqs_delay,
    window_key,
    window_size,
)
from crawlstack.urls import fingerprint

HOST = "example.com"


def task(path: str, delay: float = 2.0, depth: int = 1, host: str = HOST) -> FetchTask:
    url = f"http://{host}/{path}"
    return FetchTask(
        url=url,
        fp=fingerprint(url),
        host=host,
        depth=depth,
        crawl_id="c",
        not_before=0.0,
        delay=delay,
        window=window_size(delay, 3),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def hosts(clock: FakeClock) -> FakeHosts:
    return FakeHosts(clock)


@pytest.fixture
def parking() -> FakeParking:
    return FakeParking()


@pytest.fixture
def pol(hosts: FakeHosts, parking: FakeParking, clock: FakeClock) -> Politeness:
    return Politeness(hosts, parking, clock)


def test_window_size() -> None:
    assert window_size(0.5, 8) == settings.DELAYED_HOST_WINDOW == 2  # pinned for these tests (conftest)
    assert window_size(0, 8) == 8
    assert window_size(0, 0) == 1


def test_a_delayed_window_never_reaches_past_the_sqs_delay_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "DELAYED_HOST_WINDOW", 4)
    assert window_size(5.0, 8) == 4
    assert window_size(settings.MAX_CRAWL_DELAY_SECONDS, 8) == 3  # 3 x 300 s = the 15 minutes
    assert window_size(2 * settings.MAX_SQS_DELAY_SECONDS, 8) == 2
    slowed = HostSlot(HOST, adaptive_delay=settings.MAX_CRAWL_DELAY_SECONDS)
    assert effective_window(replace(task("a", delay=5.0), window=4), slowed) == 3
    assert effective_window(replace(task("a", delay=0.0), window=8), slowed) == 3


def test_sqs_delay_floor_and_cap() -> None:
    now = 1000.0
    assert sqs_delay(now + 0.99, now) == 0
    assert sqs_delay(now + 1.0, now) == 1
    assert sqs_delay(now + 2.7, now) == 2
    assert sqs_delay(now - 50, now) == 0
    assert sqs_delay(now + 10_000, now) == settings.MAX_SQS_DELAY_SECONDS == 900


def test_park_order_is_shallow_first_and_deterministic() -> None:
    shallow, deep = task("a", depth=1), task("b", depth=12)
    assert park_order(shallow) < park_order(deep)
    assert park_order(shallow) == park_order(replace(shallow, not_before=99.0))
    assert park_order(deep).startswith("0012#")


def test_slots_are_spaced_by_the_delay(pol: Politeness, hosts: FakeHosts, clock: FakeClock) -> None:
    t0 = clock.now
    [(order_a, a)] = pol.admit(task("a"))
    [(order_b, b)] = pol.admit(task("b"))
    assert order_a is None and order_b is None
    assert (a.not_before, b.not_before) == (t0, t0 + 2.0)
    slot = hosts.read_slot(HOST)
    assert slot.next_slot == t0 + 4.0
    assert slot.window == {window_key(a), window_key(b)}


def test_slot_starts_now_when_the_host_has_been_idle(pol: Politeness, hosts: FakeHosts, clock: FakeClock) -> None:
    pol.admit(task("a"))
    pol.release(task("a"), clock.now)
    clock.advance(100)
    [(_, b)] = pol.admit(task("b"))
    assert b.not_before == clock.now


def test_different_hosts_do_not_share_slots(pol: Politeness, clock: FakeClock) -> None:
    [(_, a)] = pol.admit(task("a", host="one.example"))
    [(_, b)] = pol.admit(task("a", host="two.example"))
    assert a.not_before == b.not_before == clock.now


def test_full_window_parks_and_release_unparks_shallow_first(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking, clock: FakeClock
) -> None:
    a, b = task("a"), task("b")
    pol.admit(a)
    pol.admit(b)
    deep, shallow = task("deep", depth=3), task("shallow", depth=1)
    assert pol.admit(deep) == []
    assert pol.admit(shallow) == []
    assert parking.count() == 2
    assert hosts.read_slot(HOST).parked_at is not None

    clock.advance(1.0)
    slot = pol.release(a, clock.now)
    assert slot.parked_at is not None and slot.window == {window_key(b)}
    unparked = pol.unpark(HOST)
    # One place in the window: the shallow URL takes it, the deep one waits.
    assert [(o, t.url) for o, t in unparked] == [(park_order(shallow), shallow.url)]
    # Not at the slot after a's and b's (start + 4 s): a ended 1 s late, so the
    # host is free 2 s after that, b goes then, and the shallow URL 2 s later.
    assert unparked[0][1].not_before == clock.now + 2.0 + 2.0
    pol.unparked(HOST, [o for o, _ in unparked])
    assert parking.peek(HOST, 10) == [(park_order(deep), deep.to_json())]
    assert hosts.read_slot(HOST).parked_at is not None
    assert hosts.read_slot(HOST).window == {window_key(b), window_key(shallow)}

    pol.release(b, clock.now)
    [(order, nxt)] = pol.unpark(HOST)
    assert nxt.url == deep.url
    pol.unparked(HOST, [order])
    assert parking.count() == 0
    # The next release finds nothing parked and clears the flag.
    pol.release(deep, clock.now)
    assert pol.unpark(HOST) == []
    assert hosts.read_slot(HOST).parked_at is None


def test_unparked_ignores_orders_that_were_not_parked(pol: Politeness, hosts: FakeHosts, parking: FakeParking) -> None:
    pol.unparked(HOST, [None, None])
    assert parking.count() == 0


def test_clear_parked_keeps_a_newer_flag(hosts: FakeHosts) -> None:
    hosts.reserve(HOST, "f1", HostSlot(HOST), 1.0, 1)
    assert hosts.mark_parked(HOST, 1, 10.0)
    assert hosts.mark_parked(HOST, 1, 11.0)  # parked again after an unparker read 10.0
    hosts.clear_parked(HOST, 10.0)
    assert hosts.read_slot(HOST).parked_at == 11.0


def test_unpark_skips_what_somebody_else_unparked(pol: Politeness, hosts: FakeHosts, parking: FakeParking) -> None:
    a, b, c = task("a"), task("b"), task("c")
    pol.admit(a)
    pol.admit(b)
    assert pol.admit(c) == []
    pol.release(a, 0.0)
    [(order, _)] = pol.unpark(HOST)  # reserved c, then died before deleting the parked item
    assert pol.unpark(HOST) == []  # c is in the window already; nothing else is parked
    assert parking.peek(HOST, 10) == [(order, c.to_json())]


def full_window_then_a_release(pol: Politeness) -> tuple[FetchTask, FetchTask, HostSlot]:
    """a and b fill the window, c parks, a is released: (b, c, the state the release returned)."""
    a, b, c = task("a"), task("b"), task("c")
    pol.admit(a)
    pol.admit(b)
    assert pol.admit(c) == []
    return b, c, pol.release(a, 0.0)


def test_an_unparker_with_a_stale_state_reserves_before_it_takes_a_row(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking
) -> None:
    _b, c, freed = full_window_then_a_release(pol)  # its state: one place free
    other = Politeness(hosts, parking, pol.clock)  # another container
    assert len(other.admit(task("d"))) == 1  # ...takes that place before the unpark runs
    taken = []
    real_take = parking.take
    parking.take = lambda *args: taken.append(args) or real_take(*args)  # type: ignore[method-assign]
    assert pol.unpark(HOST, state=freed) == []
    # The window was full: one refused reservation, and c was never taken (nor given back).
    assert taken == [] and parking.peek(HOST, 10) == [(park_order(c), c.to_json())]
    assert hosts.read_slot(HOST).parked_at is not None


def test_a_place_reserved_for_a_row_sent_meanwhile_is_given_back(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking
) -> None:
    b, c, freed = full_window_then_a_release(pol)
    stale = [(park_order(c), c.to_json())]
    # Another unparker sent c and deleted its row after this one read it.
    parking.delete(HOST, park_order(c))
    real_peek = parking.peek
    parking.peek = lambda *args, **kwargs: stale if stale else real_peek(*args, **kwargs)  # type: ignore[method-assign]
    unparked = pol.unpark(HOST, state=freed)
    stale.clear()
    assert unparked == []
    # The place reserved for c went back: nobody was left to send c into it.
    assert hosts.read_slot(HOST).window == {window_key(b)}


def test_a_row_taken_first_whose_place_another_unparker_reserved_is_sent(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking
) -> None:
    _b, c, freed = full_window_then_a_release(pol)
    # Another container reserved c's place and died before it took the row.
    other = Politeness(hosts, parking, pol.clock)
    [(order, _)] = other.unpark(HOST)
    untaken = []
    parking.untake = lambda *args: untaken.append(args)  # type: ignore[method-assign]
    parking.taken.clear()
    # Taken first (hold given, no ``stopped``): the place turns out to be reserved already, so c is sent.
    [(again_order, again)] = pol.unpark(HOST, hold=lambda t: False, state=freed)
    assert (again_order, again.url) == (order, c.url) and untaken == []


def test_a_stopped_crawl_s_parked_task_is_taken_and_held_without_a_slot(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking
) -> None:
    _b, c, freed = full_window_then_a_release(pol)
    next_slot = hosts.read_slot(HOST).next_slot
    held: list[str] = []
    assert pol.unpark(HOST, hold=lambda t: held.append(t.url) or True, state=freed, stopped=lambda t: True) == []
    assert held == [c.url] and parking.count() == 0
    assert hosts.read_slot(HOST).next_slot == next_slot  # no slot spent on it


def test_delay_zero_window_is_host_concurrency(pol: Politeness, clock: FakeClock) -> None:
    tasks = [task(str(i), delay=0.0) for i in range(4)]
    admitted = [pol.admit(t) for t in tasks]
    assert [len(a) for a in admitted] == [1, 1, 1, 0]
    assert all(t.not_before == clock.now for a in admitted for _, t in a)


def test_redelivered_admit_resends_without_reserving_again(pol: Politeness, hosts: FakeHosts, clock: FakeClock) -> None:
    a = task("a")
    [(_, first)] = pol.admit(a)
    before = hosts.read_slot(HOST)
    reserves = sum(1 for c in hosts.calls if c[0] == "reserve")
    [(order, again)] = pol.admit(a)
    assert order is None and again.fp == a.fp
    assert again.not_before >= first.not_before
    assert hosts.read_slot(HOST) == before
    assert sum(1 for c in hosts.calls if c[0] == "reserve") == reserves
    # And the next URL still gets the next slot, not a third.
    [(_, b)] = pol.admit(task("b"))
    assert b.not_before == first.not_before + 2.0


def test_redelivered_admit_waits_for_a_busy_host(pol: Politeness, clock: FakeClock) -> None:
    a = task("a")
    pol.admit(a)
    assert pol.claim(a) == 0.0
    pol.release(a, clock.now + 0.5)  # a finished; host free at +2.5
    b = task("b")
    pol.admit(b)
    [(_, again)] = pol.admit(b)
    assert again.not_before == clock.now + 2.5


def test_admit_retries_when_next_slot_moves_under_it(hosts: FakeHosts, parking: FakeParking, clock: FakeClock) -> None:
    class Racing(FakeHosts):
        raced = False

        def reserve(self, host: str, fp: str, expected: HostSlot, new_next: float, window: int) -> HostSlot | None:
            if not self.raced:  # another dispatcher takes a slot between our read and our write
                self.raced = True
                other = task("other")
                assert super().reserve(host, window_key(other), expected, clock.now + 7.0, window) is None
            return super().reserve(host, fp, expected, new_next, window)

    racing = Racing(clock)
    pol = Politeness(racing, parking, clock)
    [(_, a)] = pol.admit(task("a"))
    assert a.not_before == clock.now + 7.0
    assert racing.read_slot(HOST).window == {window_key(task("other")), window_key(a)}


def test_admit_gives_up_after_endless_contention(parking: FakeParking, clock: FakeClock) -> None:
    class Hostile(FakeHosts):
        def reserve(self, host: str, fp: str, expected: HostSlot, new_next: float, window: int) -> HostSlot | None:
            return replace(expected, exists=True, next_slot=expected.next_slot + 1)

    with pytest.raises(Contention):
        Politeness(Hostile(clock), parking, clock).admit(task("a"))


def test_parking_when_the_window_empties_meanwhile_unparks_at_once(parking: FakeParking, clock: FakeClock) -> None:
    class Emptying(FakeHosts):
        def mark_parked(self, host: str, window: int, stamp: float) -> bool:
            # The fetches in the window finished between our read and our write.
            for fp in list(self.slots[host].get("window", ())):
                self.release(host, fp, clock.now)
            return super().mark_parked(host, window, stamp)

    hosts = Emptying(clock)
    pol = Politeness(hosts, parking, clock)
    pol.admit(task("a"))
    pol.admit(task("b"))
    c = task("c")
    out = pol.admit(c)
    assert [(o, t.url) for o, t in out] == [(park_order(c), c.url)]
    pol.unparked(HOST, [o for o, _ in out])
    assert parking.count() == 0
    assert hosts.read_slot(HOST).window == {window_key(c)}
    assert hosts.read_slot(HOST).parked_at is None  # never flagged: nothing left to strand


def test_mark_parked_only_flags_while_the_window_is_full(hosts: FakeHosts) -> None:
    assert not hosts.mark_parked(HOST, 2, 1.0)
    hosts.reserve(HOST, "f1", HostSlot(HOST), 1.0, 2)
    assert not hosts.mark_parked(HOST, 2, 1.0)
    hosts.reserve(HOST, "f2", hosts.read_slot(HOST), 2.0, 2)
    assert hosts.mark_parked(HOST, 2, 1.0)
    assert hosts.read_slot(HOST).parked_at == 1.0


def test_reserve_refuses_a_stale_expectation_a_full_window_and_a_duplicate(hosts: FakeHosts) -> None:
    assert hosts.reserve(HOST, "f1", HostSlot(HOST), 5.0, 2) is None
    stale = HostSlot(HOST)
    assert hosts.reserve(HOST, "f2", stale, 6.0, 2) == hosts.read_slot(HOST)
    cur = hosts.read_slot(HOST)
    assert hosts.reserve(HOST, "f1", cur, 6.0, 2) == cur  # already in the window
    assert hosts.reserve(HOST, "f2", cur, 6.0, 2) is None
    cur = hosts.read_slot(HOST)
    assert hosts.reserve(HOST, "f3", cur, 7.0, 2) == cur  # window full
    assert cur.next_slot == 6.0


def test_claim_waits_while_a_request_is_in_flight(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking, clock: FakeClock
) -> None:
    a, b = task("a"), task("b")
    other = Politeness(hosts, parking, clock)  # b's container
    assert pol.claim(a) == 0.0
    assert hosts.read_slot(HOST).free_at == clock.now + CLAIM_LEASE_SECONDS
    # a is in flight: its end is unknown, so b waits one delay, not the lease.
    assert other.claim(b) == a.delay
    clock.advance(1.5)
    assert other.claim(b) == a.delay
    slot = pol.release(a, clock.now)
    assert slot.free_at == clock.now + a.delay
    clock.advance(0.5)
    assert other.claim(b) == pytest.approx(1.5)
    clock.advance(1.5)
    assert pol.claim(b) == 0.0


def test_claim_in_flight_wait_is_at_least_a_poll_and_at_most_the_lease(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    hosts.slots[HOST] = {"free_at": clock.now + 0.01, "busy": 1}
    assert pol.claim(task("a", delay=5.0)) == IN_FLIGHT_POLL_SECONDS
    hosts.slots[HOST] = {"free_at": clock.now + 0.3, "busy": 1}
    assert pol.claim(task("a", delay=5.0)) == pytest.approx(0.3)


def test_claim_without_delay_never_touches_the_host(pol: Politeness, hosts: FakeHosts) -> None:
    assert pol.claim(task("a", delay=0.0)) == 0.0
    assert pol.claim(task("b", delay=0.0)) == 0.0
    assert not any(c[0] == "claim" for c in hosts.calls)


def test_release_without_delay_leaves_free_at_alone(pol: Politeness, hosts: FakeHosts) -> None:
    a = task("a", delay=0.0)
    pol.admit(a)
    slot = pol.release(a, 123.0)
    assert slot.window == frozenset() and slot.free_at == 0.0


def test_push_back_frees_the_host_and_never_moves_next_slot_earlier(hosts: FakeHosts) -> None:
    hosts.push_back(HOST, 10.0)
    assert (hosts.read_slot(HOST).free_at, hosts.read_slot(HOST).next_slot) == (10.0, 10.0)
    hosts.push_back(HOST, 5.0)
    assert hosts.read_slot(HOST).next_slot == 10.0


def test_admit_reuses_the_state_it_wrote_instead_of_reading(pol: Politeness, hosts: FakeHosts) -> None:
    pol.admit(task("a", delay=0.0))
    pol.admit(task("b", delay=0.0))
    pol.admit(task("c", delay=0.0))
    assert [c for c in hosts.calls if c[0] == "read_slot"] == [("read_slot", HOST)]


def test_a_stale_remembered_state_is_corrected_by_the_conditional_write(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    a = task("a")
    pol.admit(a)
    other = Politeness(hosts, FakeParking(), clock)  # another dispatcher takes the next slot
    [(_, b)] = other.admit(task("b"))
    pol.release(a, clock.now)  # a is done: one place in the window again
    [(_, c)] = pol.admit(task("c"))
    assert c.not_before == b.not_before + 2.0  # after b's slot, not on top of it


def test_parallel_parkers_and_a_release_strand_nothing(
    hosts: FakeHosts, parking: FakeParking, clock: FakeClock
) -> None:
    """Two dispatchers park while the window is full; a release lands before either flags it."""
    pol = Politeness(hosts, parking, clock)
    a, b = task("a"), task("b")
    pol.admit(a)
    pol.admit(b)
    p1, p2 = task("p1"), task("p2")
    # Both dispatchers see a full window and put their rows...
    parking.put(HOST, park_order(p1), p1.to_json())
    parking.put(HOST, park_order(p2), p2.to_json())
    # ...then a's release comes, with no flag set yet, so nobody looks...
    assert pol.release(a, clock.now).parked_at is None
    # ...and both flags fail: the window has room.  Each dispatcher unparks.
    assert not hosts.mark_parked(HOST, 2, clock.now)
    first = pol.unpark(HOST)
    second = pol.unpark(HOST)
    pol.unparked(HOST, [o for o, _ in first + second])
    sent = [t.url for _, t in first + second]
    assert len(sent) == 1
    # One went into the window; the other is still parked, and flagged for the next release.
    assert parking.count() == 1
    assert hosts.read_slot(HOST).parked_at is not None
    clock.advance(5.0)
    pol.release(b, clock.now)
    [(_, last)] = pol.unpark(HOST)
    assert {last.url, *sent} == {p1.url, p2.url}


def test_a_row_reserved_by_an_unparker_that_died_is_sent_again(
    pol: Politeness, hosts: FakeHosts, parking: FakeParking, clock: FakeClock
) -> None:
    a, b, c = task("a"), task("b"), task("c")
    pol.admit(a)
    pol.admit(b)
    assert pol.admit(c) == []
    pol.release(a, clock.now)
    [(order, _)] = pol.unpark(HOST)  # reserved c, then the Lambda died: never sent, never deleted
    assert pol.unpark(HOST) == []  # someone else's fresh take: left alone
    clock.advance(UNPARK_STALE_SECONDS + 1)
    pol.release(b, clock.now)
    [(again_order, again)] = pol.unpark(HOST)
    assert (again_order, again.url) == (order, c.url)
    pol.unparked(HOST, [again_order])
    assert parking.count() == 0


# --- adaptive delay ------------------------------------------------------------
def admitted(pol: Politeness, t: FetchTask) -> FetchTask:
    [(_, ready)] = pol.admit(t)
    return ready


def test_a_slowdown_doubles_the_delay_before_the_host_is_freed(pol: Politeness, hosts: FakeHosts, clock) -> None:
    a = admitted(pol, task("a", delay=2.0))
    assert pol.claim(a) == 0
    state = pol.release(a, clock.now, slow_down=True)
    assert state.adaptive_delay == 4.0
    # The host is freed after the new delay, and every later slot is spaced by it.
    assert state.free_at == clock.now + 4.0
    clock.advance(10)
    b, c = admitted(pol, task("b", delay=2.0)), admitted(pol, task("c", delay=2.0))
    assert (b.adaptive_delay, b.effective_delay) == (4.0, 4.0)
    assert c.not_before - b.not_before == 4.0
    assert pol.claim(b) == 0
    pol.release(b, clock.now, slow_down=True)
    assert hosts.read_slot(HOST).adaptive_delay == 8.0
    hosts.slots[HOST]["adaptive_delay"] = settings.MAX_CRAWL_DELAY_SECONDS * 0.9
    pol.release(replace(c, adaptive_delay=settings.MAX_CRAWL_DELAY_SECONDS * 0.9), clock.now, slow_down=True)
    assert hosts.read_slot(HOST).adaptive_delay == settings.MAX_CRAWL_DELAY_SECONDS  # capped


def test_one_burst_of_503s_slows_the_host_once(pol: Politeness, hosts: FakeHosts, clock) -> None:
    # Requests in flight at once on a host with no delay, all answered 503.
    burst = [admitted(pol, task(f"b{i}", delay=0.0)) for i in range(3)]
    for t in burst:
        pol.release(t, clock.now, slow_down=True)
    assert hosts.read_slot(HOST).adaptive_delay == settings.ADAPTIVE_DELAY_FLOOR_SECONDS
    # A request sent at the new pace that still gets a 503 slows it again.
    clock.advance(5)
    later = admitted(pol, task("later", delay=0.0))
    assert later.adaptive_delay == 1.0 and pol.claim(later) == 0
    pol.release(later, clock.now, slow_down=True)
    assert hosts.read_slot(HOST).adaptive_delay == 2.0


def test_a_host_with_no_delay_is_slowed_from_the_floor_and_its_window_shrinks(
    pol: Politeness, hosts: FakeHosts, clock
) -> None:
    first = [admitted(pol, task(f"p{i}", delay=0.0)) for i in range(3)]
    assert first[0].window == 3 and pol.claim(first[0]) == 0  # no delay: no claim
    state = pol.release(first[0], clock.now, slow_down=True)
    assert state.adaptive_delay == settings.ADAPTIVE_DELAY_FLOOR_SECONDS == 1.0
    assert state.free_at == clock.now + 1.0
    # Two still in the window: the slowed host's window is DELAYED_HOST_WINDOW, so the next parks.
    assert pol.admit(task("late", delay=0.0)) == []
    # A URL admitted once there is room is spaced by the floor, and claims the host.
    pol.release(first[1], clock.now)
    pol.release(first[2], clock.now)
    [(_, nxt)] = [pair for pair in pol.unpark(HOST)]
    assert nxt.effective_delay == 1.0 and nxt.not_before >= clock.now
    assert pol.claim(nxt) == pytest.approx(hosts.read_slot(HOST).free_at - clock.now)


def test_successes_recover_the_delay_slowly_and_never_below_the_crawls(
    pol: Politeness, hosts: FakeHosts, clock
) -> None:
    hosts.slots[HOST] = {"adaptive_delay": 4.0}
    seen = []
    for i in range(12):
        t = admitted(pol, task(f"s{i}", delay=2.0))
        clock.now = t.not_before
        assert pol.claim(t) == 0
        pol.release(t, clock.now, succeeded=True)
        seen.append(hosts.read_slot(HOST).adaptive_delay)
    expected, value = [], 4.0
    while value * settings.ADAPTIVE_DELAY_RECOVERY > 2.0:
        value *= settings.ADAPTIVE_DELAY_RECOVERY
        expected.append(value)
    assert seen[: len(expected)] == pytest.approx(expected)
    # Once back at the crawl's delay the item has none: 2.0 applies again.
    assert seen[len(expected) :] == [0.0] * (12 - len(expected))
    assert len(expected) == 6


def test_a_stale_remembered_state_cannot_reserve_with_the_old_delay(
    hosts: FakeHosts, parking: FakeParking, clock
) -> None:
    one, other = Politeness(hosts, parking, clock), Politeness(hosts, parking, clock)
    a = admitted(one, task("a", delay=2.0))
    assert other.claim(a) == 0
    other.release(a, clock.now, slow_down=True)  # another container saw a 429
    # ``one`` remembers next_slot as it wrote it; the reservation's condition
    # includes the adaptive delay, so it reads again and spaces by 4 s.
    b, c = admitted(one, task("b", delay=2.0)), admitted(one, task("c", delay=2.0))
    assert b.adaptive_delay == 4.0 and c.not_before - b.not_before == 4.0


def test_a_slowdown_is_never_lost_to_a_concurrent_recovery(pol: Politeness, hosts: FakeHosts, clock) -> None:
    hosts.slots[HOST] = {"adaptive_delay": 4.0}
    t = replace(task("a", delay=2.0), adaptive_delay=4.0)
    real = hosts.set_adaptive
    raced = []

    def racing(host: str, expected: float, adaptive: float | None) -> HostSlot | None:
        if not raced:  # a recovery lands between the slowdown's read and its write
            raced.append(real(host, 4.0, 3.6))
        return real(host, expected, adaptive)

    hosts.set_adaptive = racing  # type: ignore[method-assign]
    pol.release(t, clock.now, slow_down=True)
    assert raced == [None] and hosts.read_slot(HOST).adaptive_delay == 7.2
    # A recovery that loses its race is skipped, not retried.
    hosts.set_adaptive = real  # type: ignore[method-assign]
    hosts.slots[HOST]["adaptive_delay"] = 7.2
    assert hosts.set_adaptive(HOST, 8.0, 7.2 * 0.9) is not None
    assert hosts.read_slot(HOST).adaptive_delay == 7.2


def test_a_retry_after_keeps_the_host_unclaimed_until_then(pol: Politeness, hosts: FakeHosts, clock) -> None:
    a = admitted(pol, task("a", delay=2.0))
    assert pol.claim(a) == 0
    pol.release(a, clock.now, pause_until=clock.now + 30)
    assert hosts.read_slot(HOST).free_at == clock.now + 30
    clock.advance(5)
    assert pol.claim(admitted(pol, task("b", delay=2.0))) == pytest.approx(25)


def test_not_before_is_a_floor_on_the_slot(pol: Politeness, clock) -> None:
    a = admitted(pol, task("a", delay=2.0))
    retry = admitted(pol, replace(task("r", delay=2.0), not_before=clock.now + 30, attempt=2))
    assert a.not_before == clock.now and retry.not_before == clock.now + 30 and retry.attempt == 2


def test_a_failed_adaptive_update_still_frees_the_host_and_loses_nothing(
    pol: Politeness, hosts: FakeHosts, clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unavailable(host: str, expected: float, adaptive: float | None) -> HostSlot | None:
        raise RuntimeError("DynamoDB unavailable")

    monkeypatch.setattr(hosts, "set_adaptive", unavailable)
    a = admitted(pol, task("a", delay=2.0))
    assert pol.claim(a) == 0
    state = pol.release(a, clock.now, slow_down=True)
    # Freed after the delay it had, out of the window: the response fetched is not lost to the error.
    assert (state.busy, state.free_at, state.window) == (False, clock.now + 2.0, frozenset())
    hosts.slots[HOST]["adaptive_delay"] = 4.0
    b = admitted(pol, task("b", delay=2.0))
    clock.now = b.not_before
    assert pol.claim(b) == 0
    assert pol.release(b, clock.now, succeeded=True).adaptive_delay == 4.0
    assert [r.getMessage() for r in caplog.records] == [
        f"host {HOST}: adaptive delay not raised: DynamoDB unavailable",
        f"host {HOST}: adaptive delay not lowered: DynamoDB unavailable",
    ]


def test_a_host_with_no_delay_recovers_below_the_floor_before_the_slowdown_ends(
    pol: Politeness, hosts: FakeHosts, clock
) -> None:
    hosts.slots[HOST] = {"adaptive_delay": settings.ADAPTIVE_DELAY_FLOOR_SECONDS}
    successes = 0
    while hosts.read_slot(HOST).adaptive_delay:
        t = admitted(pol, task(f"r{successes}", delay=0.0))
        clock.now = max(clock.now, t.not_before, hosts.read_slot(HOST).free_at)
        assert pol.claim(t) == 0  # still slowed: one request at a time
        pol.release(t, clock.now, succeeded=True)
        successes += 1
    # 1 s * 0.9**22 is just under the 0.1 s minimum: a slow way back, not one step.
    assert successes == 22


def test_a_request_frees_the_host_a_delay_after_it_started_and_never_before_it_ended(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    a = task("a")
    started = clock.now
    assert pol.claim(a) == 0.0
    clock.advance(0.25)  # a quick response: the next request may start a delay after this one did
    assert pol.release(a, clock.now, responded_at=started).free_at == started + a.delay
    b = task("b")
    assert pol.claim(b) == pytest.approx(a.delay - 0.25)
    clock.advance(a.delay)
    started = clock.now
    assert pol.claim(b) == 0.0
    clock.advance(a.delay * 3)  # a slow one: free when it ended, requests never overlap
    assert pol.release(b, clock.now, responded_at=started).free_at == clock.now
    # A 429 or 503 counts the (raised) delay from the end.
    c = task("c")
    assert pol.claim(c) == 0.0
    assert pol.release(c, clock.now, slow_down=True, responded_at=clock.now - 1).free_at > clock.now + a.delay


def test_a_claim_the_container_knows_is_early_waits_without_a_write(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    a, b = admitted(pol, task("a", delay=2.0)), admitted(pol, task("b", delay=2.0))
    assert pol.claim(a) == 0
    pol.release(a, clock.now)
    claims = sum(1 for c in hosts.calls if c[0] == "claim")
    clock.advance(0.5)
    # Its own release said the host is free in 1.5 s: no write to learn it again.
    assert pol.claim(b) == pytest.approx(1.5)
    assert sum(1 for c in hosts.calls if c[0] == "claim") == claims
    clock.advance(1.5)
    assert pol.claim(b) == 0
    assert sum(1 for c in hosts.calls if c[0] == "claim") == claims + 1


def test_a_failed_claim_tells_the_container_when_to_try_again(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    # Another container's release freed the host at +3 s; the first claim learns it from the reply.
    hosts.slots[HOST] = {"free_at": clock.now + 3.0, "busy": 0}
    b = task("b", delay=2.0)
    assert pol.claim(b) == pytest.approx(3.0)
    claims = sum(1 for c in hosts.calls if c[0] == "claim")
    clock.advance(1.0)
    assert pol.claim(b) == pytest.approx(2.0)
    assert sum(1 for c in hosts.calls if c[0] == "claim") == claims


def test_a_container_holding_the_host_does_not_claim_it_again_before_the_release(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    a, b = admitted(pol, task("a", delay=2.0)), admitted(pol, task("b", delay=2.0))
    assert pol.claim(a) == 0
    claims = sum(1 for c in hosts.calls if c[0] == "claim")
    clock.advance(5.0)
    # a is still in flight here: b polls without a write bound to fail.
    assert pol.claim(b) == IN_FLIGHT_POLL_SECONDS
    assert sum(1 for c in hosts.calls if c[0] == "claim") == claims
    pol.release(a, clock.now)
    assert pol.claim(b) == pytest.approx(2.0)  # the release's free_at, still without a write
    clock.advance(2.0)
    assert pol.claim(b) == 0
    assert sum(1 for c in hosts.calls if c[0] == "claim") == claims + 1


def test_two_tasks_of_a_container_claiming_one_host_at_once_send_one_write(
    hosts: FakeHosts, parking: FakeParking, clock: FakeClock
) -> None:
    # The first claim's write is still out when the second task asks: the
    # second waits a poll instead of a write the host item would refuse.
    in_write = threading.Event()
    go_on = threading.Event()

    class SlowHosts(FakeHosts):
        def claim(self, host: str, now: float, lease_until: float) -> Blocked | None:
            in_write.set()
            go_on.wait(5)
            return super().claim(host, now, lease_until)

    slow = SlowHosts(clock)
    pol = Politeness(slow, parking, clock)
    a, b = admitted(pol, task("a", delay=2.0)), admitted(pol, task("b", delay=2.0))
    first: list[float] = []
    worker = threading.Thread(target=lambda: first.append(pol.claim(a)))
    worker.start()
    assert in_write.wait(5)
    assert pol.claim(b) == IN_FLIGHT_POLL_SECONDS
    go_on.set()
    worker.join(5)
    assert first == [0.0]
    assert sum(1 for c in slow.calls if c[0] == "claim") == 1


def test_a_refused_claim_lets_the_container_s_other_tasks_claim(
    pol: Politeness, hosts: FakeHosts, clock: FakeClock
) -> None:
    # Another container holds the host: the refused claim leaves no mark here.
    hosts.slots[HOST] = {"free_at": clock.now + 1.0, "busy": 1}
    a, b = task("a", delay=2.0), task("b", delay=2.0)
    assert pol.claim(a) == pytest.approx(1.0)
    hosts.slots[HOST] = {"free_at": clock.now, "busy": 0}  # its release
    assert pol.claim(b) == 0
