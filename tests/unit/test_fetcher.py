"""Fetch on the in-memory stores with a fake HTTP layer: one WARC per batch, outcomes after it."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from fakes import FakeBlobs, FakeClock, FakeCrawls, FakeHosts, FakeParking, FakeResolved, FakeUrls

from crawlstack import http, settings
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import Outbox
from crawlstack.fetcher import (
    CLAIM_LEAD_SECONDS,
    FAILURE_CLASSES,
    MAX_REDIRECT_HOPS,
    UNUSABLE_LOCATION,
    Fetcher,
    failure_class,
    warc_key,
)
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import (
    CLAIM_LEASE_SECONDS,
    IN_FLIGHT_POLL_SECONDS,
    SUB_SECOND,
    Politeness,
    window_key,
    window_size,
)
from crawlstack.resolution import RECORD_COMPLETE, CompletedRecords
from crawlstack.urls import fingerprint
from crawlstack.warc import read_warc

UA = "crawlstack/test"
HTML = [("Content-Type", "text/html; charset=utf-8")]


class Web:
    """Stands in for crawlstack.http.fetch: canned results per URL, and a log of calls."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.pages: dict[str, Callable[[], http.FetchResult]] = {}
        self.calls: list[tuple[str, str, float]] = []
        self._lock = threading.Lock()

    def page(
        self, url: str, status: int | None = 200, body: bytes = b"<p>hi</p>", headers: list | None = None, **kw: object
    ) -> None:
        reason = str(kw.pop("reason", "OK" if status == 200 else "Other"))

        def result() -> http.FetchResult:
            return http.FetchResult(
                url=url,
                status=status,
                reason=reason,
                headers=list(HTML if headers is None else headers),
                request_headers=[("User-Agent", UA)],
                body=body,
                ip_address="203.0.113.5",
                started_at=self.clock.now,
                finished_at=self.clock.now,
                **kw,  # type: ignore[arg-type]
            )

        self.pages[url] = result

    def fetch(self, url: str, user_agent: str, guard: http.AddressGuard, **kw: object) -> http.FetchResult:
        with self._lock:
            self.calls.append((url, user_agent, self.clock.now))
        return self.pages[url]()


class Env:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> None:
        self.clock = FakeClock()
        self.journal: list[tuple[str, ...]] = []
        self.urls = FakeUrls(self.journal)
        self.blobs = FakeBlobs(journal=self.journal)
        self.crawls = FakeCrawls(CrawlConfig(crawl_id="c", delay=delay, user_agent=UA))
        self.hosts = FakeHosts(self.clock)
        self.parking = FakeParking()
        self.politeness = Politeness(self.hosts, self.parking, self.clock)
        # Every task carries record r1 (want title), incomplete unless a test completes it.
        self.resolved = FakeResolved()
        self.completed = CompletedRecords()
        self.fetcher = Fetcher(
            self.urls,
            self.crawls,
            self.politeness,
            self.blobs,
            clock=self.clock,
            sleep=self.clock.sleep,
            resolved=self.resolved,
            completed=self.completed,
        )
        self.web = Web(self.clock)
        monkeypatch.setattr(http, "fetch", self.web.fetch)

    def task(
        self,
        path: str,
        delay: float = 0.0,
        depth: int = 1,
        hops: int = 0,
        host: str = "example.com",
        record_id: str | None = "r1",
        want: tuple[str, ...] = ("title",),
    ) -> FetchTask:
        url = f"http://{host}/{path}"
        self.urls.claim("c", fingerprint(url), url, depth, claimer=f"m-{path}", record_id=record_id)
        return FetchTask(
            url=url,
            fp=fingerprint(url),
            host=host,
            depth=depth,
            crawl_id="c",
            not_before=self.clock.now,
            delay=delay,
            window=window_size(delay, 8),
            hops=hops,
            referrer="http://example.com/",
            record_id=record_id,
            want=want,
        )

    def admitted(self, path: str, delay: float = 0.0, **kw: object) -> FetchTask:
        [(_, task)] = self.politeness.admit(self.task(path, delay, **kw))  # type: ignore[arg-type]
        return task

    def complete(self, record_id: str = "r1") -> None:
        self.resolved.merge("c", record_id, ("title",), {"title": "done"}, "http://example.com/done")
        self.resolved.calls.clear()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch)


