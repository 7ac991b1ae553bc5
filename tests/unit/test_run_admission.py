"""Run admission on the fakes: a batch's tasks in bundles per host and depth, a run per host, no lost wake-up."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fakes import FakeBacklog, FakeRuns

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.run_enqueue import RunEnqueue, flush_runs
from crawlstack.fetch.robots_txt import RobotsPolicy
from crawlstack.messages import FetchTask, FrontierMessage, RunMessage
from crawlstack.ports import RobotsRecord
from crawlstack.runs.admission import AdmissionFailed, RunAdmissions, admit, has_live_run, run_expires
from crawlstack.runs.ports import HostRun
from crawlstack.urls import fingerprint

NOW = 10_000.0
UA = "crawlstack/test"


def task(host: str, path: str, depth: int = 1, crawl_id: str = "c") -> FetchTask:
    url = f"http://{host}/{path}"
    return FetchTask(url=url, fp=fingerprint(url), host=host, depth=depth, crawl_id=crawl_id, not_before=0.0)


def gathered(*tasks: FetchTask) -> RunAdmissions:
    admissions = RunAdmissions()
    for t in tasks:
        admissions.add(t)
    return admissions


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"run-{next(counter)}"


def bundles(backlog: FakeBacklog, host: str) -> list[tuple[str, ...]]:
    """The host's bundles, shallowest first, as their tasks' paths."""
    return [tuple(t.url.rsplit("/", 1)[1] for t in b.tasks) for b in backlog.peek(host, 100)]


def schedules(runs: FakeRuns) -> list[str]:
    return [call[1] for call in runs.calls if call[0] == "schedule"]


def live_run(runs: FakeRuns, host: str, holder: str = "holder") -> str:
    """A host whose run is leased by ``holder``; its run id."""
    assert runs.schedule(host, "live", NOW - 10.0, run_expires(NOW - 10.0))
    assert runs.lease(host, "live", holder, NOW - 5.0, NOW + 60.0) is not None
    return "live"


# --- bundles per host and depth ------------------------------------------------------------


def test_tasks_of_one_host_and_depth_become_one_bundle() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    messages = admit(gathered(*(task("a.com", f"p{i}") for i in range(20))), backlog, runs, NOW, ids())
    assert messages == [RunMessage("a.com", "run-1")]
    assert len(backlog.items["a.com"]) == 1
    assert bundles(backlog, "a.com") == [tuple(f"p{i}" for i in range(20))]
    assert [c[0] for c in backlog.calls] == ["add", "peek"]


def test_several_depths_make_a_bundle_each_served_shallowest_first() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    admissions = gathered(task("a.com", "deep", 3), task("a.com", "seed", 0), task("a.com", "mid", 1))
    admissions.add(task("a.com", "deep2", 3))
    admit(admissions, backlog, runs, NOW, ids())
    assert bundles(backlog, "a.com") == [("seed",), ("mid",), ("deep", "deep2")]
    assert len(backlog.items["a.com"]) == 3


def test_a_url_named_twice_in_a_batch_is_gathered_once() -> None:
    admissions = gathered(task("a.com", "x"), task("a.com", "x"), task("a.com", "x", crawl_id="other"))
    assert len(admissions) == 2


def test_one_schedule_per_host_per_batch_and_each_winner_emits_a_message() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    admissions = gathered(
        task("a.com", "1", 0), task("b.com", "1"), task("a.com", "2", 2), task("b.com", "2"), task("a.com", "3", 1)
    )
    runs.calls = backlog.calls  # one journal, in the order the calls were made
    messages = admit(admissions, backlog, runs, NOW, ids())
    assert schedules(runs) == ["a.com", "b.com"]
    assert messages == [RunMessage("a.com", "run-1"), RunMessage("b.com", "run-2")]
    assert [c[:3] for c in backlog.calls] == [
        ("add", "a.com", "0"),
        ("add", "a.com", "1"),
        ("add", "a.com", "2"),
        ("get", "a.com"),
        ("schedule", "a.com", "run-1"),
        ("add", "b.com", "1"),
        ("get", "b.com"),
        ("schedule", "b.com", "run-2"),
    ]
    expires = NOW + settings.MAX_SQS_DELAY_SECONDS + settings.RUN_SCHEDULE_GRACE_SECONDS
    assert runs.items["a.com"]["run_expires"] == expires


def test_a_run_message_waiting_out_sqs_longest_delay_is_not_replaced() -> None:
    runs = FakeRuns()
    admit(gathered(task("a.com", "1")), FakeBacklog(), runs, NOW, lambda: "first")
    later = NOW + settings.MAX_SQS_DELAY_SECONDS + 1.0
    assert admit(gathered(task("a.com", "2")), FakeBacklog(), runs, later, lambda: "second") == []


def test_only_the_winner_emits_a_run_message() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    first = admit(gathered(task("a.com", "1")), backlog, runs, NOW, lambda: "first")
    second = admit(gathered(task("a.com", "2")), backlog, runs, NOW, lambda: "second")
    assert first == [RunMessage("a.com", "first")] and second == []
    assert runs.get("a.com").run_id == "first"


def test_a_host_with_a_live_run_gets_bundles_and_no_message_and_is_looked_at_every_batch() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    live_run(runs, "a.com")
    for batch in range(3):
        assert admit(gathered(task("a.com", f"b{batch}")), backlog, runs, NOW, ids()) == []
    assert bundles(backlog, "a.com") == [("b0",), ("b1",), ("b2",)]
    # One consistent read per batch, no memory of the live run; no refused schedule (a write unit each).
    assert [c for c in runs.calls if c[0] == "get"] == [("get", "a.com")] * 3
    assert schedules(runs) == ["a.com"]  # live_run's own
    assert runs.get("a.com").run_id == "live"


def test_a_run_past_its_expiry_or_none_is_scheduled_and_a_live_one_is_not() -> None:
    assert not has_live_run(HostRun("a.com"), NOW)
    assert not has_live_run(HostRun("a.com", run_id="old", run_expires=NOW - 1.0), NOW)
    assert has_live_run(HostRun("a.com", run_id="live", run_expires=NOW), NOW)


def test_an_expired_run_is_replaced() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    assert runs.schedule("a.com", "lost", NOW - 5_000.0, NOW - 1.0)  # its message went to the DLQ
    assert admit(gathered(task("a.com", "x")), backlog, runs, NOW, lambda: "new") == [RunMessage("a.com", "new")]
    assert runs.get("a.com").run_id == "new"
    assert runs.lease("a.com", "lost", "late", NOW, NOW + 60.0) is None  # the old run's message starts nothing


def test_an_empty_batch_writes_nothing() -> None:
    backlog, runs = FakeBacklog(), FakeRuns()
    assert admit(RunAdmissions(), backlog, runs, NOW, ids()) == []
    assert backlog.calls == [] and runs.calls == []


# --- failures ----------------------------------------------------------------------------------


class FailingBacklog(FakeBacklog):
    def __init__(self, fail_host: str) -> None:
        super().__init__()
        self.fail_host = fail_host

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        if host == self.fail_host:
            raise RuntimeError("ProvisionedThroughputExceeded")
        return super().add(host, depth, tasks)


class FailingRuns(FakeRuns):
    def __init__(self, fail_host: str) -> None:
        super().__init__()
        self.fail_host = fail_host

    def schedule(self, host: str, run_id: str, now: float, expires: float) -> bool:
        if host == self.fail_host:
            raise RuntimeError("ProvisionedThroughputExceeded")
        return super().schedule(host, run_id, now, expires)


def test_a_backlog_failure_schedules_nothing_for_its_host_and_raises() -> None:
    backlog, runs = FailingBacklog("b.com"), FakeRuns()
    admissions = gathered(task("a.com", "1"), task("b.com", "1"), task("c.com", "1"))
    with pytest.raises(AdmissionFailed) as failed:
        admit(admissions, backlog, runs, NOW, ids())
    assert isinstance(failed.value.__cause__, RuntimeError)
    assert failed.value.host == "b.com"
    assert schedules(runs) == ["a.com"]  # neither b.com nor the hosts after it
    assert failed.value.messages == [RunMessage("a.com", "run-1")]  # won before the failure: still to send
    assert "c.com" not in backlog.items


def test_flush_runs_sends_the_runs_won_before_a_failure_then_raises() -> None:
    backlog, runs = FailingBacklog("b.com"), FakeRuns()
    outbox = Outbox()
    for t in (task("a.com", "1"), task("b.com", "1")):
        outbox.runs.add(t)
    sent: list[list[RunMessage]] = []
    with pytest.raises(AdmissionFailed):
        flush_runs(outbox, backlog, runs, sent.append, clock=lambda: NOW, new_run_id=ids())
    assert sent == [[RunMessage("a.com", "run-1")]]


def test_a_failed_schedule_leaves_the_bundle_and_the_redelivery_starts_the_run() -> None:
    """The bundle waits for the host's next run; the failed batch's redelivery adds it again and schedules."""
    backlog, runs = FakeBacklog(), FailingRuns("a.com")
    with pytest.raises(AdmissionFailed) as failed:
        admit(gathered(task("a.com", "x")), backlog, runs, NOW, ids())
    assert failed.value.messages == []
    assert bundles(backlog, "a.com") == [("x",)]
    assert runs.get("a.com").run_id is None  # nothing would serve it but a later admission

    runs.fail_host = ""  # the redelivery, once the table answers
    assert admit(gathered(task("a.com", "x")), backlog, runs, NOW + 30.0, lambda: "again") == [
        RunMessage("a.com", "again")
    ]
    assert bundles(backlog, "a.com") == [("x",), ("x",)]  # a second copy: the run fetches it once (fetch.tries)


# --- the lost wake-up ---------------------------------------------------------------------------

# Where the holder's two last steps fall in an admission: 0 before its add,
# 1 between its add and its look at the run, 2 after that look (its read,
# or a schedule: the first of them).
POINTS = (0, 1, 2)
INTERLEAVINGS = [(release, peek) for release in POINTS for peek in POINTS if release <= peek]


class Holder:
    """A run's holder ending its run: ``release(next_run=None)``, then one last ``peek`` of the backlog."""

    def __init__(self, runs: FakeRuns, backlog: FakeBacklog, host: str, at: dict[int, list[str]]) -> None:
        self.runs, self.backlog, self.host, self.at = runs, backlog, host, at
        self.saw: list[str] = []

    def step(self, point: int) -> None:
        for action in self.at.pop(point, []):
            if action == "release":
                assert self.runs.release(self.host, "holder", NOW - 1.0, 0.0, None, next_run=None)
            else:
                self.saw = [b.key for b in self.backlog.peek(self.host, 10)]


