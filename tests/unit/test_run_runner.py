"""Host runs on the fakes: one invocation leases hosts and works each through its backlog (issue 14)."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import Any

import pytest
from fakes import FakeRuns
from hostruns import HOST, UA, Env, SharedClock

from crawlstack import jobs, settings
from crawlstack.config import CrawlConfig
from crawlstack.fetch import http
from crawlstack.fetch.pacing import break_even_wait
from crawlstack.fetch.warc import read_warc
from crawlstack.messages import FrontierMessage, InvalidMessage, RunMessage
from crawlstack.records.resolution import RECORD_COMPLETE
from crawlstack.urls import fingerprint


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch)


def gaps(starts: list[float]) -> list[float]:
    return [round(b - a, 6) for a, b in itertools.pairwise(starts)]


# -- the run message ---------------------------------------------------------


def test_a_run_message_round_trips_and_garbage_is_refused() -> None:
    msg = RunMessage("example.com", "abc")
    assert RunMessage.from_json(msg.to_json()) == msg
    for body in (
        "nope",
        "[]",
        '{"host": "a"}',
        '{"host": "", "run_id": "x"}',
        '{"host": "a", "run_id": 3}',
        '{"host": "a", "run_id": "x", "extra": 1}',
    ):
        with pytest.raises(InvalidMessage):
            RunMessage.from_json(body)


# -- spacing -----------------------------------------------------------------


def test_a_run_spaces_its_requests_by_the_delay_and_ends_the_run(env: Env) -> None:
    t0 = env.clock.now
    msg = env.admit(["a", "b", "c", "d"])
    result = env.run(msg)
    assert result.ends == {HOST: "done"} and result.errors == {}
    starts = env.starts()
    assert starts[0] == t0 and all(g >= 0.25 for g in gaps(starts)) and len(starts) == 4
    assert sorted(f.outcome for f in result.fetched) == ["fetched"] * 4
    assert all(env.state(p) == "fetched" for p in "abcd")
    run = env.runs.get(HOST)
    assert run.run_id is None and run.holder is None and run.last_start == starts[-1]
    assert env.backlog.peek(HOST, 10) == [] and result.runs == []


@pytest.mark.parametrize(("first_byte", "gap"), [(0.0, 0.25), (0.05, 0.30)])
def test_the_delay_counts_from_the_response_and_a_slow_body_takes_none_of_it(
    env: Env, first_byte: float, gap: float
) -> None:
    # Headers come ``first_byte`` after the request (the server had it by then), the body 0.1 s later.
    msg = env.admit(["a", "b", "c"])
    for url, page in list(env.web.pages.items()):

        def slow(page: Any = page) -> Any:
            sent = env.clock.now
            env.clock.advance(first_byte + 0.1)
            return replace(page(), started_at=sent, responded_at=sent + first_byte)

        env.web.pages[url] = slow
    env.run(msg)
    assert gaps(env.starts()) == [pytest.approx(gap)] * 2


def test_links_that_come_while_a_host_lingers_go_at_the_last_start_plus_the_delay(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(env.runner, "active", lambda: 50)  # lingering is cheaper than being started again
    msg = env.admit(["a"])
    real_peek = env.backlog.peek
    peeks: list[float] = []

    found: list[float] = []

    def peek(host: str, limit: int, after: str | None = None, consistent: bool = True) -> list[Any]:
        peeks.append(env.clock.now)
        if not found and env.starts() and env.clock.now - env.starts()[0] > 0.4:
            # The page's links arrive while the run lingers, after the delay since its request has passed.
            env.backlog.add(HOST, 2, [env.task("b", depth=2)])
            found.append(env.clock.now)
        return real_peek(host, limit, after, consistent)

    monkeypatch.setattr(env.backlog, "peek", peek)
    env.run(msg)
    first, second = env.starts()
    assert found and found[0] - first > 0.25
    assert second - found[0] == pytest.approx(0.0, abs=1e-6)  # sent at once, not a delay later


def test_a_second_holder_waits_for_the_last_recorded_start_plus_the_delay(env: Env) -> None:
    env.run(env.admit(["a"]))
    [first] = env.starts()
    env.clock.advance(0.1)
    env.run(env.admit(["b"]))
    assert env.starts()[1] == pytest.approx(first + 0.25, abs=1e-6)


def test_after_a_holder_died_the_next_waits_for_its_lease_end_plus_the_delay(env: Env) -> None:
    msg = env.admit(["a"])
    assert msg is not None
    lease_until = env.clock.now + 120
    assert env.runs.lease(HOST, msg.run_id, "dead", env.clock.now, lease_until) is not None
    env.clock.now = lease_until + 0.1  # the dead holder's lease has run out; it recorded no start
    result = env.run(msg)
    assert result.ends == {HOST: "done"}
    assert env.starts() == [lease_until + 0.25]


def test_hosts_of_one_invocation_sleep_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = ["a.test", "b.test", "c.test"]
    env = Env(monkeypatch, delay=1.0, clock=SharedClock(workers=len(hosts)))
    env.runner = env.make_runner()
    assert break_even_wait(len(hosts)) > 1.0
    t0 = env.clock.now
    result = env.run(*[env.admit(["1", "2", "3"], host=h) for h in hosts])
    assert result.ends == dict.fromkeys(hosts, "done")
    for host in hosts:
        assert gaps(env.starts(host)) == [1.0, 1.0]
    # Three hosts of three requests a second apart: two seconds in all, not six.
    assert env.clock.now - t0 == pytest.approx(2.0)


def test_a_lone_host_with_a_long_delay_is_rescheduled_and_many_hosts_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch, delay=4.0)
    # Released with a page unflushed, the host flushes alone: that is priced in, so waits under ~2.7 s are slept.
    assert break_even_wait(1) < 1.0 < break_even_wait(1, unflushed=True) < 4.0
    msg = env.admit(["a", "b"])
    assert msg is not None
    result = env.run(msg)
    assert result.ends == {HOST: "rescheduled"} and len(env.starts()) == 1
    assert result.waits_slept == 0  # its one wait was left to the delayed message
    [(body, delay)] = result.runs
    wake = RunMessage.from_json(body)
    assert wake.host == HOST and wake.run_id != msg.run_id and delay == 4
    run = env.runs.get(HOST)
    assert run.run_id == wake.run_id and run.holder is None and run.last_start == env.starts()[0]
    assert env.run(msg).ends == {HOST: "refused"}  # the first message, redelivered: no second chain
    assert [len(b.tasks) for b in env.backlog.peek(HOST, 10)] == [1]
    assert env.state("a") == "fetched" and env.state("b") == "queued"
    # Woken by that message: the rest is fetched, a delay after the first.
    env.clock.advance(delay)
    again = env.run(RunMessage.from_json(body))
    assert again.ends == {HOST: "done"} and gaps(env.starts()) == [4.0]

    hosts = [f"h{i}.test" for i in range(8)]
    many = Env(monkeypatch, delay=3.0, clock=SharedClock(workers=len(hosts)))
    many.runner = many.make_runner()
    assert break_even_wait(len(hosts)) > 3.0
    result = many.run(*[many.admit(["1", "2"], host=h) for h in hosts])
    assert result.ends == dict.fromkeys(hosts, "done") and result.runs == []
    # Each host slept its wait between its two pages, then lingered a while for their links.
    assert result.waits_slept == 2 * len(hosts)
    assert result.seconds_slept == pytest.approx((3.0 + settings.RUN_LINGER_SECONDS) * len(hosts))


# -- flushing ----------------------------------------------------------------


def test_a_long_run_flushes_warcs_then_outcomes_then_bundles(env: Env) -> None:
    paths = [f"p{i:02d}" for i in range(30)]
    env.run(env.admit(paths))
    warcs = [e[1] for e in env.journal if e[0] == "put" and e[1].startswith(settings.PAGES_PREFIX)]
    assert len(warcs) >= 2
    seen: set[str] = set()
    position = {e: i for i, e in enumerate(env.journal)}
    for key in warcs:
        urls = {p.url for p in read_warc(env.blobs.get(key))}
        assert not urls & seen
        seen |= urls
    assert seen == {f"http://{HOST}/{p}" for p in paths}
    # First tries: the crawl log is their outcome, counted once per flush; the urls table is not written.
    assert [e for e in env.journal if e[0] == "outcome"] == []
    assert env.crawls.logged == {"c": {"fetched": 30}}
    [delete] = [e for e in env.journal if e[0] == "delete"]
    assert position[delete] > max(i for e, i in position.items() if e[0] == "put")
    replaced = [c for c in env.backlog.calls if c[0] == "replace"]
    assert replaced, "the partly served bundle is written back at each flush"
    logs = env.blobs.keys(settings.CRAWL_LOG_PREFIX)
    assert len(logs) == len(warcs)


def test_a_crash_before_the_bundle_is_deleted_fetches_again_and_loses_nothing(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    msg = env.admit(["a", "b"])
    assert msg is not None
    real = env.backlog.delete

    def crash(*args: Any, **kw: Any) -> None:
        raise RuntimeError("the container died")

    monkeypatch.setattr(env.backlog, "delete", crash)  # after the WARC and the crawl log
    monkeypatch.setattr(env.runs, "release", crash)  # the store is gone too: the lease must expire
    result = env.run(msg)
    assert result.ends == {HOST: "failed"} and isinstance(result.errors[HOST], RuntimeError)
    assert len(env.blobs.keys(settings.PAGES_PREFIX)) == 1  # the WARC was written
    assert [len(b.tasks) for b in env.backlog.peek(HOST, 10)] == [2]  # the bundle stayed
    lease_until = env.runs.items[HOST]["lease_until"]  # never released
    monkeypatch.setattr(env.backlog, "delete", real)
    monkeypatch.setattr(env.runs, "release", FakeRuns.release.__get__(env.runs))
    env.clock.now = lease_until + 1
    again = env.run(msg)
    assert again.ends == {HOST: "done"}
    assert [u for u, _, _ in env.web.calls] == [f"http://{HOST}/{p}" for p in "abab"]
    assert env.state("a") == env.state("b") == "fetched"
    assert env.backlog.peek(HOST, 10) == []


def test_a_host_that_fails_gives_its_lease_back_so_the_message_redelivered_goes_on_at_the_delay(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    msg = env.admit(["a", "b"])
    assert msg is not None
    real = env.backlog.delete
    monkeypatch.setattr(env.backlog, "delete", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("bug")))
    assert env.run(msg).ends == {HOST: "failed"}
    run = env.runs.get(HOST)
    assert run.holder is None and run.run_id == msg.run_id and run.last_start == env.starts()[-1]
    monkeypatch.setattr(env.backlog, "delete", real)
    env.clock.advance(0.01)  # the redelivery comes a moment later, not after the lease's expiry
    assert env.run(msg).ends == {HOST: "done"}
    assert min(gaps(env.starts())) >= 0.25 - 1e-9
    assert env.state("a") == env.state("b") == "fetched"


# -- outcomes ----------------------------------------------------------------


def test_a_retry_goes_back_to_the_backlog_and_is_served_after_its_backoff(env: Env) -> None:
    msg = env.admit(["a"])
    assert msg is not None
    tries = iter([503, 200])
    url = f"http://{HOST}/a"
    page = env.web.pages[url]
    env.web.pages[url] = lambda: replace(page(), status=next(tries))
    result = env.run(msg)
    [tried] = result.fetched
    assert tried.outcome == "retry" and tried.retry is not None
    retry_at = tried.retry.not_before
    assert retry_at == env.starts()[0] + 0.5 * 4.0  # full jitter of try 1: 0.5 * min(60, 2 * 2**1)
    assert env.urls.item("c", fingerprint(url))["state"] == "retrying"
    [bundle] = env.backlog.peek(HOST, 10)
    assert [t.attempt for t in bundle.tasks] == [2]
    # Too long to sleep alone: woken when the retry is due.
    assert result.ends == {HOST: "rescheduled"}
    [(body, delay)] = result.runs
    env.clock.advance(delay)
    again = env.run(RunMessage.from_json(body))
    assert [f.outcome for f in again.fetched] == ["fetched"]
    assert env.starts()[1] >= retry_at
    assert env.urls.item("c", fingerprint(url))["attempt"] == 2


def test_a_redirect_goes_to_the_frontier_one_hop_more(env: Env) -> None:
    msg = env.admit(["old"])
    env.web.page(f"http://{HOST}/old", status=301, body=b"", headers=[("Location", "/new")])
    result = env.run(msg)
    [(body, delay)] = result.frontier
    nxt = FrontierMessage.from_json(body)
    assert (nxt.url, nxt.hops, nxt.referrer, delay) == (f"http://{HOST}/new", 1, f"http://{HOST}/old", 0)
    assert result.fetched[0].reason == f"redirect to http://{HOST}/new"


def test_tasks_of_a_stopped_crawl_are_held_and_of_a_complete_record_skipped(env: Env) -> None:
    msg = env.admit(["a"])
    env.crawls.set_state("c", "stopped")
    result = env.run(msg)
    assert env.web.calls == [] and env.held.count() == 1 and env.state("a") == "queued"
    assert result.ends == {HOST: "done"} and env.backlog.peek(HOST, 10) == []

    env.crawls.set_state("c", "running")
    env.resolved.merge("c", "r1", ("title",), {"title": "done"}, "http://example.com/done")
    result = env.run(env.admit(["b"]))
    assert env.web.calls == []
    [skipped] = result.fetched
    assert (skipped.outcome, skipped.reason) == ("skipped", RECORD_COMPLETE)
    assert env.state("b") == "skipped"


def test_robots_is_fetched_once_as_a_spaced_request_and_disallowed_tasks_skipped(env: Env) -> None:
    origin = f"http://{HOST}"
    env.robots[origin] = lambda: http.FetchResult(
        origin + "/robots.txt", status=200, body=b"User-agent: *\nDisallow: /private\n", finished_at=env.clock.now
    )
    t0 = env.clock.now
    result = env.run(env.admit(["a", "private/b", "c"], robots=False))
    assert result.ends == {HOST: "done"}
    assert [u for u, _, _ in env.web.calls] == [origin + "/robots.txt", origin + "/a", origin + "/c"]
    assert [at for _, _, at in env.web.calls] == [t0, t0 + 0.25, t0 + 0.5]
    assert env.hosts.get_robots(origin) is not None
    skipped = [f for f in result.fetched if f.outcome == "skipped"]
    assert [(f.task.url, f.reason) for f in skipped] == [(origin + "/private/b", "robots: disallowed by robots.txt")]
    assert env.state("private/b") == "skipped"


# -- leases and run ends -----------------------------------------------------


def test_a_duplicate_or_stale_run_message_fetches_nothing(env: Env) -> None:
    msg = env.admit(["a"])
    assert msg is not None
    result = env.run(msg, msg, RunMessage(HOST, "stale"))
    assert result.ends == {HOST: "done"} and len(env.web.calls) == 1
    assert [c for c in env.runs.calls if c[0] == "lease"] == [("lease", HOST, msg.run_id, result.holder)]
    # Another invocation while the first holds the lease: refused.
    msg2 = env.admit(["b"])
    assert msg2 is not None
    env.runs.lease(HOST, msg2.run_id, "other", env.clock.now, env.clock.now + 120)
    result = env.run(msg2)
    assert result.ends == {HOST: "refused"} and len(env.web.calls) == 1


def test_a_bundle_added_while_the_run_ends_gets_a_new_run(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    msg = env.admit(["a"])
    real = env.runs.release
    late: list[RunMessage | None] = []

    def release(*args: Any, **kw: Any) -> bool:
        # Dispatch adds its bundle; its schedule loses to the run still there.
        late.append(env.admit(["b"]))
        return real(*args, **kw)

    monkeypatch.setattr(env.runs, "release", release)
    result = env.run(msg)
    assert late == [None]
    [(body, _)] = result.runs
    new = RunMessage.from_json(body)
    assert msg is not None and new.host == HOST and new.run_id != msg.run_id
    assert env.runs.get(HOST).run_id == new.run_id
    assert [len(b.tasks) for b in env.backlog.peek(HOST, 10)] == [1]


def test_at_the_deadline_a_host_flushes_writes_back_releases_and_is_woken(env: Env) -> None:
    msg = env.admit([f"p{i}" for i in range(10)])
    assert msg is not None
    t0 = env.clock.now
    result = env.run(msg, seconds=settings.RUN_STOP_MARGIN_SECONDS + 0.6)
    assert result.ends == {HOST: "deadline"}
    assert env.starts() == [t0, t0 + 0.25, t0 + 0.5]
    assert [len(b.tasks) for b in env.backlog.peek(HOST, 10)] == [7]
    assert all(env.state(f"p{i}") == "fetched" for i in range(3))
    [(body, delay)] = result.runs
    wake = RunMessage.from_json(body)
    run = env.runs.get(HOST)
    assert run.run_id == wake.run_id != msg.run_id and run.holder is None
    assert delay == 1  # 0.25 s to the next start, in whole seconds


def test_a_lost_lease_stops_the_host_at_once_without_a_release(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    msg = env.admit([f"p{i}" for i in range(6)])
    env.runner.lease_seconds, env.runner.renew_before = 1.0, 0.6
    monkeypatch.setattr(env.runs, "renew", lambda *a, **k: False)
    result = env.run(msg)
    assert result.ends == {HOST: "lost"} and result.runs == []
    fetched = [f.task.url for f in result.fetched]
    assert fetched and len(fetched) < 6
    assert all(env.state(u.rsplit("/", 1)[1]) == "fetched" for u in fetched)
    assert not [c for c in env.runs.calls if c[0] == "release"]
    assert not [c for c in env.backlog.calls if c[0] == "replace"]
    assert sum(len(b.tasks) for b in env.backlog.peek(HOST, 10)) == 6  # the bundle in hand stays whole


def test_a_failing_host_fails_alone(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    good, bad = env.admit(["a"], host="good.test"), env.admit(["a"], host="bad.test")
    real = env.crawls.get

    def get(crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        if threading.current_thread().name == "run-bad.test":
            raise RuntimeError("crawls table unavailable")
        return real(crawl_id, max_age)

    monkeypatch.setattr(env.crawls, "get", get)
    assert good is not None and bad is not None
    result = env.run(good, bad)
    assert result.ends == {"good.test": "done", "bad.test": "failed"}
    assert set(result.errors) == {"bad.test"}
    bad_run = env.runs.get("bad.test")
    assert bad_run.holder is None and bad_run.run_id == bad.run_id  # given back for its redelivery
    assert env.backlog.peek("bad.test", 10) != []  # its bundles stay
    assert env.state("a", host="good.test") == "fetched"


def test_a_host_refused_under_a_stale_message_is_leased_under_its_current_one(env: Env) -> None:
    msg = env.admit(["a"])
    assert msg is not None
    result = env.run(RunMessage(HOST, "stale"), msg)
    assert result.ends == {HOST: "done"} and [f.outcome for f in result.fetched] == ["fetched"]
    leases = [c for c in env.runs.calls if c[0] == "lease"]
    assert leases == [("lease", HOST, "stale", result.holder), ("lease", HOST, msg.run_id, result.holder)]


def test_a_stopped_crawls_tasks_are_held_and_the_hosts_other_crawl_goes_on_at_once(env: Env) -> None:
    env.crawls.put(CrawlConfig(crawl_id="d", delay=0.25, user_agent=UA))
    other_url = env.url("other")
    env.urls.claim("d", fingerprint(other_url), other_url, 1)
    env.web.page(other_url)
    other = replace(env.task("x", page=False), url=other_url, fp=fingerprint(other_url), crawl_id="d")
    stopped = [env.task("a"), env.task("b")]
    jobs.stop("c", env.crawls)
    t0 = env.clock.now
    result = env.run(env.add([*stopped, other]))
    assert result.ends == {HOST: "done"} and env.left() == []
    # No request of the stopped crawl, and none of the host's time: the other crawl's page goes first thing.
    assert env.web.calls == [(other_url, UA, t0)]
    assert [(f.task.crawl_id, f.outcome) for f in result.fetched] == [("d", "fetched")]
    assert sorted(key for key, _ in env.held.held("c", 10)) == sorted(jobs.task_key(t) for t in stopped)
    assert env.state("a") == env.state("b") == "queued"

    # Resumed: the held tasks go back to the host's backlog, and its run is started.
    woken: list[RunMessage] = []
    sent = jobs.resume("c", env.crawls, env.held, FakeQueue(), env.backlog, env.runs, woken.extend, env.clock)
    assert sent == 2 and env.held.count() == 0 and len(woken) == 1
    again = env.run(*woken)
    assert sorted(f.task.url for f in again.fetched) == [t.url for t in stopped]
    assert env.state("a") == env.state("b") == "fetched"


class FakeQueue:
    def __init__(self) -> None:
        self.bodies: list[str] = []

    def send(self, messages: Any) -> int:
        self.bodies += [body for body, _ in messages]
        return len(self.bodies)


def test_a_run_flushes_once_its_pages_reach_the_flush_bytes(env: Env) -> None:
    env.runner.flush_bytes = 1  # every page is enough
    result = env.run(env.admit(["a", "b", "c"]))
    assert result.ends == {HOST: "done"} and len(result.warc_keys) == 3
    for key, path in zip(result.warc_keys, "abc", strict=True):
        assert [p.url for p in read_warc(env.blobs.get(key))] == [env.url(path)]
    # Each page's crawl-log line is written with its WARC, and names it.
    assert len(env.crawl_logs()) == 3
    for key, path in zip(result.warc_keys, "abc", strict=True):
        assert env.item(path)["warc"] == key


# -- lingering and stopping --------------------------------------------------------


def test_a_host_whose_backlog_runs_dry_waits_for_its_pages_links_in_the_same_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = Env(monkeypatch, max_depth=5)  # b, at depth 2, may have links too
    # Many hosts share the invocation's sleep: lingering is cheaper than being started again.
    monkeypatch.setattr(env.runner, "active", lambda: 50)
    msg = env.admit(["a"])
    real_peek = env.backlog.peek
    peeks: list[float] = []

    def peek(host: str, limit: int, after: str | None = None, consistent: bool = True) -> list[Any]:
        peeks.append(env.clock.now)
        if len(peeks) == 4:  # the page's links arrive while the run lingers
            env.backlog.add(HOST, 2, [env.task("b", depth=2)])
        return real_peek(host, limit, after, consistent)

    monkeypatch.setattr(env.backlog, "peek", peek)
    result = env.run(msg)
    assert result.ends == {HOST: "done"} and result.runs == []  # one run, no wake-up
    assert [u for u, _, _ in env.web.calls] == [env.url("a"), env.url("b")]
    assert env.state("b") == "fetched"
    # It looked again every RUN_LINGER_POLL_SECONDS, and gave up RUN_LINGER_SECONDS after its last page.
    assert peeks[-1] - env.starts()[-1] >= settings.RUN_LINGER_SECONDS - 1e-9
    assert env.runs.get(HOST).run_id is None
    # Its polls read eventually consistent; the look after it ended its run is consistent (the lost wake-up).
    looks = [c for c in env.backlog.calls if c[0] == "peek"]
    assert ("peek", HOST, "eventually") in looks and looks[-1] == ("peek", HOST)


def test_a_host_whose_pages_are_at_the_depth_limit_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 28: a watch's runs lingered 3 s for links its checks never have, holding fetch slots that
    # other hosts' checks waited for; in a simulation, an hour of its time, and then they went out together.
    env = Env(monkeypatch, max_depth=0)
    monkeypatch.setattr(env.runner, "active", lambda: 50)  # lingering would be cheaper than a new start
    result = env.run(env.admit(["a"], depth=0))
    assert result.ends == {HOST: "done"} and env.clock.sleeps == [] and env.state("a") == "fetched"


def test_a_lone_host_does_not_linger_and_a_stopped_runner_stops_at_the_next_wait(env: Env) -> None:
    result = env.run(env.admit(["a"]))
    assert result.ends == {HOST: "done"} and env.clock.sleeps == []  # ended at once: cheaper to be started again
    env.runner.stop()
    again = env.run(env.admit(["b", "c"]))
    assert again.ends == {HOST: "deadline"} and [u for u, _, _ in env.web.calls] == [env.url("a")]
    [(body, _)] = again.runs
    assert RunMessage.from_json(body).host == HOST  # woken later: its backlog waits, whole
    assert [len(b.tasks) for b in env.backlog.peek(HOST, 10)] == [2]
