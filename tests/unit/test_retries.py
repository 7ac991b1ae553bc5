"""Retries of HTTP errors in host runs, on the in-memory stores: backoff, Retry-After, the urls table's tries.

A retry is the same task with ``attempt`` + 1 and a ``not_before``, added
back to its host's backlog at the flush, after its outcome ("retrying");
the host's run serves it when it is due (``crawlstack.runs``).
"""

from __future__ import annotations

import gzip
import itertools
import json
from dataclasses import replace
from email.utils import formatdate

import pytest
from hostruns import HOST, Env, fetched_of

from crawlstack import settings
from crawlstack.fetch import pacing as schedule
from crawlstack.fetch.host_runner import RunResult
from crawlstack.fetch.outcomes import (
    FAILURE_CLASSES,
    backoff_ceiling,
    failure_class,
    retry_after_seconds,
    warc_key,
)
from crawlstack.fetch.warc import read_warc
from crawlstack.messages import FetchTask, InvalidMessage, RunMessage

UNAVAILABLE = [("Content-Type", "text/html"), ("Retry-After", "7")]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch)


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch, delay=2.0)


def wake(env: Env, result: RunResult) -> RunMessage:
    """The host's wake-up message, delivered after its SQS delay."""
    [(body, delay)] = result.runs
    env.clock.advance(delay)
    return RunMessage.from_json(body)


def test_a_503_is_archived_recorded_retrying_and_served_again_after_its_retry_after(env: Env) -> None:
    t = env.task("busy")
    env.web.page(t.url, status=503, body=b"busy", headers=UNAVAILABLE, reason="Service Unavailable")
    t0 = env.clock.now
    result = env.run(env.add([t]))

    [tried] = result.fetched
    assert (tried.outcome, tried.status) == ("retry", 503)
    assert tried.reason == "503 Service Unavailable on attempt 1 of 3; retry in 7.0s"
    # The failed try's exchange is in the flush's WARC, like any other.
    [key] = result.warc_keys
    [page] = read_warc(env.blobs.get(key))
    assert (page.url, page.status, page.body) == (t.url, 503, b"busy")
    item = env.outcome(t)
    assert (item["state"], item["status"], item["attempt"], item["warc"]) == ("retrying", 503, 1, key)
    assert item["retry_at"] == pytest.approx(t0 + 7, abs=1e-6)
    # The next try: the same task, attempt 2, back in the host's backlog, not before the Retry-After.
    [retry] = env.left()
    assert replace(retry, attempt=1, not_before=t.not_before) == t
    assert retry.attempt == 2 and retry.not_before == pytest.approx(t0 + 7, abs=1e-6)
    # The host itself pauses until then, and is woken when the retry is due.
    assert env.runs.get(HOST).pause_until == pytest.approx(t0 + 7, abs=1e-6)
    assert result.ends == {HOST: "rescheduled"}
    assert result.runs[0][1] == 7

    env.web.page(t.url)
    again = env.run(wake(env, result))
    assert [f.outcome for f in again.fetched] == ["fetched"]
    assert env.starts() == [t0, t0 + 7]
    assert env.outcome(t)["attempt"] == 2


def test_retry_after_as_an_http_date_and_as_seconds() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(" 0 ", now) == 0.0
    assert retry_after_seconds(formatdate(now + 90, usegmt=True), now) == pytest.approx(90)
    assert retry_after_seconds(formatdate(now - 90, usegmt=True), now) == 0.0  # a date gone by: now
    for bad in ("", "soon", "-5", "1.5", "Fri, 99 Foo 2024"):
        assert retry_after_seconds(bad, now) is None