class HookedBacklog(FakeBacklog):
    holder: Holder

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        self.holder.step(0)
        keys = super().add(host, depth, tasks)
        self.holder.step(1)
        return keys


class HookedRuns(FakeRuns):
    holder: Holder

    def schedule(self, host: str, run_id: str, now: float, expires: float) -> bool:
        won = super().schedule(host, run_id, now, expires)
        self.holder.step(2)
        return won

    def get(self, host: str) -> HostRun:
        run = super().get(host)
        self.holder.step(2)
        return run


def race(
    release_at: int, peek_at: int, admission: Callable[[FakeBacklog, FakeRuns], list[RunMessage]]
) -> tuple[bool, bool]:
    """(the holder's last peek saw the new bundle, the admission emitted a run message)."""
    backlog, runs = HookedBacklog(), HookedRuns()
    holder = Holder(runs, backlog, "a.com", {})
    backlog.holder = runs.holder = holder
    live_run(runs, "a.com")  # the holder's run, its backlog served to the last bundle
    holder.at.setdefault(release_at, []).append("release")
    holder.at.setdefault(peek_at, []).append("peek")
    messages = admission(backlog, runs)
    assert [c[0] for c in runs.calls].count("release") == 1 and [c[0] for c in backlog.calls].count("peek") == 1
    return bool(holder.saw), bool(messages)


