"""What a response means for its task, through host runs on the fakes: outcomes, WARCs, redirects, skips.

Each test drives ``HostRunner`` (``crawlstack.runs``) over a fake web; the
classification itself is ``crawlstack.fetch.outcomes``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hostruns import HOST, UA, Env

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.fetch import host_loop as host_module
from crawlstack.fetch import http
from crawlstack.fetch.host_runner import RunResult
from crawlstack.fetch.outcomes import (
    FAILURE_CLASSES,
    MAX_REDIRECT_HOPS,
    UNUSABLE_LOCATION,
    Fetched,
    failure_class,
    warc_key,
)
from crawlstack.fetch.warc import read_warc
from crawlstack.messages import FetchTask, FrontierMessage, RunMessage
from crawlstack.records.resolution import RECORD_COMPLETE


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch)


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch, delay=2.0)


def run_one(env: Env, task: FetchTask) -> tuple[RunResult, Fetched]:
    result = env.run(env.add([task]))
    assert result.errors == {}
    [fetched] = result.fetched
    return result, fetched


# --- one WARC per flush, outcomes after it ------------------------------------------


def test_a_run_becomes_one_warc_and_outcomes_are_written_after_it(env: Env) -> None:
    tasks = [env.task(f"p{i}") for i in range(4)]
    for i, t in enumerate(tasks):
        env.web.page(t.url, body=f"<h1>page {i}</h1>".encode())
    result = env.run(env.add(tasks))

    assert result.errors == {} and result.ends == {HOST: "done"}
    assert sorted(f.outcome for f in result.fetched) == ["fetched"] * 4
    [key] = result.warc_keys
    assert env.warcs() == [key]
    assert key == warc_key(tasks, env.clock.now)
    assert key.startswith(settings.PAGES_PREFIX + "dt=") and key.endswith(".warc.gz")
    data, ctype = env.blobs.objects[(env.blobs.bucket, key)]
    assert ctype == "application/warc"
    pages = {p.url: p for p in read_warc(data)}
    assert set(pages) == {t.url for t in tasks}
    for i, t in enumerate(tasks):
        assert pages[t.url].body == f"<h1>page {i}</h1>".encode()
        meta = pages[t.url].metadata
        assert (meta["crawl_id"], meta["fp"], meta["depth"], meta["record_id"]) == ("c", t.fp, 1, "r1")
        assert meta["truncated"] is False and meta["want"] == ["title"]
        # The crawl log holds a first try's page; the urls table keeps its claim alone.
        assert env.table_item(t.url.rsplit("/", 1)[1])["state"] == "queued"
        item = env.item(t.url.rsplit("/", 1)[1])
        assert (item["state"], item["status"], item["warc"]) == ("fetched", 200, key)
    assert env.crawls.logged == {"c": {"fetched": 4}}

    # The WARC, then the crawl log, and only then the bundle goes: no outcome write.
    writes = [e for e in env.journal if e[0] in ("put", "outcome", "delete")]
    assert writes[0] == ("put", key)
    assert writes[1][0] == "put" and writes[1][1].startswith(settings.CRAWL_LOG_PREFIX)
    assert [e[0] for e in writes[2:]] == ["delete"]
    assert env.left() == []


def test_the_warc_key_is_the_same_for_a_redelivered_batch(env: Env) -> None:
    a, b = env.task("a"), env.task("b")
    assert warc_key([a, b], env.clock.now) == warc_key([b, a], env.clock.now)
    assert "example" not in warc_key([a], env.clock.now)
    # Another crawl's copy of the same URLs is another file.
    assert warc_key([replace(a, crawl_id="other")], env.clock.now) != warc_key([a], env.clock.now)


def test_user_agent_comes_from_the_crawl(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch)
    env.crawls.put(CrawlConfig(crawl_id="c", delay=0.25, user_agent="other-bot/2"))
    env.run(env.admit(["a"]))
    assert [ua for _, ua, _ in env.web.calls] == ["other-bot/2"]


# --- redirects ------------------------------------------------------------------------


def test_a_redirect_goes_back_to_the_frontier_one_hop_more(env: Env) -> None:
    t = env.task("old", hops=1)
    env.web.page(t.url, status=301, body=b"", headers=[("Location", "/new?b=2&a=1")])
    result, fetched = run_one(env, t)
    assert (fetched.outcome, fetched.status) == ("fetched", 301)
    assert fetched.reason == "redirect to http://example.com/new?b=2&a=1"
    [(body, delay)] = result.frontier
    msg = FrontierMessage.from_json(body)
    assert delay == 0
    assert (msg.url, msg.hops, msg.depth, msg.referrer, msg.record_id, msg.want, msg.crawl_id) == (
        "http://example.com/new?b=2&a=1",
        2,
        1,
        t.url,
        "r1",
        ("title",),
        "c",
    )
    # The 3xx itself is archived, and recorded as fetched.
    [page] = read_warc(env.blobs.get(result.warc_keys[0]))
    assert page.status == 301
    assert env.state("old") == "fetched"


def test_with_send_frontier_redirects_go_out_at_the_flush_before_the_outcomes(env: Env) -> None:
    env.runner = env.make_runner(send_frontier=True)
    t = env.task("old")
    env.web.page(t.url, status=302, body=b"", headers=[("Location", "/new")])
    result, _ = run_one(env, t)
    assert result.frontier == []
    [[(body, delay)]] = env.sent
    assert delay == 0
    assert FrontierMessage.from_json(body).url == "http://example.com/new"
    order = [e[0] for e in env.journal if e[0] in ("put", "send_frontier", "delete")]
    assert order == ["put", "put", "send_frontier", "delete"]


def test_too_many_redirects_fail(env: Env) -> None:
    t = env.task("loop", hops=MAX_REDIRECT_HOPS)
    env.web.page(t.url, status=302, body=b"", headers=[("Location", "/loop")])
    result, fetched = run_one(env, t)
    assert (fetched.outcome, fetched.reason) == ("failed", f"more than {MAX_REDIRECT_HOPS} redirects")
    assert failure_class(fetched.reason) == "redirects"
    assert result.frontier == []
    assert env.outcome(t)["state"] == "failed"


def test_a_redirect_without_location_is_a_page(env: Env) -> None:
    t = env.task("r")
    env.web.page(t.url, status=302, body=b"<p>moved</p>")
    result, fetched = run_one(env, t)
    assert fetched.outcome == "fetched" and fetched.reason == "" and result.frontier == []


@pytest.mark.parametrize(
    "location, target",
    [
        ("http://[::1/x", "http://[::1/x"),
        # Within the cap as sent, past it once joined to the page's URL.
        (
            "/" + "a" * (settings.MAX_URL_LENGTH - 1),
            "http://example.com/" + "a" * (settings.MAX_URL_LENGTH + 1 - len("http://example.com/")),
        ),
    ],
)
def test_a_malformed_or_huge_location_goes_on_for_dispatch_to_refuse(env: Env, location: str, target: str) -> None:
    t = env.task("moved")
    env.web.page(t.url, status=302, body=b"", headers=[("Location", location)])
    result, fetched = run_one(env, t)
    assert fetched.outcome == "fetched" and fetched.reason == f"redirect to {target}"
    [(body, _)] = result.frontier
    assert FrontierMessage.from_json(body).url == target


@pytest.mark.parametrize("location", ["/" + "a" * 100_000, "/a\x00b", "/a\x7f", "/a\nb"])
def test_an_overlong_or_control_character_location_fails_the_url(env: Env, location: str) -> None:
    t = env.task("moved")
    env.web.page(t.url, status=302, body=b"", headers=[("Location", location)])
    result, fetched = run_one(env, t)
    assert (fetched.outcome, fetched.status, fetched.reason) == ("failed", 302, UNUSABLE_LOCATION)
    assert failure_class(fetched.reason) == "redirects"
    assert result.frontier == [] and result.ends == {HOST: "done"}
    assert [p.status for p in read_warc(env.blobs.get(result.warc_keys[0]))] == [302]


def test_a_blank_location_is_no_location(env: Env) -> None:
    t = env.task("r")
    env.web.page(t.url, status=302, body=b"<p>moved</p>", headers=[("Location", " \t ")])
    result, fetched = run_one(env, t)
    assert fetched.outcome == "fetched" and result.frontier == []


# --- content types and bodies -----------------------------------------------------


def test_non_text_content_is_skipped_and_not_archived(env: Env) -> None:
    img, page = env.task("logo.png"), env.task("page")
    env.web.page(img.url, body=b"", headers=[("Content-Type", "image/png")])
    result = env.run(env.add([img, page]))
    item = env.outcome(img)
    assert (item["state"], item["reason"], item["status"]) == ("skipped", "content-type image/png is not text", 200)
    assert "warc" not in item
    [key] = result.warc_keys
    assert [p.url for p in read_warc(env.blobs.get(key))] == [page.url]


def test_a_binary_body_claiming_html_is_skipped_and_a_corrupt_one_failed(env: Env) -> None:
    fake, broken = env.task("fake.html"), env.task("broken.html")
    env.web.page(fake.url, body=b"", binary=True)
    env.web.page(broken.url, body=b"", corrupt=True, error="corrupt compressed body: invalid block type")
    result = env.run(env.add([fake, broken]))
    assert result.warc_keys == [] and env.warcs() == []
    item = env.outcome(fake)
    assert (item["state"], item["reason"], item["status"]) == ("skipped", "binary body claiming to be text/html", 200)
    item = env.outcome(broken)
    assert (item["state"], item["reason"]) == ("failed", "corrupt compressed body: invalid block type")
    assert failure_class(item["reason"]) == "corrupt_body"


def test_a_run_with_nothing_to_store_writes_no_warc_but_its_crawl_log(env: Env) -> None:
    pdf, down = env.task("x.pdf"), env.task("down")
    env.web.page(pdf.url, headers=[("Content-Type", "application/pdf")])
    env.web.page(down.url, status=None, error="DNS lookup failed: no such host")
    result = env.run(env.add([pdf, down]))
    assert result.warc_keys == [] and env.warcs() == []
    assert len(env.crawl_logs()) == 1
    item = env.outcome(down)
    assert (item["state"], item["reason"]) == ("failed", "DNS lookup failed: no such host")
    assert "status" not in item and failure_class(item["reason"]) == "dns"
    assert len(env.web.calls) == 2  # a DNS failure is not retried


def test_xml_and_missing_content_types_are_kept(env: Env) -> None:
    feed, bare = env.task("feed"), env.task("bare")
    env.web.page(feed.url, headers=[("Content-Type", "application/atom+xml")])
    env.web.page(bare.url, headers=[])
    result = env.run(env.add([feed, bare]))
    assert [f.outcome for f in result.fetched] == ["fetched", "fetched"]
    assert {p.url for p in read_warc(env.blobs.get(result.warc_keys[0]))} == {feed.url, bare.url}


def test_a_truncated_body_is_kept_and_says_so(env: Env) -> None:
    t = env.task("big")
    env.web.page(t.url, truncated=True)
    env.run(env.add([t]))
    item = env.outcome(t)
    assert item["state"] == "fetched" and item["truncated"] is True
    assert item["reason"] == f"body truncated at {settings.MAX_BODY_BYTES} bytes"
    [page] = read_warc(env.blobs.get(item["warc"]))
    assert page.metadata["truncated"] is True


def test_a_deadline_part_way_keeps_what_arrived_with_its_reason(env: Env) -> None:
    t = env.task("slow")
    env.web.page(t.url, truncated=True, error="deadline of 60s exceeded")
    _, fetched = run_one(env, t)
    assert (fetched.outcome, fetched.reason, fetched.truncated) == ("fetched", "deadline of 60s exceeded", True)


# --- a response nothing expected ------------------------------------------------------


def test_a_response_that_raises_fails_its_own_task_only(env: Env) -> None:
    good, bad = env.task("good"), env.task("bad")

    def boom() -> http.FetchResult:
        raise RuntimeError("boom: a message that may quote the page")

    env.web.pages[bad.url] = boom
    result = env.run(env.add([bad, good]))
    assert result.errors == {} and result.ends == {HOST: "done"}
    outcomes = {f.task.url: (f.outcome, f.reason) for f in result.fetched}
    assert outcomes[good.url] == ("fetched", "")
    assert outcomes[bad.url][0] == "failed"
    assert outcomes[bad.url][1].startswith("response could not be read: RuntimeError at ")
    assert "boom" not in outcomes[bad.url][1]
    assert (env.outcome(good)["state"], env.outcome(bad)["state"]) == ("fetched", "failed")


def test_a_response_that_cannot_be_classified_fails_its_own_task_only(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, bad = env.task("good"), env.task("bad")
    real = host_module.classify

    def classify(task: FetchTask, result: http.FetchResult, *args: Any) -> Fetched:
        if task.url == bad.url:
            raise ValueError("unexpected")
        return real(task, result, *args)

    monkeypatch.setattr(host_module, "classify", classify)
    result = env.run(env.add([bad, good]))
    assert result.errors == {}
    reasons = {f.task.url: f.reason for f in result.fetched}
    assert reasons[bad.url].startswith("response could not be processed: ValueError at ")
    assert env.outcome(bad)["state"] == "failed" and env.outcome(good)["state"] == "fetched"


def test_a_store_error_fails_the_host_not_the_page_and_loses_nothing(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing AWS call is no page's fault: the host's run fails, its message is redelivered."""
    good, bad = env.task("good"), env.task("bad")
    msg = env.add([good, bad])
    real = env.crawls.get
    calls = iter(range(1000))

    def get(crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        if next(calls) == 1:  # the second task's config read
            raise RuntimeError("throttled")
        return real(crawl_id, max_age)

    monkeypatch.setattr(env.crawls, "get", get)
    result = env.run(msg)
    assert result.ends == {HOST: "failed"} and str(result.errors[HOST]) == "throttled"
    assert result.fetched == [] and env.warcs() == []  # nothing flushed
    assert env.state("good") == env.state("bad") == "queued"  # no URL marked failed, no write per request
    assert [len(b.tasks) for b in env.backlog.peek(HOST, 10)] == [2]
    monkeypatch.setattr(env.crawls, "get", real)
    env.clock.advance(0.01)
    again = env.run(msg)  # the message, redelivered: the lease was given back under its run id
    assert again.ends == {HOST: "done"}
    assert env.web.urls() == [good.url, good.url, bad.url]
    assert env.state("good") == env.state("bad") == "fetched"


# --- copies and done URLs -------------------------------------------------------------


def test_two_copies_of_a_task_fetch_once(env: Env) -> None:
    t = env.task("twice")
    result = env.run(env.add([t, t]))
    assert len(result.fetched) == 1 and len(env.web.calls) == 1
    assert env.left() == []


def test_a_retry_already_done_is_not_fetched_again(env: Env) -> None:
    t = replace(env.task("done"), attempt=2)
    env.urls.set_outcome("c", t.fp, "fetched", status=200, attempt=2)
    result = env.run(env.add([t]))
    assert result.fetched == [] and result.warc_keys == [] and env.web.calls == []
    assert result.ends == {HOST: "done"} and env.left() == []


def test_a_first_try_reads_no_state(env: Env) -> None:
    # A first try's outcome is the crawl log's: the urls table would say only "queued".
    result = env.run(env.add([env.task("a"), env.task("b")]))
    assert [f.outcome for f in result.fetched] == ["fetched"] * 2
    assert env.urls.reads == 0


# --- a task's own time -----------------------------------------------------------------


def test_a_short_wait_for_a_tasks_not_before_is_slept(slow: Env) -> None:
    t = replace(slow.task("a"), not_before=slow.clock.now + 0.3)
    result = slow.run(slow.add([t]))
    assert result.ends == {HOST: "done"}
    assert slow.clock.sleeps == [pytest.approx(0.3)]
    assert slow.starts() == [pytest.approx(t.not_before, abs=1e-6)]


def test_a_long_wait_for_a_tasks_not_before_reschedules_the_host(slow: Env) -> None:
    t = replace(slow.task("a"), not_before=slow.clock.now + 3.5)
    msg = slow.add([t])
    result = slow.run(msg)
    assert result.fetched == [] and slow.web.calls == [] and slow.clock.sleeps == []
    assert result.ends == {HOST: "rescheduled"}
    [(body, delay)] = result.runs
    assert delay == 4 and slow.state("a") == "queued" and slow.left() == [t]
    slow.clock.advance(delay)
    again = slow.run(RunMessage.from_json(body))
    assert [f.outcome for f in again.fetched] == ["fetched"] and again.ends == {HOST: "done"}
    assert slow.starts()[0] >= t.not_before


def test_a_failure_before_the_request_gives_the_host_back(slow: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    msg = slow.admit(["a"])
    assert msg is not None

    def broken(origin: str) -> Any:
        raise RuntimeError("DynamoDB unavailable")

    real = slow.hosts.get_robots
    monkeypatch.setattr(slow.hosts, "get_robots", broken)
    result = slow.run(msg)
    assert result.ends == {HOST: "failed"} and isinstance(result.errors[HOST], RuntimeError)
    run = slow.runs.get(HOST)
    # Given back under the same run id, no request recorded: the redelivery need not wait a delay.
    assert (run.holder, run.run_id, run.last_start) == (None, msg.run_id, 0.0)
    assert slow.web.calls == [] and len(slow.left()) == 1
    monkeypatch.setattr(slow.hosts, "get_robots", real)
    t0 = slow.clock.now
    assert slow.run(msg).ends == {HOST: "done"}
    assert slow.starts() == [t0]


# --- tasks of records already complete ----------------------------------------------


def test_a_task_of_a_complete_record_is_skipped_with_no_request_and_one_read(env: Env) -> None:
    env.complete("r1")
    done = [env.task("a"), env.task("b")]
    other = env.task("c", record_id="r2")
    result = env.run(env.add([*done, other]))

    assert env.reads() == [("get_many", "c", ("r1", "r2"))]
    assert env.web.urls() == [other.url]
    skips = sorted((f.task.url, f.outcome, f.reason) for f in result.fetched if f.task in done)
    assert skips == [(t.url, "skipped", RECORD_COMPLETE) for t in done]
    for t in done:
        item = env.outcome(t)
        assert (item["state"], item["reason"], item["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    assert env.outcome(other)["state"] == "fetched"
    # Only the fetched page is archived; the skipped ones' outcomes are written once, by the skip,
    # and the fetched page's is the crawl log's.
    [key] = result.warc_keys
    assert [p.url for p in read_warc(env.blobs.get(key))] == [other.url]
    assert sorted(e[2] for e in env.journal if e[0] == "outcome") == sorted(t.fp for t in done)


def test_tasks_without_record_id_or_want_cost_no_read(env: Env) -> None:
    env.complete("r1")
    plain, nowant = env.task("a", record_id=None), env.task("b", want=())
    result = env.run(env.add([plain, nowant]))
    assert env.reads() == []
    assert [f.outcome for f in result.fetched] == ["fetched", "fetched"]


def test_a_record_remembered_complete_costs_no_read(env: Env) -> None:
    env.completed.add("c", "r1")  # seen complete by this container's dispatcher, say
    [skipped] = env.run(env.admit(["a"])).fetched
    assert (skipped.outcome, skipped.reason) == ("skipped", RECORD_COMPLETE)
    assert env.reads() == [] and env.web.calls == []
    # And one read complete is remembered for the next invocation.
    env.complete("r2")
    env.run(env.add([env.task("b", record_id="r2")]))
    env.run(env.add([env.task("c", record_id="r2")]))
    assert env.reads() == [("get_many", "c", ("r2",))] and env.web.calls == []
    assert env.state("b") == env.state("c") == "skipped"


def test_the_skip_neither_waits_for_the_host_nor_moves_its_spacing(slow: Env) -> None:
    slow.run(slow.admit(["first"]))  # a request now: the host's next may start only 2 s later
    last_start = slow.runs.get(HOST).last_start
    slow.complete("r1")
    far = replace(slow.task("a"), not_before=slow.clock.now + 30)
    result = slow.run(slow.add([far]))
    [skipped] = result.fetched
    assert skipped.reason == RECORD_COMPLETE and result.ends == {HOST: "done"} and result.runs == []
    assert slow.clock.sleeps == [] and len(slow.web.calls) == 1
    assert slow.runs.get(HOST).last_start == last_start


def test_skips_spend_none_of_the_hosts_time(slow: Env) -> None:
    slow.complete("r1")
    done = [slow.task(f"p{i}") for i in range(5)]
    keep = slow.task("keep", depth=2, record_id="r2")
    t0 = slow.clock.now
    result = slow.run(slow.add([*done, keep]))
    assert result.ends == {HOST: "done"}
    assert slow.web.calls == [(keep.url, UA, t0)]
    assert {slow.urls.state("c", t.fp) for t in done} == {"skipped"}
    assert slow.left() == []


def test_a_skipped_url_may_still_be_claimed_and_fetched_for_another_record(env: Env) -> None:
    env.complete("r1")
    t = env.task("shared")
    env.run(env.add([t]))
    assert env.state("shared") == "skipped"
    # A seed without record_id reaches the page later: its claim takes the URL over.
    env.clock.advance(1)
    assert env.urls.claim("c", t.fp, t.url, 2, claimer="m-other")
    other = replace(t, record_id=None, want=(), depth=2)
    # A redelivered copy of the complete record's task neither fetches it nor takes it back...
    assert env.run(env.add([t])).fetched == []
    item = env.outcome(t)
    assert (item["state"], item["claimed_by"]) == ("queued", "m-other") and "claimable" not in item
    # ...and the other record's task fetches it, once.
    [fetched] = env.run(env.add([other, t])).fetched
    assert (fetched.task.record_id, fetched.outcome) == (None, "fetched")
    assert env.outcome(t)["state"] == "fetched" and len(env.web.calls) == 1
    assert not env.urls.claim("c", t.fp, t.url, 3, claimer="m-third")


def test_a_page_an_earlier_holder_left_fetching_is_skipped_once_its_record_is_complete(env: Env) -> None:
    t = env.task("a")
    env.urls.items[("c", t.fp)]["state"] = "fetching"  # marked by the design that wrote each start
    env.complete("r1")
    env.clock.advance(1)
    # The lease makes its holder the host's one requester: whatever was fetching before it is over.
    [skipped] = env.run(env.add([t])).fetched
    assert skipped.reason == RECORD_COMPLETE and env.outcome(t)["state"] == "skipped"
    assert env.web.calls == []


def test_a_page_an_earlier_holder_left_fetching_is_fetched_again_if_its_record_is_not_complete(env: Env) -> None:
    t = env.task("a")
    env.urls.items[("c", t.fp)]["state"] = "fetching"
    env.clock.advance(1)
    [fetched] = env.run(env.add([t])).fetched
    assert fetched.outcome == "fetched" and env.web.urls() == [t.url]


def test_two_copies_of_a_complete_records_task_skip_once(env: Env) -> None:
    env.complete("r1")
    t = env.task("a")
    result = env.run(env.add([t, t]))
    assert len(result.fetched) == 1 and env.web.calls == []
    assert [e for e in env.journal if e[0] == "outcome"] == [("outcome", "c", t.fp, "skipped")]


def test_a_failed_completion_read_fetches_as_before(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.complete("r1")

    def unavailable(crawl_id: str, record_ids: object) -> dict[str, object]:
        raise RuntimeError("AccessDenied")

    monkeypatch.setattr(env.resolved, "get_many", unavailable)
    result = env.run(env.admit(["a"]))
    assert [f.outcome for f in result.fetched] == ["fetched"] and result.errors == {}
    assert result.ends == {HOST: "done"}


# --- failure classes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "klass"),
    [
        ("read timeout", "timeout"),
        ("deadline of 60s exceeded", "timeout"),
        ("header timeout: headers not finished in 60s", "timeout"),  # so retried, as other timeouts
        ("address 10.0.0.1 is not public (use --allow-private to allow it)", "address_refused"),
        ("DNS lookup failed: [Errno -2] Name or service not known", "dns"),
        ("connection failed", "connection"),
        ("more than 5 redirects", "redirects"),
        (UNUSABLE_LOCATION, "redirects"),
        ("corrupt compressed body", "corrupt_body"),
        ("503 Service Unavailable after 3 attempts", "http_error"),
        ("no response", "other"),
    ],
)
def test_failure_classes_for_the_metric(reason: str, klass: str) -> None:
    assert failure_class(reason) == klass
    assert klass in FAILURE_CLASSES