@pytest.mark.parametrize("value", ["²", "١٢", "1e3", "-1", "9" * 40, "Fri, 31 Dec 99999 23:59:59 GMT"])
def test_a_malformed_retry_after_is_ignored_and_the_backoff_applies(env: Env, value: str) -> None:
    # '²' passes str.isdigit() and fails float(): it once crashed the handler, retried until the crawl stuck.
    t = env.task("odd")
    env.web.page(t.url, status=503, headers=[("Retry-After", value)], reason="Service Unavailable")
    t0 = env.clock.now
    result = env.run(env.add([t]))
    assert result.errors == {}
    [tried] = result.fetched
    assert tried.outcome == "retry"
    [retry] = env.left()
    assert retry.not_before == pytest.approx(t0 + 0.5 * backoff_ceiling(1), abs=1e-6)
    assert retry_after_seconds(value, t0) is None
    assert env.runs.get(HOST).pause_until == 0.0  # no pause asked for


def test_an_http_date_retry_after_sets_the_next_try(env: Env) -> None:
    t = env.task("later")
    when = formatdate(env.clock.now + 30, usegmt=True)
    env.web.page(t.url, status=429, headers=[("Retry-After", when)], reason="Too Many Requests")
    t0 = env.clock.now
    env.run(env.add([t]))
    [retry] = env.left()
    assert retry.not_before == pytest.approx(t0 + 30, abs=1)
    assert env.runs.get(HOST).pause_until == pytest.approx(t0 + 30, abs=1)


def test_backoff_is_full_jitter_within_an_exponential_ceiling(env: Env) -> None:
    assert [backoff_ceiling(n) for n in (1, 2, 3)] == [
        settings.RETRY_BASE_SECONDS * 2,
        settings.RETRY_BASE_SECONDS * 4,
        settings.RETRY_BASE_SECONDS * 8,
    ]
    assert backoff_ceiling(30) == settings.RETRY_MAX_BACKOFF_SECONDS
    waits = {}
    for i, draw in enumerate((0.0, 0.25, 0.999)):
        env.runner.jitter = lambda draw=draw: draw  # type: ignore[misc]
        host = f"h{i}.example"
        t = replace(env.task("e", host=host), attempt=2)
        env.urls.items[("c", t.fp)].update(state="retrying", attempt=1)
        env.web.page(t.url, status=500, body=b"", reason="Internal Server Error")
        result = env.run(env.add([t], host=host))
        tried = result.fetched[0]
        assert (tried.outcome, tried.task.attempt) == ("retry", 2) and tried.retry is not None
        waits[draw] = tried.retry.not_before - env.starts(host)[0]
    # A uniform draw scales the ceiling of attempt 2, from no wait at all to just under it.
    assert waits == pytest.approx({d: d * backoff_ceiling(2) for d in waits})


def test_a_page_that_always_fails_is_tried_exactly_max_attempts_times_then_failed(env: Env) -> None:
    t = env.task("broken")
    env.web.page(t.url, status=500, body=b"oops", reason="Internal Server Error")
    results = env.settle(env.add([t]))
    outcomes = [(f.outcome, f.reason) for f in fetched_of(results)]
    assert len(env.web.calls) == settings.RETRY_MAX_ATTEMPTS == 3
    assert [o for o, _ in outcomes] == ["retry", "retry", "failed"]
    assert outcomes[-1][1] == "500 Internal Server Error after 3 attempts"
    assert failure_class(outcomes[-1][1]) == "http_error" in FAILURE_CLASSES
    assert results[-1].ends == {HOST: "done"} and env.left() == []  # no fourth try
    item = env.outcome(t)
    assert (item["state"], item["status"], item["attempt"]) == ("failed", 500, 3)
    # Each try's exchange has a WARC of its own: a retry never overwrites the earlier try's.
    assert len({k for r in results for k in r.warc_keys}) == 3 and len(env.warcs()) == 3
    # Each try waited its backoff: half the ceiling of its attempt (the draw is 0.5).
    starts = env.starts()
    assert starts[1] - starts[0] >= 0.5 * backoff_ceiling(1) and starts[2] - starts[1] >= 0.5 * backoff_ceiling(2)