def test_a_batch_becomes_one_warc_and_outcomes_are_written_after_it(env: Env) -> None:
    tasks = [env.admitted(f"p{i}") for i in range(4)]
    for i, t in enumerate(tasks):
        env.web.page(t.url, body=f"<h1>page {i}</h1>".encode())
    result = env.fetcher.fetch_batch(tasks, Outbox())

    assert result.errors == {}
    assert sorted(f.outcome for f in result.fetched) == ["fetched"] * 4
    assert env.blobs.keys() == [result.warc_key]
    assert result.warc_key == warc_key(tasks, env.clock.now)
    assert result.warc_key.startswith(settings.PAGES_PREFIX + "dt=") and result.warc_key.endswith(".warc.gz")
    data, ctype = env.blobs.objects[(env.blobs.bucket, result.warc_key)]
    assert ctype == "application/warc"
    pages = {p.url: p for p in read_warc(data)}
    assert set(pages) == {t.url for t in tasks}
    for i, t in enumerate(tasks):
        assert pages[t.url].body == f"<h1>page {i}</h1>".encode()
        meta = pages[t.url].metadata
        assert (meta["crawl_id"], meta["fp"], meta["depth"], meta["record_id"]) == ("c", t.fp, 1, "r1")
        assert meta["truncated"] is False and meta["want"] == ["title"]
        item = env.urls.item("c", t.fp)
        assert (item["state"], item["status"], item["warc"]) == ("fetched", 200, result.warc_key)

    writes = [e for e in env.journal if e[0] in ("put", "outcome")]
    assert writes[0] == ("put", result.warc_key)
    assert [e[0] for e in writes[1:]] == ["outcome"] * 4
    # Every task left the host's window.
    assert env.hosts.read_slot("example.com").window == frozenset()


def test_the_warc_key_is_the_same_for_a_redelivered_batch(env: Env) -> None:
    a, b = env.task("a"), env.task("b")
    assert warc_key([a, b], env.clock.now) == warc_key([b, a], env.clock.now)
    assert "example" not in warc_key([a], env.clock.now)


def test_user_agent_comes_from_the_crawl(env: Env) -> None:
    t = env.admitted("a")
    env.web.page(t.url)
    env.fetcher.fetch_batch([t], Outbox())
    assert env.web.calls[0][1] == UA


def test_redirect_goes_back_to_the_frontier_one_hop_more(env: Env) -> None:
    t = env.admitted("old", hops=1)
    env.web.page(t.url, status=301, body=b"", headers=[("Location", "/new?b=2&a=1")])
    outbox = Outbox()
    result = env.fetcher.fetch_batch([t], outbox)
    [fetched] = result.fetched
    assert (fetched.outcome, fetched.status) == ("fetched", 301)
    assert fetched.reason == "redirect to http://example.com/new?b=2&a=1"
    [(body, delay)] = outbox.frontier
    msg = FrontierMessage.from_json(body)
    assert delay == 0
    assert (msg.url, msg.hops, msg.depth, msg.referrer, msg.record_id, msg.want) == (
        "http://example.com/new?b=2&a=1",
        2,
        1,
        t.url,
        "r1",
        ("title",),
    )
    # The 3xx itself is archived.
    [page] = read_warc(env.blobs.get(result.warc_key))
    assert page.status == 301


def test_too_many_redirects_fail(env: Env) -> None:
    t = env.admitted("loop", hops=MAX_REDIRECT_HOPS)
    env.web.page(t.url, status=302, body=b"", headers=[("Location", "/loop")])
    outbox = Outbox()
    [fetched] = env.fetcher.fetch_batch([t], outbox).fetched
    assert (fetched.outcome, fetched.reason) == ("failed", f"more than {MAX_REDIRECT_HOPS} redirects")
    assert outbox.frontier == []
    assert env.urls.state("c", t.fp) == "failed"


