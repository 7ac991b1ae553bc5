"""Retries of HTTP errors in fetch, on the in-memory stores: backoff, Retry-After, the urls table's tries."""

from __future__ import annotations

from dataclasses import replace
from email.utils import formatdate

import pytest
from test_fetcher import Env

from crawlstack import settings
from crawlstack.crawllog import crawl_log_objects
from crawlstack.dispatch import Outbox
from crawlstack.fetcher import (
    FAILURE_CLASSES,
    backoff_ceiling,
    failure_class,
    retry_after_seconds,
    warc_key,
)
from crawlstack.messages import FetchTask, InvalidMessage
from crawlstack.politeness import window_key
from crawlstack.warc import read_warc

UNAVAILABLE = [("Content-Type", "text/html"), ("Retry-After", "7")]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Env:
    made = Env(monkeypatch)
    made.fetcher.jitter = lambda: 0.5
    return made


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Env:
    made = Env(monkeypatch, delay=2.0)
    made.fetcher.jitter = lambda: 0.5
    return made


def sent(outbox: Outbox) -> list[tuple[FetchTask, int]]:
    return [(FetchTask.from_json(body), delay) for body, delay in outbox.fetch]


def test_a_503_is_archived_recorded_retrying_and_sent_again_after_its_retry_after(env: Env) -> None:
    t = env.admitted("busy")
    env.web.page(t.url, status=503, body=b"busy", headers=UNAVAILABLE, reason="Service Unavailable")
    outbox = Outbox()
    result = env.fetcher.fetch_batch([t], outbox)

    [tried] = result.fetched
    assert (tried.outcome, tried.status) == ("retry", 503)
    assert tried.reason == "503 Service Unavailable on attempt 1 of 3; retry in 7.0s"
    # The failed try's exchange is in the batch's WARC, like any other.
    [page] = read_warc(env.blobs.get(result.warc_key))
    assert (page.url, page.status, page.body) == (t.url, 503, b"busy")
    item = env.urls.item("c", t.fp)
    assert (item["state"], item["status"], item["attempt"], item["warc"]) == ("retrying", 503, 1, result.warc_key)
    assert item["retry_at"] == pytest.approx(env.clock.now + 7)
    # The next try: the same task, attempt 2, in its host's window, not before the Retry-After.
    [(retry, delay)] = sent(outbox)
    assert replace(retry, attempt=1, not_before=t.not_before, adaptive_delay=0.0) == t
    assert retry.attempt == 2 and retry.not_before == pytest.approx(env.clock.now + 7) and delay == 7
    assert window_key(retry) in env.hosts.read_slot("example.com").window
    assert outbox.unparked == {"example.com": [None]}


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
    t = env.admitted("odd")
    env.web.page(t.url, status=503, headers=[("Retry-After", value)], reason="Service Unavailable")
    outbox = Outbox()
    result = env.fetcher.fetch_batch([t], outbox)
    assert result.errors == {}
    [tried] = result.fetched
    assert tried.outcome == "retry"
    [(retry, _)] = sent(outbox)
    assert retry.not_before == pytest.approx(env.clock.now + 0.5 * backoff_ceiling(1))
    assert retry_after_seconds(value, env.clock.now) is None


def test_an_http_date_retry_after_sets_the_next_try(env: Env) -> None:
    t = env.admitted("later")
    when = formatdate(env.clock.now + 30, usegmt=True)
    env.web.page(t.url, status=429, headers=[("Retry-After", when)], reason="Too Many Requests")
    outbox = Outbox()
    env.fetcher.fetch_batch([t], outbox)
    [(retry, _)] = sent(outbox)
    assert retry.not_before == pytest.approx(env.clock.now + 30, abs=1)


def test_backoff_is_full_jitter_within_an_exponential_ceiling(env: Env) -> None:
    assert [backoff_ceiling(n) for n in (1, 2, 3)] == [
        settings.RETRY_BASE_SECONDS * 2,
        settings.RETRY_BASE_SECONDS * 4,
        settings.RETRY_BASE_SECONDS * 8,
    ]
    assert backoff_ceiling(30) == settings.RETRY_MAX_BACKOFF_SECONDS
    waits = {}
    for i, draw in enumerate((0.0, 0.25, 0.999)):
        env.fetcher.jitter = lambda draw=draw: draw  # type: ignore[misc]
        # A host each: a retry's slot must not delay the next host's first try.
        t = replace(env.admitted("e", host=f"h{i}.example"), attempt=2)
        env.urls.items[("c", t.fp)].update(state="retrying", attempt=1)
        env.web.page(t.url, status=500, body=b"", reason="Internal Server Error")
        outbox = Outbox()
        env.fetcher.fetch_batch([t], outbox)
        [(retry, _)] = sent(outbox)
        waits[draw] = retry.not_before - env.clock.now
    # A uniform draw scales the ceiling of attempt 2, from no wait at all to just under it.
    assert waits == pytest.approx({d: d * backoff_ceiling(2) for d in waits})