def test_a_page_that_recovers_is_fetched_on_its_third_try(env: Env) -> None:
    t = env.task("flaky")
    env.web.answers(t.url, 503, 503, 200)
    results = env.settle(env.add([t]))
    assert [f.outcome for f in fetched_of(results)] == ["retry", "retry", "fetched"]
    item = env.outcome(t)
    assert (item["state"], item["status"], item["attempt"]) == ("fetched", 200, 3)
    [page] = read_warc(env.blobs.get(item["warc"]))
    assert page.status == 200 and page.metadata["attempt"] == 3


@pytest.mark.parametrize(("error", "klass"), [("connect timeout", "timeout"), ("connection failed", "connection")])
def test_network_failures_are_retried_and_fail_with_their_class(env: Env, error: str, klass: str) -> None:
    t = replace(env.task("down"), attempt=3)
    env.urls.items[("c", t.fp)].update(state="retrying", attempt=2)
    env.web.page(t.url, status=None, error=error)
    result = env.run(env.add([t]))
    [failed] = result.fetched
    assert (failed.outcome, failed.reason) == ("failed", f"{error} after 3 attempts")
    assert failure_class(failed.reason) == klass and result.warc_keys == []

    first = env.task("first")
    env.web.page(first.url, status=None, error=error)
    [tried] = env.run(env.add([first])).fetched
    assert tried.outcome == "retry" and tried.status is None
    assert [(x.url, x.attempt) for x in env.left()] == [(first.url, 2)]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_client_errors_are_not_retried(env: Env, status: int) -> None:
    t = env.task(f"gone{status}")
    env.web.page(t.url, status=status)
    [fetched] = env.run(env.add([t])).fetched
    assert (fetched.outcome, fetched.status) == ("fetched", status) and env.left() == []


def test_a_retry_after_beyond_the_cap_fails_at_once_and_pauses_the_host_at_most_the_cap(env: Env) -> None:
    t = env.task("closed")
    env.web.page(t.url, status=503, headers=[("Retry-After", "86400")], reason="Service Unavailable")
    t0 = env.clock.now
    result = env.run(env.add([t]))
    [failed] = result.fetched
    assert failed.outcome == "failed" and env.left() == []
    assert failed.reason == "503 Service Unavailable: Retry-After of 86400s is beyond the 900s cap"
    assert env.runs.get(HOST).pause_until == pytest.approx(t0 + settings.RETRY_AFTER_MAX_SECONDS, abs=1e-6)


def test_a_redelivered_earlier_try_never_fetches_again(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "FLUSH_USD", 0.0)  # woken for the retry, not slept (flush cost aside)
    t = env.task("twice")
    env.web.page(t.url, status=502, reason="Bad Gateway")
    first = env.run(env.add([t]))
    [retry] = env.left()

    # The first try's task comes again (its admission was redelivered), and the host is woken early.
    env.backlog.add(HOST, 1, [t])
    [(body, _)] = first.runs
    early = env.run(RunMessage.from_json(body))
    assert early.fetched == [] and len(env.web.calls) == 1
    # It adds the retry of its try once more, in case its holder died before adding it:
    # the same attempt, no earlier than planned.
    assert [(x.attempt, x.not_before) for x in env.left()] == [(2, retry.not_before)] * 2

    # Both copies of try 2 are served: one request.
    env.web.page(t.url)
    results = env.settle(wake(env, early))
    assert [f.outcome for f in fetched_of(results)] == ["fetched"] and len(env.web.calls) == 2
    # And a late copy of try 1 or try 2 now finds the page fetched.
    env.backlog.add(HOST, 1, [t, retry])
    late = env.run(env.add([]))
    assert late.fetched == [] and env.left() == [] and len(env.web.calls) == 2