def test_redirect_without_location_is_a_page(env: Env) -> None:
    t = env.admitted("r")
    env.web.page(t.url, status=302, body=b"<p>moved</p>")
    outbox = Outbox()
    [fetched] = env.fetcher.fetch_batch([t], outbox).fetched
    assert fetched.outcome == "fetched" and outbox.frontier == []


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
    t = env.admitted("moved")
    env.web.page(t.url, status=302, body=b"", headers=[("Location", location)])
    outbox = Outbox()
    [fetched] = env.fetcher.fetch_batch([t], outbox).fetched
    assert fetched.outcome == "fetched" and fetched.reason == f"redirect to {target}"
    [(body, _)] = outbox.frontier
    assert FrontierMessage.from_json(body).url == target


@pytest.mark.parametrize("location", ["/" + "a" * 100_000, "/a\x00b", "/a\x7f", "/a\nb"])
def test_an_overlong_or_control_character_location_fails_the_url(env: Env, location: str) -> None:
    t = env.admitted("moved")
    env.web.page(t.url, status=302, body=b"", headers=[("Location", location)])
    outbox = Outbox()
    result = env.fetcher.fetch_batch([t], outbox)
    [fetched] = result.fetched
    assert (fetched.outcome, fetched.status, fetched.reason) == ("failed", 302, UNUSABLE_LOCATION)
    assert failure_class(fetched.reason) == "redirects"
    assert outbox.frontier == [] and result.errors == {}
    assert [p.status for p in read_warc(env.blobs.get(result.warc_key))] == [302]


def test_a_blank_location_is_no_location(env: Env) -> None:
    t = env.admitted("r")
    env.web.page(t.url, status=302, body=b"<p>moved</p>", headers=[("Location", " \t ")])
    outbox = Outbox()
    [fetched] = env.fetcher.fetch_batch([t], outbox).fetched
    assert fetched.outcome == "fetched" and outbox.frontier == []


def test_non_text_content_is_skipped_and_not_archived(env: Env) -> None:
    img, page = env.admitted("logo.png"), env.admitted("page")
    env.web.page(img.url, body=b"", headers=[("Content-Type", "image/png")])
    env.web.page(page.url)
    result = env.fetcher.fetch_batch([img, page], Outbox())
    item = env.urls.item("c", img.fp)
    assert (item["state"], item["reason"], item["status"]) == ("skipped", "content-type image/png is not text", 200)
    assert "warc" not in item
    assert [p.url for p in read_warc(env.blobs.get(result.warc_key))] == [page.url]


def test_a_binary_body_claiming_html_is_skipped_and_a_corrupt_one_failed(env: Env) -> None:
    fake, broken = env.admitted("fake.html"), env.admitted("broken.html")
    env.web.page(fake.url, body=b"", binary=True)
    env.web.page(broken.url, body=b"", corrupt=True, error="corrupt compressed body: invalid block type")
    result = env.fetcher.fetch_batch([fake, broken], Outbox())
    assert result.warc_key is None
    item = env.urls.item("c", fake.fp)
    assert (item["state"], item["reason"], item["status"]) == ("skipped", "binary body claiming to be text/html", 200)
    item = env.urls.item("c", broken.fp)
    assert (item["state"], item["reason"]) == ("failed", "corrupt compressed body: invalid block type")
    assert failure_class(item["reason"]) == "corrupt_body"


def test_a_batch_with_nothing_to_store_writes_no_warc(env: Env) -> None:
    img, down = env.admitted("x.pdf"), env.admitted("down")
    env.web.page(img.url, headers=[("Content-Type", "application/pdf")])
    env.web.page(down.url, status=None, error="DNS lookup failed: no such host")
    result = env.fetcher.fetch_batch([img, down], Outbox())
    assert result.warc_key is None and env.blobs.objects == {}
    item = env.urls.item("c", down.fp)
    assert (item["state"], item["reason"]) == ("failed", "DNS lookup failed: no such host")
    assert "status" not in item


def test_xml_and_missing_content_types_are_kept(env: Env) -> None:
    feed, bare = env.admitted("feed"), env.admitted("bare")
    env.web.page(feed.url, headers=[("Content-Type", "application/atom+xml")])
    env.web.page(bare.url, headers=[])
    result = env.fetcher.fetch_batch([feed, bare], Outbox())
    assert {f.outcome for f in result.fetched} == {"fetched"}


