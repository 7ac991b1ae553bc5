"""The hosts of one invocation share their flushes' S3 objects (``crawlstack.fetch.flush_objects``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fakes import FakeBlobs
from hostruns import Env, SharedClock

from crawlstack import settings
from crawlstack.fetch.flush_objects import Group
from crawlstack.fetch.outcomes import Fetched
from crawlstack.fetch.warc import Exchange, read_warc
from crawlstack.messages import FetchTask


def fetched(host: str, path: str) -> Fetched:
    url = f"http://{host}/{path}"
    task = FetchTask(url, f"fp-{host}-{path}", host, 1, "c", 0.0)
    exchange = Exchange(url=url, method="GET", request_headers=[], status=200, reason="OK", response_headers=[],
                        body=b"<html></html>", ip_address=None, metadata=task.metadata())  # fmt: skip
    return Fetched(task, "fetched", 200, exchange=exchange)


def test_flushes_fall_on_the_invocations_grid() -> None:
    group = Group(FakeBlobs().put, started=100.0, flush_seconds=5.0, gather_seconds=0.5)
    assert [group.due(t) for t in (100.0, 101.0, 104.99, 105.0, 112.0)] == [105.0, 105.0, 105.0, 110.0, 115.0]


def test_hosts_that_flush_together_share_one_warc_and_crawl_log_object() -> None:
    blobs = FakeBlobs()
    group = Group(blobs.put, started=0.0, flush_seconds=5.0, gather_seconds=5.0)
    hosts = [f"h{i}.test" for i in range(3)]
    for host in hosts:
        group.dirty(host)
    keys: dict[str, str | None] = {}

    def flush(host: str) -> None:
        keys[host] = group.write(host, [fetched(host, "a"), fetched(host, "b")], 10.0)

    threads = [threading.Thread(target=flush, args=(host,)) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [warc] = blobs.keys(settings.PAGES_PREFIX)
    assert set(keys.values()) == {warc}
    assert sorted(r.url for r in read_warc(blobs.get(warc))) == sorted(f"http://{h}/{p}" for h in hosts for p in "ab")
    assert len(blobs.keys(settings.CRAWL_LOG_PREFIX)) == 1


def test_the_first_writer_waits_for_a_host_in_a_long_request_only_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = FakeBlobs()
    now = [0.0]
    group = Group(blobs.put, started=0.0, flush_seconds=5.0, gather_seconds=0.5, wait_clock=lambda: now[0])
    group.dirty("slow.test")  # never comes
    real_wait = threading.Condition.wait

    def wait(self: threading.Condition, timeout: float | None = None) -> bool:
        now[0] += timeout or 0.0  # the gathering time passes at once
        return real_wait(self, 0)

    monkeypatch.setattr(threading.Condition, "wait", wait)
    key = group.write("fast.test", [fetched("fast.test", "a")], 6.0)
    assert key is not None and blobs.keys(settings.PAGES_PREFIX) == [key]
    assert now[0] == pytest.approx(0.5)


def test_a_write_that_fails_fails_every_host_in_it() -> None:
    def put(key: str, data: bytes, content_type: str) -> None:
        raise RuntimeError("S3 unavailable")

    group = Group(put, started=0.0, flush_seconds=5.0, gather_seconds=5.0)
    group.dirty("a.test")
    group.dirty("b.test")
    errors: list[Any] = []

    def flush(host: str) -> None:
        try:
            group.write(host, [fetched(host, "x")], 1.0)
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=flush, args=(host,)) for host in ("a.test", "b.test")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [str(e) for e in errors] == ["S3 unavailable"] * 2


def test_hosts_of_one_invocation_write_a_warc_per_flush_not_per_host(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = [f"h{i}.test" for i in range(4)]
    env = Env(monkeypatch, delay=1.0, clock=SharedClock(workers=len(hosts)))
    env.runner = env.make_runner()
    messages = [env.admit([str(p) for p in range(12)], host=h) for h in hosts]
    result = env.run(*messages)
    assert result.ends == dict.fromkeys(hosts, "done")
    assert len([f for f in result.fetched if f.outcome == "fetched"]) == 48
    # 12 s of requests, flushed every 5 s on one grid, and once at the end: 3 WARCs, not one per host per flush.
    assert len(env.warcs()) <= 4, env.warcs()


def test_writes_are_spaced_by_the_minimum_gap_and_a_gathering_write_is_open_to_join() -> None:
    now = [10.0]
    group = Group(FakeBlobs().put, started=0.0, flush_seconds=5.0, gather_seconds=0.0, clock=lambda: now[0],
                  min_gap_seconds=1.0)  # fmt: skip
    assert group.slot() < now[0] and not group.gathering()
    group.write("a.test", [fetched("a.test", "x")], now[0])
    assert group.slot() == 11.0 and not group.gathering()


def test_hosts_that_run_dry_one_after_another_share_a_write(monkeypatch: pytest.MonkeyPatch) -> None:
    # At a small delay each host runs dry a moment after the one before, with a page or two unflushed.
    hosts = [f"h{i}.test" for i in range(4)]
    env = Env(monkeypatch, delay=0.1, clock=SharedClock(workers=len(hosts)))
    env.runner = env.make_runner()
    messages = [env.admit([str(p) for p in range(i + 1)], host=h) for i, h in enumerate(hosts)]
    result = env.run(*messages)
    assert result.ends == dict.fromkeys(hosts, "done")
    assert len([f for f in result.fetched if f.outcome == "fetched"]) == 10
    # The first to run dry writes at once; the rest, dry within RUN_FLUSH_MIN_GAP_SECONDS, share the next write.
    assert settings.RUN_FLUSH_MIN_GAP_SECONDS >= 0.5
    assert len(env.warcs()) == 2, env.warcs()


@pytest.mark.parametrize(("starts_at", "waited"), [(10.2, 0.5), (11.0, 0.0)])
def test_the_first_writer_waits_for_a_host_whose_request_starts_within_the_gathering_time(
    monkeypatch: pytest.MonkeyPatch, starts_at: float, waited: float
) -> None:
    now = [0.0]
    group = Group(FakeBlobs().put, started=0.0, flush_seconds=5.0, gather_seconds=0.5, clock=lambda: 10.0,
                  wait_clock=lambda: now[0])  # fmt: skip
    group.expect("next.test", starts_at)  # fetching its first page in a moment, or not for a second
    real_wait = threading.Condition.wait

    def wait(self: threading.Condition, timeout: float | None = None) -> bool:
        now[0] += timeout or 0.0
        return real_wait(self, 0)

    monkeypatch.setattr(threading.Condition, "wait", wait)
    assert group.write("first.test", [fetched("first.test", "a")], 10.0) is not None
    assert now[0] == pytest.approx(waited)
    # Once its request starts it is dirty instead, no longer expected: after its own write nobody is waited for.
    group.dirty("next.test")
    group.write("next.test", [fetched("next.test", "b")], 10.0)
    before = now[0]
    group.write("last.test", [fetched("last.test", "c")], 10.0)
    assert now[0] == before