def test_a_retry_lost_before_it_was_added_is_tried_again_by_the_redelivered_message(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = env.task("lost")
    env.web.page(t.url, status=500, reason="Internal Server Error")
    msg = env.add([t])
    real_add = env.backlog.add

    def add(host: str, depth: int, tasks: list[FetchTask]) -> list[str]:
        if any(task.attempt > 1 for task in tasks):
            raise RuntimeError("the container died")
        return real_add(host, depth, tasks)

    monkeypatch.setattr(env.backlog, "add", add)
    result = env.run(msg)
    assert result.ends == {HOST: "failed"}
    planned = env.outcome(t)["retry_at"]
    assert env.state("lost") == "retrying" and env.left() == [t]  # the outcome is written, the bundle stayed
    monkeypatch.setattr(env.backlog, "add", real_add)
    # The message comes back later.  A first try reads no state (its outcome is the crawl
    # log's), so the try it carries is made again: a refetch after a crash, never a lost URL.
    env.clock.advance(600)
    env.web.page(t.url)
    results = env.settle(msg)
    assert [(f.outcome, f.task.attempt) for f in fetched_of(results)] == [("fetched", 1)]
    assert planned < env.clock.now and env.starts()[-1] == env.clock.now  # overdue: at once
    assert len(env.web.calls) == 2 and env.left() == []
    assert env.state("lost") == "fetched"


def test_a_retry_keeps_the_hosts_delay_and_the_hosts_other_urls_go_on_meanwhile(slow: Env) -> None:
    a, b, c = slow.task("a"), slow.task("b"), slow.task("c")
    slow.web.answers(a.url, 500, 200)
    results = slow.settle(slow.add([a, b, c]))
    assert slow.web.urls() == [a.url, b.url, c.url, a.url]
    starts = slow.starts()
    assert [round(y - x, 6) for x, y in itertools.pairwise(starts)] == [2.0, 2.0, 2.0]
    [tried] = [f for f in fetched_of(results) if f.outcome == "retry"]
    assert tried.retry is not None and starts[3] >= tried.retry.not_before
    assert {slow.state(p) for p in "abc"} == {"fetched"}


def test_retry_lines_have_their_own_crawl_log_object(env: Env) -> None:
    t = env.task("log")
    env.web.answers(t.url, 503, 200)
    results = env.settle(env.add([t]))
    assert [f.outcome for f in fetched_of(results)] == ["retry", "fetched"]
    keys = env.crawl_logs()
    assert len(keys) == 2
    outcomes = sorted(
        json.loads(line)["outcome"] for key in keys for line in gzip.decompress(env.blobs.get(key)).splitlines()
    )
    assert outcomes == ["fetched", "retry"]
    assert warc_key([t], env.clock.now) != warc_key([replace(t, attempt=2)], env.clock.now)


def test_a_retry_of_a_complete_record_gives_the_url_back(env: Env) -> None:
    t = env.task("done")
    env.web.page(t.url, status=503, reason="Service Unavailable")
    first = env.run(env.add([t]))
    env.complete("r1")
    [skipped] = env.run(wake(env, first)).fetched
    assert skipped.outcome == "skipped" and len(env.web.calls) == 1
    item = env.outcome(t)
    assert (item["state"], item["claimable"]) == ("skipped", True)


def test_attempt_is_left_out_of_a_first_tries_json() -> None:
    task = FetchTask("http://e.com/", "fp", "e.com", 0, "c", 0.0)
    assert "attempt" not in task.to_json()
    again = replace(task, attempt=2)
    assert FetchTask.from_json(again.to_json()) == again
    assert again.attempt_key == "c#fp#2" and task.attempt_key == "c#fp"


@pytest.mark.parametrize("attempt", ["0", "-1", '"2"', "true", "1.5"])
def test_a_fetch_task_with_a_bad_attempt_is_invalid(attempt: str) -> None:
    body = FetchTask("http://e.com/", "fp", "e.com", 0, "c", 0.0).to_json()[:-1] + f',"attempt":{attempt}}}'
    with pytest.raises(InvalidMessage, match="'attempt' must be a positive integer"):
        FetchTask.from_json(body)