def test_truncated_body_is_kept_and_says_so(env: Env) -> None:
    t = env.admitted("big")
    env.web.page(t.url, truncated=True)
    env.fetcher.fetch_batch([t], Outbox())
    item = env.urls.item("c", t.fp)
    assert item["truncated"] is True
    assert item["reason"] == f"body truncated at {settings.MAX_BODY_BYTES} bytes"


def test_a_response_that_raises_fails_its_own_task_only(env: Env) -> None:
    good, bad = env.admitted("good"), env.admitted("bad")
    env.web.page(good.url)

    def boom() -> http.FetchResult:
        raise RuntimeError("boom: a message that may quote the page")

    env.web.pages[bad.url] = boom
    result = env.fetcher.fetch_batch([good, bad], Outbox())
    assert result.errors == {}
    outcomes = {f.task.url: (f.outcome, f.reason) for f in result.fetched}
    assert outcomes[good.url] == ("fetched", "")
    assert outcomes[bad.url][0] == "failed"
    assert outcomes[bad.url][1].startswith("response could not be read: RuntimeError at ")
    assert "boom" not in outcomes[bad.url][1]
    assert (env.urls.state("c", good.fp), env.urls.state("c", bad.fp)) == ("fetched", "failed")


def test_a_response_that_cannot_be_classified_fails_its_own_task_only(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, bad = env.admitted("good"), env.admitted("bad")
    env.web.page(good.url)
    env.web.page(bad.url)
    real = Fetcher._classify

    def classify(self: Fetcher, task: FetchTask, result: http.FetchResult, outbox: Outbox) -> Any:
        if task.url == bad.url:
            raise ValueError("unexpected")
        return real(self, task, result, outbox)

    monkeypatch.setattr(Fetcher, "_classify", classify)
    result = env.fetcher.fetch_batch([good, bad], Outbox())
    assert result.errors == {}
    reasons = {f.task.url: f.reason for f in result.fetched}
    assert reasons[bad.url].startswith("response could not be processed: ValueError at ")
    assert env.urls.state("c", bad.fp) == "failed" and env.urls.state("c", good.fp) == "fetched"


def test_a_store_error_in_one_task_is_retried_without_losing_the_batch(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing AWS call is no page's fault: that task's message fails, for SQS to deliver again."""
    good, bad = env.admitted("good"), env.admitted("bad")
    env.web.page(good.url)
    env.web.page(bad.url)
    real = env.crawls.get

    def get(crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        if getattr(fetching_bad, "active", False):
            raise RuntimeError("throttled")
        return real(crawl_id, max_age)

    fetching_bad = threading.local()  # the crawl config read of the bad task's fetch fails
    real_fetch_one = Fetcher._fetch_one

    def fetch_one(self: Fetcher, task: FetchTask, outbox: Outbox) -> Any:
        fetching_bad.active = task.url == bad.url
        try:
            return real_fetch_one(self, task, outbox)
        finally:
            fetching_bad.active = False

    monkeypatch.setattr(Fetcher, "_fetch_one", fetch_one)
    monkeypatch.setattr(env.crawls, "get", get)
    result = env.fetcher.fetch_batch([good, bad], Outbox())
    assert list(result.errors) == [1] and str(result.errors[1]) == "throttled"
    assert [f.task.url for f in result.fetched] == [good.url]
    assert env.urls.state("c", good.fp) == "fetched"
    # Left marked as being fetched; the retry may take it over once the mark is stale.
    assert env.urls.state("c", bad.fp) == "fetching"
    env.clock.advance(CLAIM_LEASE_SECONDS + 1)
    monkeypatch.setattr(env.crawls, "get", real)
    assert [f.task.url for f in env.fetcher.fetch_batch([bad], Outbox()).fetched] == [bad.url]


def test_two_copies_of_a_task_fetch_once(env: Env) -> None:
    t = env.admitted("twice")
    env.web.page(t.url)
    result = env.fetcher.fetch_batch([t, t], Outbox())
    assert len(result.fetched) == 1 and len(env.web.calls) == 1


def test_a_task_already_done_is_not_fetched_again(env: Env) -> None:
    t = env.admitted("done")
    env.urls.set_outcome("c", t.fp, "fetched", status=200)
    result = env.fetcher.fetch_batch([t], Outbox())
    assert result.fetched == [] and result.warc_key is None and env.web.calls == []
    assert env.hosts.read_slot("example.com").window == frozenset()


# --- waiting for the host -------------------------------------------------------
@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(monkeypatch, delay=2.0)


def test_sub_second_slot_wait_is_slept(slow: Env) -> None:
    t = slow.admitted("a", delay=2.0)
    slow.web.page(t.url)
    late = replace(t, not_before=slow.clock.now + 0.4)
    slow.fetcher.fetch_batch([late], Outbox())
    assert sum(slow.clock.sleeps) == pytest.approx(0.4)
    assert slow.web.calls[0][2] == pytest.approx(late.not_before)


def test_a_long_slot_wait_goes_back_to_the_queue(slow: Env) -> None:
    t = slow.admitted("a", delay=2.0)
    far = replace(t, not_before=slow.clock.now + 3.5)
    outbox = Outbox()
    result = slow.fetcher.fetch_batch([far], outbox)
    assert result.fetched == [] and slow.web.calls == [] and slow.clock.sleeps == []
    [(body, delay)] = outbox.fetch
    again = FetchTask.from_json(body)
    assert again.url == t.url and again.not_before == pytest.approx(slow.clock.now + 3.5) and delay == 3
    assert slow.urls.state("c", t.fp) == "queued"


def test_claim_waits_for_the_host_to_be_free(slow: Env) -> None:
    first = slow.admitted("a", delay=2.0)
    second = slow.admitted("b", delay=2.0)
    for t in (first, second):
        slow.web.page(t.url)
    slow.fetcher.fetch_batch([first], Outbox())
    assert slow.hosts.read_slot("example.com").free_at == slow.clock.now + 2.0
    # The second slot is 2 s after the first; it arrives 1.7 s in and sleeps the rest.
    slow.clock.advance(1.7)
    slow.fetcher.fetch_batch([second], Outbox())
    assert sum(slow.clock.sleeps) == pytest.approx(0.3)
    a_at, b_at = slow.web.calls[0][2], slow.web.calls[1][2]
    assert b_at - a_at == pytest.approx(2.0)


def test_the_host_is_claimed_and_the_try_started_a_moment_before_the_slot(slow: Env) -> None:
    t = slow.admitted("a", delay=2.0)
    slow.web.page(t.url)
    late = replace(t, not_before=slow.clock.now + 0.4)
    slow.fetcher.fetch_batch([late], Outbox())
    # Both writes fall CLAIM_LEAD_SECONDS before the slot, the request on it.
    assert slow.clock.sleeps == [pytest.approx(0.4 - CLAIM_LEAD_SECONDS), pytest.approx(CLAIM_LEAD_SECONDS)]
    assert slow.hosts.read_slot("example.com").free_at == pytest.approx(late.not_before + 2.0)
    assert slow.web.calls[0][2] == pytest.approx(late.not_before)


def test_claim_blocked_by_an_earlier_late_request_sleeps_until_free(slow: Env) -> None:
    t = slow.admitted("a", delay=2.0)
    slow.web.page(t.url)
    # Another fetcher's request ended just now: the host is free in 0.6 s although the slot is due.
    slow.hosts.slots["example.com"]["free_at"] = slow.clock.now + 0.6
    slow.hosts.slots["example.com"]["busy"] = 0
    slow.fetcher.fetch_batch([t], Outbox())
    assert sum(slow.clock.sleeps) == pytest.approx(0.6)
    assert slow.web.calls[0][2] == pytest.approx(slow.hosts.read_slot("example.com").free_at - 2.0)


def test_host_in_flight_longer_than_a_second_sends_the_task_back(slow: Env) -> None:
    t = slow.admitted("a", delay=2.0)
    slow.web.page(t.url)
    slow.hosts.claim("example.com", slow.clock.now, slow.clock.now + 999)  # in flight elsewhere
    outbox = Outbox()
    result = slow.fetcher.fetch_batch([t], outbox)
    assert result.fetched == [] and slow.web.calls == []
    [(body, delay)] = outbox.fetch
    assert FetchTask.from_json(body).not_before >= slow.clock.now + SUB_SECOND and delay >= 1
    assert sum(slow.clock.sleeps) <= SUB_SECOND


def test_release_unparks_the_next_url_of_the_host(slow: Env) -> None:
    a, b = slow.admitted("a", delay=2.0), slow.admitted("b", delay=2.0)
    parked = slow.task("c", delay=2.0, depth=2)
    assert slow.politeness.admit(parked) == []
    slow.web.page(a.url)
    outbox = Outbox()
    slow.fetcher.fetch_batch([a], outbox)
    [(body, _)] = outbox.fetch
    nxt = FetchTask.from_json(body)
    assert nxt.url == parked.url
    assert nxt.not_before == pytest.approx(b.not_before + 2.0)
    assert list(outbox.unparked) == ["example.com"] and outbox.unparked["example.com"][0].startswith("0002#")
    assert slow.hosts.read_slot("example.com").window == {window_key(b), window_key(parked)}


def test_a_task_already_done_still_unparks_the_next_url(slow: Env) -> None:
    a, _b = slow.admitted("a", delay=2.0), slow.admitted("b", delay=2.0)
    parked = slow.task("c", delay=2.0, depth=2)
    assert slow.politeness.admit(parked) == []
    slow.urls.set_outcome("c", a.fp, "fetched", status=200)  # a redelivery of a stored page
    outbox = Outbox()
    slow.fetcher.fetch_batch([a], outbox)
    assert slow.web.calls == []
    assert [FetchTask.from_json(body).url for body, _ in outbox.fetch] == [parked.url]


def test_a_failure_after_the_claim_gives_the_host_back(slow: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    a = slow.admitted("a", delay=2.0)

    def broken(crawl_id: str, fp: str, now: float, stale_before: float, attempt: int = 1) -> bool:
        raise RuntimeError("DynamoDB unavailable")

    monkeypatch.setattr(slow.urls, "start_fetch", broken)
    result = slow.fetcher.fetch_batch([a], Outbox())
    assert isinstance(result.errors[0], RuntimeError)
    slot = slow.hosts.read_slot("example.com")
    assert not slot.busy and window_key(a) not in slot.window
    # Not held by the 90-second crash lease: free again one delay later.
    assert slot.free_at == pytest.approx(slow.clock.now + 2.0)


# --- tasks of records already complete ------------------------------------------
def reads(env: Env) -> list[tuple[object, ...]]:
    return [call for call in env.resolved.calls if call[0] == "get_many"]


def test_a_task_of_a_complete_record_is_skipped_with_no_request_and_one_read(env: Env) -> None:
    env.complete("r1")
    done = [env.admitted("a"), env.admitted("b")]
    other = env.admitted("c", record_id="r2")
    for t in (*done, other):
        env.web.page(t.url)
    result = env.fetcher.fetch_batch([*done, other], Outbox())

    assert reads(env) == [("get_many", "c", ("r1", "r2"))]
    assert [url for url, _, _ in env.web.calls] == [other.url]
    skips = sorted((f.task.url, f.outcome, f.reason) for f in result.fetched if f.task in done)
    assert skips == [(t.url, "skipped", RECORD_COMPLETE) for t in done]
    for t in done:
        item = env.urls.item("c", t.fp)
        assert (item["state"], item["reason"], item["claimable"]) == ("skipped", RECORD_COMPLETE, True)
    assert env.urls.state("c", other.fp) == "fetched"
    # Only the fetched page is archived; the skipped ones' outcomes are written once, by the skip.
    assert [p.url for p in read_warc(env.blobs.get(result.warc_key))] == [other.url]
    assert sorted(e[2] for e in env.journal if e[0] == "outcome") == sorted(t.fp for t in (*done, other))
    assert env.hosts.read_slot("example.com").window == frozenset()


def test_tasks_without_record_id_or_want_cost_no_read(env: Env) -> None:
    env.complete("r1")
    plain, nowant = env.admitted("a", record_id=None), env.admitted("b", want=())
    for t in (plain, nowant):
        env.web.page(t.url)
    result = env.fetcher.fetch_batch([plain, nowant], Outbox())
    assert reads(env) == []
    assert sorted(f.outcome for f in result.fetched) == ["fetched", "fetched"]


def test_a_record_remembered_complete_costs_no_read(env: Env) -> None:
    env.completed.add("c", "r1")  # seen complete by this container's dispatcher, say
    t = env.admitted("a")
    [skipped] = env.fetcher.fetch_batch([t], Outbox()).fetched
    assert (skipped.outcome, skipped.reason) == ("skipped", RECORD_COMPLETE)
    assert reads(env) == [] and env.web.calls == []
    # And one read complete is remembered for the next batch.
    env.complete("r2")
    env.fetcher.fetch_batch([env.admitted("b", record_id="r2")], Outbox())
    env.fetcher.fetch_batch([env.admitted("c", record_id="r2")], Outbox())
    assert reads(env) == [("get_many", "c", ("r2",))] and env.web.calls == []


def test_the_skip_neither_waits_for_the_slot_nor_touches_the_host(slow: Env) -> None:
    slow.complete("r1")
    t = slow.admitted("a", delay=2.0)
    # Another fetcher's request to the host is in flight, and the slot is far off.
    slow.hosts.claim("example.com", slow.clock.now, slow.clock.now + 999)
    calls = len(slow.hosts.calls)
    far = replace(t, not_before=slow.clock.now + 30)
    outbox = Outbox()
    [skipped] = slow.fetcher.fetch_batch([far], outbox).fetched
    assert skipped.reason == RECORD_COMPLETE and outbox.fetch == []
    assert slow.clock.sleeps == [] and slow.web.calls == []
    assert slow.hosts.calls[calls:] == [("release", "example.com", window_key(t))]  # no claim of its own
    slot = slow.hosts.read_slot("example.com")
    # The request in flight keeps the host; only the window place was given back.
    assert (slot.busy, slot.free_at, slot.window) == (True, slow.clock.now + 999, frozenset())


def test_skips_unpark_the_urls_behind_them_until_none_is_left(slow: Env) -> None:
    slow.complete("r1")
    first = [slow.admitted("a", delay=2.0), slow.admitted("b", delay=2.0)]
    parked = [slow.task(f"p{i}", delay=2.0, depth=2) for i in range(3)]
    keep = slow.task("keep", delay=2.0, depth=3, record_id="r2")
    for t in (*parked, keep):
        assert slow.politeness.admit(t) == []
    slow.web.page(keep.url)

    pending, sent = list(first), []
    while pending:  # the fetch queue, delivered one task at a time
        outbox = Outbox()
        slow.fetcher.fetch_batch([pending.pop(0)], outbox)
        for host, orders in outbox.unparked.items():
            slow.politeness.unparked(host, orders)
        nxt = [FetchTask.from_json(body) for body, _ in outbox.fetch]
        sent += [t.url for t in nxt]
        pending += [replace(t, not_before=slow.clock.now) for t in nxt]
        slow.clock.advance(2.0)

    # Parked ones come shallowest first (by fingerprint within a depth).
    assert sorted(sent[:3]) == [t.url for t in parked] and sent[3:] == [keep.url]
    assert [url for url, _, _ in slow.web.calls] == [keep.url]
    assert {slow.urls.state("c", t.fp) for t in (*first, *parked)} == {"skipped"}
    assert slow.parking.count() == 0 and slow.hosts.read_slot("example.com").window == frozenset()


def test_a_skipped_url_may_still_be_claimed_and_fetched_for_another_record(env: Env) -> None:
    env.complete("r1")
    t = env.admitted("shared")
    env.fetcher.fetch_batch([t], Outbox())
    # A seed without record_id reaches the page later: its claim takes the URL over.
    assert env.urls.claim("c", t.fp, t.url, 2, claimer="m-other")
    other = replace(t, record_id=None, want=(), depth=2)
    env.web.page(t.url)
    # A redelivered copy of the complete record's task neither fetches it nor takes it back...
    assert env.fetcher.fetch_batch([t], Outbox()).fetched == []
    item = env.urls.item("c", t.fp)
    assert (item["state"], item["claimed_by"]) == ("queued", "m-other") and "claimable" not in item
    # ...and the other record's task fetches it, once.
    [fetched] = env.fetcher.fetch_batch([other, t], Outbox()).fetched
    assert (fetched.task.record_id, fetched.outcome) == (None, "fetched")
    assert env.urls.state("c", t.fp) == "fetched" and len(env.web.calls) == 1
    assert not env.urls.claim("c", t.fp, t.url, 3, claimer="m-third")


def test_a_page_being_fetched_is_not_skipped_unless_its_fetcher_died(env: Env) -> None:
    t = env.admitted("a")
    assert env.urls.start_fetch("c", t.fp, env.clock.now, 0.0)  # another copy, fetching before completion
    env.complete("r1")
    assert env.fetcher.fetch_batch([t], Outbox()).fetched == []
    assert env.urls.state("c", t.fp) == "fetching"
    env.clock.advance(CLAIM_LEASE_SECONDS + 1)
    [skipped] = env.fetcher.fetch_batch([t], Outbox()).fetched
    assert skipped.reason == RECORD_COMPLETE and env.urls.state("c", t.fp) == "skipped"
    assert env.web.calls == []


def test_two_copies_of_a_complete_records_task_skip_once(env: Env) -> None:
    env.complete("r1")
    t = env.admitted("a")
    result = env.fetcher.fetch_batch([t, t], Outbox())
    assert len(result.fetched) == 1 and env.web.calls == []
    assert [e for e in env.journal if e[0] == "outcome"] == [("outcome", "c", t.fp, "skipped")]


def test_a_failed_completion_read_fetches_as_before(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.complete("r1")

    def unavailable(crawl_id: str, record_ids: object) -> dict[str, object]:
        raise RuntimeError("AccessDenied")

    monkeypatch.setattr(env.resolved, "get_many", unavailable)
    t = env.admitted("a")
    env.web.page(t.url)
    result = env.fetcher.fetch_batch([t], Outbox())
    assert [f.outcome for f in result.fetched] == ["fetched"] and result.errors == {}
    assert str(result.completion_error) == "AccessDenied"


@pytest.mark.parametrize(
    ("reason", "klass"),
    [
        ("read timeout", "timeout"),
        ("deadline of 60s exceeded", "timeout"),
        ("address 10.0.0.1 is not public (use --allow-private to allow it)", "address_refused"),
        ("DNS lookup failed: [Errno -2] Name or service not known", "dns"),
        ("connection failed", "connection"),
        ("more than 5 redirects", "redirects"),
        ("corrupt compressed body", "corrupt_body"),
        ("no response", "other"),
    ],
)
def test_failure_classes_for_the_metric(reason: str, klass: str) -> None:
    assert failure_class(reason) == klass
    assert klass in FAILURE_CLASSES


def test_a_host_in_flight_elsewhere_is_asked_again_only_after_a_poll(slow: Env) -> None:
    t = slow.admitted("a", delay=0.08)
    slow.web.page(t.url)
    slow.hosts.claim("example.com", slow.clock.now, slow.clock.now + 999)  # in flight elsewhere
    real = slow.hosts.claim
    asked: list[float] = []

    def claim(host: str, now: float, lease_until: float) -> object:
        asked.append(slow.clock.now)
        if len(asked) == 3:  # the request elsewhere ends
            slow.hosts.slots[host].update(free_at=slow.clock.now, busy=0)
        return real(host, now, lease_until)

    slow.hosts.claim = claim  # type: ignore[method-assign]
    slow.fetcher.fetch_batch([t], Outbox())
    # Each refusal costs a write: never asked again sooner than a poll.
    assert len(asked) == 3 and len(slow.web.calls) == 1
    assert all(b - a >= IN_FLIGHT_POLL_SECONDS - 1e-6 for a, b in itertools.pairwise(asked))