def test_a_page_that_always_fails_is_tried_exactly_max_attempts_times_then_failed(env: Env) -> None:
    t = env.admitted("broken")
    env.web.page(t.url, status=500, body=b"oops", reason="Internal Server Error")
    keys, outcomes, task = set(), [], t
    for _ in range(settings.RETRY_MAX_ATTEMPTS):
        outbox = Outbox()
        result = env.fetcher.fetch_batch([task], outbox)
        keys.add(result.warc_key)
        outcomes += [(f.outcome, f.reason) for f in result.fetched]
        if outbox.fetch:
            [(task, _)] = sent(outbox)
            env.clock.now = task.not_before
    assert len(env.web.calls) == settings.RETRY_MAX_ATTEMPTS == 3
    assert [o for o, _ in outcomes] == ["retry", "retry", "failed"]
    assert outcomes[-1][1] == "500 Internal Server Error after 3 attempts"
    assert failure_class(outcomes[-1][1]) == "http_error" in FAILURE_CLASSES
    assert outbox.fetch == []  # no fourth try
    item = env.urls.item("c", t.fp)
    assert (item["state"], item["status"], item["attempt"]) == ("failed", 500, 3)
    # Each try's exchange has a WARC of its own: a retry never overwrites the earlier try's.
    assert len(keys) == 3 and len(env.blobs.keys(settings.PAGES_PREFIX)) == 3
    assert env.hosts.read_slot("example.com").window == frozenset()


def test_a_page_that_recovers_is_fetched_on_its_third_try(env: Env) -> None:
    t = env.admitted("flaky")
    answers = iter([503, 503, 200])
    env.web.page(t.url)
    ok = env.web.pages[t.url]

    def flaky():  # type: ignore[no-untyped-def]
        result = ok()
        result.status = next(answers)
        return result

    env.web.pages[t.url] = flaky
    task, outcomes = t, []
    while True:
        outbox = Outbox()
        outcomes += [f.outcome for f in env.fetcher.fetch_batch([task], outbox).fetched]
        if not outbox.fetch:
            break
        [(task, _)] = sent(outbox)
        env.clock.now = task.not_before + 5
    assert outcomes == ["retry", "retry", "fetched"]
    item = env.urls.item("c", t.fp)
    assert (item["state"], item["status"], item["attempt"]) == ("fetched", 200, 3)
    [page] = read_warc(env.blobs.get(item["warc"]))
    assert page.status == 200 and page.metadata["attempt"] == 3


@pytest.mark.parametrize(("error", "klass"), [("connect timeout", "timeout"), ("connection failed", "connection")])
def test_network_failures_are_retried_and_fail_with_their_class(env: Env, error: str, klass: str) -> None:
    t = replace(env.admitted("down"), attempt=3)
    env.urls.items[("c", t.fp)].update(state="retrying", attempt=2)
    env.web.page(t.url, status=None, error=error)
    result = env.fetcher.fetch_batch([t], Outbox())
    [failed] = result.fetched
    assert (failed.outcome, failed.reason) == ("failed", f"{error} after 3 attempts")
    assert failure_class(failed.reason) == klass and result.warc_key is None

    first = env.admitted("first")
    env.web.page(first.url, status=None, error=error)
    outbox = Outbox()
    [tried] = env.fetcher.fetch_batch([first], outbox).fetched
    assert tried.outcome == "retry" and tried.status is None and len(outbox.fetch) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_client_errors_are_not_retried(env: Env, status: int) -> None:
    t = env.admitted(f"gone{status}")
    env.web.page(t.url, status=status)
    outbox = Outbox()
    [fetched] = env.fetcher.fetch_batch([t], outbox).fetched
    assert (fetched.outcome, fetched.status) == ("fetched", status) and outbox.fetch == []


def test_a_retry_after_beyond_the_cap_fails_at_once(env: Env) -> None:
    t = env.admitted("closed")
    env.web.page(t.url, status=503, headers=[("Retry-After", "86400")], reason="Service Unavailable")
    outbox = Outbox()
    [failed] = env.fetcher.fetch_batch([t], outbox).fetched
    assert failed.outcome == "failed" and outbox.fetch == []
    assert failed.reason == "503 Service Unavailable: Retry-After of 86400s is beyond the 900s cap"


def test_a_redelivered_earlier_try_never_fetches_again(env: Env) -> None:
    t = env.admitted("twice")
    env.web.page(t.url, status=502, reason="Bad Gateway")
    outbox = Outbox()
    env.fetcher.fetch_batch([t], outbox)
    [(retry, _)] = sent(outbox)

    # The first try's message comes again (its batch failed after the retry was written).
    again = Outbox()
    assert env.fetcher.fetch_batch([t], again).fetched == []
    assert len(env.web.calls) == 1
    # It sends the retry of its try once more, in case its sender died before sending:
    # the same attempt, no earlier than planned.
    [(copy, _)] = sent(again)
    assert (copy.attempt, copy.not_before) == (2, pytest.approx(retry.not_before))

    # Both copies of try 2 arrive: one request.
    env.web.page(t.url)
    env.clock.now = retry.not_before
    result = env.fetcher.fetch_batch([retry, copy], Outbox())
    assert [f.outcome for f in result.fetched] == ["fetched"] and len(env.web.calls) == 2
    # And a late copy of try 1 or try 2 now finds the page fetched.
    late = Outbox()
    assert env.fetcher.fetch_batch([t, retry], late).fetched == [] and late.fetch == []
    assert len(env.web.calls) == 2


