"""The ``Runs`` port's contract (``crawlstack.runs.ports``), against both of its implementations.

Each test runs on ``crawlstack.aws.runs.RunStore`` (the embedded emulator,
which makes each request atomic as DynamoDB does), on local mode's
``crawlstack.local.sqlite.SqliteRuns`` and on ``tests/fakes.py``'s
``FakeRuns``, so neither drifts from DynamoDB's semantics.  Every race the
port's docstring names is played out here (the racing holders as threads);
the last test loses the AWS adapter's replies through
``crawlstack.local.faulty``, where the others' stand-in for a lost reply is
a repeated call.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import FakeRuns

from crawlstack import aws
from crawlstack.aws.runs import RunStore
from crawlstack.local import resources
from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, moto_server
from crawlstack.local.sqlite import SqliteRuns, StateDb
from crawlstack.runs.ports import HostRun, Runs
from crawlstack.settings import RUN_GRACE_SECONDS

HOST = "a.example"
T0 = 1000.0  # every time here is a number passed in: no clock is read


@pytest.fixture(params=["moto", "fake", "sqlite"])
def runs(request: pytest.FixtureRequest, tmp_path: Path) -> Runs:
    if request.param == "fake":
        return FakeRuns()
    if request.param == "sqlite":
        return SqliteRuns(StateDb(tmp_path / "state.sqlite"))
    return RunStore(request.getfixturevalue("stack_names").hosts)


def leased(runs: Runs, holder: str = "h1", until: float = T0 + 30, run_id: str = "r1") -> HostRun:
    """A host with the run ``run_id`` (scheduled at T0) whose lease ``holder`` took at T0."""
    assert runs.schedule(HOST, run_id, T0, T0 + 100)
    before = runs.lease(HOST, run_id, holder, T0, until)
    assert before is not None
    return before


# -- schedule ------------------------------------------------------------------------
def test_the_first_schedule_wins_and_another_wins_only_once_the_run_expired(runs: Runs) -> None:
    assert runs.get(HOST) == HostRun(HOST)
    assert runs.schedule(HOST, "r1", T0, T0 + 100)
    assert not runs.schedule(HOST, "r2", T0 + 50, T0 + 150)
    assert not runs.schedule(HOST, "r2", T0 + 100, T0 + 200)  # at run_expires: not yet past it
    assert runs.get(HOST).run_id == "r1"
    assert runs.schedule(HOST, "r2", T0 + 100.5, T0 + 200)  # its messages were lost: replaced
    got = runs.get(HOST)
    assert (got.run_id, got.run_expires) == ("r2", T0 + 200)
    assert runs.lease(HOST, "r1", "h1", T0 + 101, T0 + 130) is None  # the replaced run's message


def test_a_schedule_repeated_with_its_run_id_is_given_and_changes_nothing(runs: Runs) -> None:
    assert runs.schedule(HOST, "r1", T0, T0 + 100)
    assert runs.schedule(HOST, "r1", T0 + 1, T0 + 101)  # a retry after a lost reply
    assert runs.get(HOST).run_expires == T0 + 100
    assert not runs.schedule(HOST, "r2", T0 + 1, T0 + 101)


def test_a_leased_run_is_not_replaced_while_its_lease_and_grace_last(runs: Runs) -> None:
    leased(runs, until=T0 + 500)  # a lease far past the run's own expiry (T0 + 100)
    assert runs.get(HOST).run_expires == T0 + 500 + RUN_GRACE_SECONDS
    assert not runs.schedule(HOST, "r2", T0 + 500 + RUN_GRACE_SECONDS, T0 + 900)
    assert runs.renew(HOST, "h1", T0 + 800, last_start=T0 + 700)
    assert runs.get(HOST).run_expires == T0 + 800 + RUN_GRACE_SECONDS
    assert not runs.schedule(HOST, "r2", T0 + 800 + RUN_GRACE_SECONDS, T0 + 1000)
    # The holder died: past its lease and the grace, a new run; its message waits for no lease.
    assert runs.schedule(HOST, "r2", T0 + 801 + RUN_GRACE_SECONDS, T0 + 1000)
    assert runs.lease(HOST, "r2", "h2", T0 + 801 + RUN_GRACE_SECONDS, T0 + 1000) is not None


# -- lease ---------------------------------------------------------------------------
def test_a_lease_is_taken_only_for_the_hosts_current_run(runs: Runs) -> None:
    assert runs.lease(HOST, "r1", "h1", T0, T0 + 30) is None  # no run at all
    assert runs.get(HOST) == HostRun(HOST)  # and no item made by trying
    assert runs.schedule(HOST, "r1", T0, T0 + 100)
    assert runs.lease(HOST, "r0", "h1", T0, T0 + 30) is None  # a stale message
    before = runs.lease(HOST, "r1", "h1", T0, T0 + 30)
    assert before == HostRun(HOST, run_id="r1", run_expires=T0 + 100)
    got = runs.get(HOST)
    assert (got.holder, got.lease_until, got.run_id) == ("h1", T0 + 30, "r1")


def test_a_duplicate_message_is_refused_while_the_lease_is_held(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert runs.lease(HOST, "r1", "h2", T0 + 29.5, T0 + 60) is None
    assert runs.get(HOST).holder == "h1"


@pytest.mark.parametrize("contenders", [2, 8])
def test_holders_racing_for_a_lease_one_wins(runs: Runs, contenders: int) -> None:
    assert runs.schedule(HOST, "r1", T0, T0 + 100)
    start = threading.Barrier(contenders)
    won: dict[str, HostRun | None] = {}

    def take(holder: str) -> None:
        start.wait()
        won[holder] = runs.lease(HOST, "r1", holder, T0, T0 + 30)

    threads = [threading.Thread(target=take, args=(f"h{i}",)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [holder for holder, before in won.items() if before is not None]
    assert len(won) == contenders and len(winners) == 1
    assert runs.get(HOST).holder == winners[0]


def test_the_same_holder_taking_the_lease_again_has_it_and_sees_its_own_lease(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    again = runs.lease(HOST, "r1", "h1", T0 + 1, T0 + 31)  # its first reply lost
    assert again is not None and (again.holder, again.lease_until) == ("h1", T0 + 30)
    assert runs.get(HOST).lease_until == T0 + 31


def test_an_expired_lease_is_taken_over_and_shows_the_dead_holders_lease(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert runs.renew(HOST, "h1", T0 + 40, last_start=T0 + 35)
    assert runs.lease(HOST, "r1", "h2", T0 + 39.9, T0 + 70) is None
    before = runs.lease(HOST, "r1", "h2", T0 + 40, T0 + 70)
    assert before is not None
    assert (before.holder, before.lease_until, before.last_start) == ("h1", T0 + 40, T0 + 35)
    # The old holder, back to life, has lost it: nothing it writes lands.
    assert not runs.renew(HOST, "h1", T0 + 80, last_start=T0 + 41)
    assert not runs.release(HOST, "h1", T0 + 41, 0.0, None, next_run=None)
    got = runs.get(HOST)
    assert (got.holder, got.lease_until, got.last_start, got.run_id) == ("h2", T0 + 70, T0 + 35, "r1")


# -- renew and release ---------------------------------------------------------------
def test_only_the_holder_renews(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert not runs.renew(HOST, "h2", T0 + 60, last_start=T0 + 10)
    assert runs.renew(HOST, "h1", T0 + 60, last_start=T0 + 10)
    assert runs.renew(HOST, "h1", T0 + 60, last_start=T0 + 10)  # a retry: the same values again
    got = runs.get(HOST)
    assert (got.holder, got.lease_until, got.last_start) == ("h1", T0 + 60, T0 + 10)
    assert not runs.renew("b.example", "h1", T0 + 60, last_start=T0 + 10)


def test_a_release_that_ends_the_run_records_the_host_and_lets_the_next_schedule_win(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert not runs.release(HOST, "h2", T0 + 5, T0 + 9, 4.5, next_run=None)
    assert runs.release(HOST, "h1", T0 + 5, T0 + 9, 4.5, next_run=None)
    assert runs.get(HOST) == HostRun(HOST, last_start=T0 + 5, pause_until=T0 + 9, adaptive_delay=4.5)
    assert runs.lease(HOST, "r1", "h3", T0 + 6, T0 + 36) is None  # the ended run's redelivered message
    assert runs.schedule(HOST, "r2", T0 + 6, T0 + 106)  # well before r1's run_expires
    before = runs.lease(HOST, "r2", "h3", T0 + 6, T0 + 36)
    assert before == HostRun(
        HOST, run_id="r2", run_expires=T0 + 106, last_start=T0 + 5, pause_until=T0 + 9, adaptive_delay=4.5
    )


def test_a_release_that_keeps_the_run_lets_its_wake_message_lease_again(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert runs.release(HOST, "h1", T0 + 5, 0.0, 2.0, next_run="r1", expires=T0 + 100)
    got = runs.get(HOST)
    assert (got.run_id, got.holder, got.adaptive_delay) == ("r1", None, 2.0)
    assert not runs.schedule(HOST, "r2", T0 + 6, T0 + 106)
    before = runs.lease(HOST, "r1", "h2", T0 + 7, T0 + 37)
    assert before is not None and (before.holder, before.last_start, before.adaptive_delay) == (None, T0 + 5, 2.0)
    assert runs.release(HOST, "h2", T0 + 8, 0.0, None, next_run="r1", expires=T0 + 100)  # the host's slowdown is over
    assert runs.get(HOST).adaptive_delay is None


def test_a_release_for_a_wake_up_under_a_new_run_id_makes_every_earlier_message_stale(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert runs.release(HOST, "h1", T0 + 5, 0.0, None, next_run="r1-b", expires=T0 + 100)
    assert runs.lease(HOST, "r1", "h2", T0 + 6, T0 + 36) is None  # the first message, redelivered
    assert not runs.schedule(HOST, "r2", T0 + 99, T0 + 200)  # the wake-up is not replaced before it expires
    assert runs.lease(HOST, "r1-b", "h2", T0 + 6, T0 + 36) is not None
    assert runs.get(HOST).run_expires == T0 + 36 + FakeRuns.GRACE


def test_a_release_repeated_by_its_holder_is_true_until_another_holder_takes_the_lease(runs: Runs) -> None:
    leased(runs, until=T0 + 30)
    assert runs.release(HOST, "h1", T0 + 5, 0.0, None, next_run="r1", expires=T0 + 100)
    assert runs.release(HOST, "h1", T0 + 5, 0.0, None, next_run="r1", expires=T0 + 100)  # a retry after a lost reply
    assert not runs.release(HOST, "h2", T0 + 5, 0.0, None, next_run="r1", expires=T0 + 100)
    assert runs.lease(HOST, "r1", "h2", T0 + 6, T0 + 36) is not None
    assert not runs.release(HOST, "h1", T0 + 5, 0.0, None, next_run="r1", expires=T0 + 100)
    assert runs.get(HOST).holder == "h2"


# -- the lost wake-up ----------------------------------------------------------------
DISPATCHER = ("add", "schedule")  # a URL into the backlog, then ask for a run
HOLDER = ("release", "look")  # end the run, then look at the backlog one last time


def interleavings() -> list[tuple[str, ...]]:
    """Every order of the two sides' steps that keeps each side's own order."""
    orders = set()
    for picks in itertools.combinations(range(4), 2):
        steps, d, h = [], iter(DISPATCHER), iter(HOLDER)
        for i in range(4):
            steps.append(next(d) if i in picks else next(h))
        orders.add(tuple(steps))
    return sorted(orders)


@pytest.mark.parametrize("order", interleavings(), ids="-".join)
def test_a_url_added_while_the_holder_ends_its_run_is_never_left_without_one(
    runs: Runs, order: tuple[str, ...]
) -> None:
    leased(runs, until=T0 + 30)
    backlog: list[str] = []  # the Backlog port's half, reduced to whether the URL is there
    scheduled = seen = False
    for step in order:
        if step == "add":
            backlog.append("http://a.example/new")
        elif step == "schedule":
            scheduled = runs.schedule(HOST, "r2", T0 + 10, T0 + 110)
        elif step == "release":
            assert runs.release(HOST, "h1", T0 + 9, 0.0, None, next_run=None)
        else:
            seen = bool(backlog)
    # Either the dispatcher starts a run, or the holder finds the URL (and starts one itself).
    assert scheduled or seen, order
    if order.index("release") < order.index("schedule"):
        assert scheduled  # after the release, the next schedule wins


# -- lost replies on DynamoDB --------------------------------------------------------
# Every call: done upstream, then its reply lost (a 500); botocore's retry goes through.
LOSE_EVERY_REPLY = FaultPlan(
    failure_rate=1.0, after_share=1.0, drop_share=0.0, fail_attempts=1, after_exempt=frozenset()
)


@pytest.fixture
def lossy() -> Iterator[tuple[RunStore, FaultyEndpoint]]:
    """A ``RunStore`` behind an endpoint that loses every reply once (see tests/integration/test_lost_replies.py)."""
    with (
        moto_server() as upstream,
        FaultyEndpoint(upstream, FaultPlan(failure_rate=0.0)) as endpoint,
        pytest.MonkeyPatch.context() as env,
    ):
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.setenv(key, "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_ENDPOINT_URL", endpoint.url)
        aws.reset_clients()
        # moto's backends are per process: other tests' tables may be there already.
        names = resources.create_all(visibility_timeout=30, exist_ok=True)
        endpoint.plan = LOSE_EVERY_REPLY
        aws.reset_clients()  # fresh clients: a fresh retry quota
        try:
            yield RunStore(aws.StackNames.from_env(names).hosts), endpoint
        finally:
            aws.reset_clients()


def test_each_write_retried_after_its_reply_was_lost_reads_as_done(lossy: tuple[RunStore, FaultyEndpoint]) -> None:
    runs, endpoint = lossy
    host = f"lost-{uuid.uuid4().hex[:8]}.example"
    assert runs.schedule(host, "r1", T0, T0 + 100)
    assert not runs.schedule(host, "r2", T0, T0 + 100)
    before = runs.lease(host, "r1", "h1", T0, T0 + 30)
    assert before is not None and (before.holder, before.lease_until) == ("h1", T0 + 30)  # its own lease
    assert runs.lease(host, "r1", "h2", T0 + 1, T0 + 31) is None
    assert runs.renew(host, "h1", T0 + 60, last_start=T0 + 2)
    assert runs.release(host, "h1", T0 + 3, T0 + 4, 1.5, next_run=None)
    assert not runs.release(host, "h2", T0 + 3, T0 + 4, None, next_run=None)
    assert runs.schedule(host, "r3", T0 + 5, T0 + 105)
    endpoint.plan = FaultPlan(failure_rate=0.0)
    assert runs.get(host) == HostRun(
        host, run_id="r3", run_expires=T0 + 105, last_start=T0 + 3, pause_until=T0 + 4, adaptive_delay=1.5
    )
    lost = endpoint.faults[("dynamodb", "UpdateItem", "after")]
    assert lost == 5  # each of the five writes that did something lost its first reply