@pytest.mark.parametrize(("release_at", "peek_at"), INTERLEAVINGS)
def test_no_interleaving_of_a_holders_end_and_an_admission_loses_the_wake_up(release_at: int, peek_at: int) -> None:
    saw, emitted = race(release_at, peek_at, lambda b, r: admit(gathered(task("a.com", "new")), b, r, NOW, ids()))
    assert saw or emitted
    if release_at == 2:  # released after the schedule lost to the live run: the holder must see the bundle
        assert saw and not emitted


def test_the_race_harness_catches_a_schedule_before_the_add() -> None:
    """Scheduling first (or skipping the schedule for a host believed live) strands the URL in some order."""

    def wrong_order(backlog: FakeBacklog, runs: FakeRuns) -> list[RunMessage]:
        won = runs.schedule("a.com", "early", NOW, run_expires(NOW))
        backlog.add("a.com", 1, [task("a.com", "new")])
        return [RunMessage("a.com", "early")] if won else []

    # Hooks: 0/1 around the add (now second), 2 after the schedule (now first): release and peek between them.
    outcomes = {(r, p): race(r, p, wrong_order) for r, p in INTERLEAVINGS}
    assert (False, False) in outcomes.values()


# --- RunEnqueue ---------------------------------------------------------------------------------


def robots_policy(body: bytes = b"") -> RobotsPolicy:
    status = 200 if body else 404
    return RobotsPolicy(RobotsRecord.from_fetch("http://example.com", status, body))