def test_a_retry_lost_before_it_was_sent_is_sent_by_the_redelivered_try(env: Env) -> None:
    t = env.admitted("lost")
    env.web.page(t.url, status=500, reason="Internal Server Error")
    outbox = Outbox()
    env.fetcher.fetch_batch([t], outbox)
    planned = env.urls.item("c", t.fp)["retry_at"]
    # The send failed: the outbox is gone, the first try's message comes back later.
    env.clock.advance(600)
    again = Outbox()
    env.fetcher.fetch_batch([t], again)
    [(retry, _)] = sent(again)
    assert retry.attempt == 2 and retry.not_before == pytest.approx(env.clock.now)  # overdue: at once
    assert planned < env.clock.now
    env.web.page(t.url)
    assert [f.outcome for f in env.fetcher.fetch_batch([retry], Outbox()).fetched] == ["fetched"]


def test_a_retry_keeps_the_hosts_delay_and_parks_behind_a_full_window(slow: Env) -> None:
    a = slow.admitted("a", delay=2.0)
    b = slow.admitted("b", delay=2.0)
    slow.web.page(a.url, status=500, reason="Internal Server Error")
    outbox = Outbox()
    slow.fetcher.fetch_batch([a], outbox)
    # a left the window and took its place back at once: its slot comes after b's.
    [(retry, _)] = sent(outbox)
    assert retry.not_before >= b.not_before + 2.0
    assert slow.hosts.read_slot("example.com").window == {window_key(b), window_key(retry)}

    # Another URL of the host now parks; so would a retry finding the window full.
    c = slow.task("c", delay=2.0)
    assert slow.politeness.admit(c) == []
    assert len(slow.parking.items["example.com"]) == 1


def test_a_parked_retry_is_unparked_no_earlier_than_its_retry_time(slow: Env) -> None:
    a, b = slow.admitted("a", delay=2.0), slow.admitted("b", delay=2.0)
    later = replace(slow.task("r", delay=2.0), attempt=2, not_before=slow.clock.now + 40)
    assert slow.politeness.admit(later) == []  # window full: parked with its retry time
    slow.web.page(a.url)
    outbox = Outbox()
    slow.fetcher.fetch_batch([a], outbox)
    [(unparked, _)] = sent(outbox)
    assert unparked.url == later.url and unparked.attempt == 2
    assert unparked.not_before == pytest.approx(slow.clock.now + 40)
    assert b.not_before < unparked.not_before


def test_retry_lines_have_their_own_crawl_log_object(env: Env) -> None:
    t = env.admitted("log")
    env.web.page(t.url, status=503, reason="Service Unavailable")
    outbox = Outbox()
    first = env.fetcher.fetch_batch([t], outbox).fetched
    [(retry, _)] = sent(outbox)
    env.clock.now = retry.not_before
    env.web.page(t.url)
    second = env.fetcher.fetch_batch([retry], Outbox()).fetched
    a, b = crawl_log_objects(first, env.clock.now), crawl_log_objects(second, env.clock.now)
    assert set(a).isdisjoint(b)
    assert warc_key([t], env.clock.now) != warc_key([retry], env.clock.now)


def test_a_retry_of_a_complete_record_gives_the_url_back(env: Env) -> None:
    t = env.admitted("done")
    env.web.page(t.url, status=503, reason="Service Unavailable")
    outbox = Outbox()
    env.fetcher.fetch_batch([t], outbox)
    [(retry, _)] = sent(outbox)
    env.complete("r1")
    env.clock.now = retry.not_before
    [skipped] = env.fetcher.fetch_batch([retry], Outbox()).fetched
    assert skipped.outcome == "skipped" and len(env.web.calls) == 1
    assert env.urls.item("c", t.fp)["claimable"] is True


def test_attempt_is_left_out_of_a_first_tries_json() -> None:
    task = FetchTask("http://e.com/", "fp", "e.com", 0, "c", 0.0, 0.0)
    assert "attempt" not in task.to_json() and "adaptive_delay" not in task.to_json()
    again = replace(task, attempt=2, adaptive_delay=1.5)
    assert FetchTask.from_json(again.to_json()) == again
    assert again.effective_delay == 1.5 and again.attempt_key == "c#fp#2" and task.attempt_key == "c#fp"


@pytest.mark.parametrize("attempt", ["0", "-1", '"2"', "true", "1.5"])
def test_a_fetch_task_with_a_bad_attempt_is_invalid(attempt: str) -> None:
    body = FetchTask("http://e.com/", "fp", "e.com", 0, "c", 0.0, 0.0).to_json()[:-1] + f',"attempt":{attempt}}}'
    with pytest.raises(InvalidMessage, match="'attempt' must be a positive integer"):
        FetchTask.from_json(body)