def link(url: str, depth: int = 1, policy: RobotsPolicy | None = None, **kw: Any) -> Link:
    made = Link(FrontierMessage(url=url, depth=depth, crawl_id="c", **kw), message_id="m1")
    made.config = CrawlConfig(crawl_id="c", delay=1.0, user_agent=UA)
    made.policy = policy or robots_policy()
    return made


def test_run_enqueue_gathers_the_task_and_says_queued() -> None:
    outbox = Outbox()
    made = link("http://example.com/a", 2, referrer="http://example.com/", record_id="r1", want=("title",), hops=1)
    assert RunEnqueue()(made, outbox) == Decision("http://example.com/a", "queued")
    assert len(outbox.runs) == 1
    [(host, [(depth, [queued])])] = list(outbox.runs)
    assert (host, depth) == ("example.com", 2)
    assert queued == FetchTask(
        url="http://example.com/a",
        fp=fingerprint("http://example.com/a"),
        host="example.com",
        depth=2,
        crawl_id="c",
        not_before=0.0,
        hops=1,
        referrer="http://example.com/",
        record_id="r1",
        want=("title",),
    )


def test_a_batch_through_run_enqueue_and_flush_runs() -> None:
    outbox, backlog, runs = Outbox(), FakeBacklog(), FakeRuns()
    enqueue = RunEnqueue()
    for i in range(30):
        enqueue(link(f"http://example.com/p{i}", depth=1), outbox)
    enqueue(link("http://example.com/", depth=0), outbox)
    sent: list[list[RunMessage]] = []
    messages = flush_runs(outbox, backlog, runs, sent.append, clock=lambda: NOW, new_run_id=lambda: "r")
    assert sent == [messages] == [[RunMessage("example.com", "r")]]
    assert [len(b.tasks) for b in backlog.peek("example.com", 10)] == [1, 30]  # two writes admit 31 URLs
    outbox.clear()
    assert not outbox.runs
    assert flush_runs(outbox, backlog, runs, sent.append) == [] and len(sent) == 1


def test_a_failed_admission_names_the_messages_whose_tasks_it_may_have_left_out() -> None:
    admissions = RunAdmissions()
    for message_id, t in [("m1", task("a.test", "1")), ("m2", task("b.test", "2")), ("m3", task("c.test", "3")),
                          ("m1", task("c.test", "4")), ("m4", task("a.test", "5"))]:  # fmt: skip
        admissions.add(t, message_id)
    # Admission stops at the host that failed: its messages and those of the hosts after it.
    assert admissions.unadmitted(AdmissionFailed("b.test", [])) == {"m2", "m3", "m1"}
    assert admissions.unadmitted(AdmissionFailed("c.test", [])) == {"m3", "m1"}
    # A failure past admission (the run messages' send): every message that gave a task.
    assert admissions.unadmitted(RuntimeError("SQS refused the batch")) == {"m1", "m2", "m3", "m4"}
    admissions.clear()
    assert admissions.unadmitted(RuntimeError("x")) == set()
