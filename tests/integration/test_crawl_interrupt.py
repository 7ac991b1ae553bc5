"""Ctrl-C during ``crawl --local``: OUT/ holds what was done so far, and the exit status is 130.

The KeyboardInterrupt is raised from the event pump's loop (where a real
Ctrl-C lands, in the crawl's own thread) once the first records are written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import CRAWL_TIMEOUT_SECONDS, _run_in_process
from webs import Crawl, describe, host_pattern, mapping, page, read_jsonl, robots, star_site

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Response
from crawlstack.local import outputs, runner
from crawlstack.local.pump import EventPump, Source
from crawlstack.wiring import Services

A, B = "127.0.0.2", "127.0.0.3"
PAGES = mapping("page", host_pattern(A, r"/p\d+\.html"), {"title": "//h1/text()"})
# A host whose run waits out a long Crawl-delay after its robots.txt: it is woken by a
# delayed run message, so its page waits in its backlog, in no running batch, when the
# crawl is interrupted a few seconds in.
WAITING = {"/robots.txt": robots("User-agent: *\nCrawl-delay: 20\n"), "/": page("waiting")}


def interrupt_after_first_extract(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C at the first batch handed out after a records object was written."""
    real_invoke = EventPump._invoke
    # The services the crawl's handlers run on, as local mode builds them.
    built: list[Services] = []

    def services(*args: Any, **kwargs: Any) -> Services:
        built.append(Services(*args, **kwargs))
        return built[-1]

    def invoke(self: EventPump, source: Source, messages: list[dict[str, Any]]) -> None:
        if any(built[-1].stores.blobs.keys(settings.RECORDS_PREFIX)):
            raise KeyboardInterrupt
        real_invoke(self, source, messages)

    monkeypatch.setattr(runner, "Services", services)
    monkeypatch.setattr(EventPump, "_invoke", invoke)


def test_ctrl_c_writes_what_was_done_so_far_and_exits_130(
    crawl: Crawl, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    web.add_host(A, star_site(12))
    web.add_host(B, WAITING)
    interrupt_after_first_extract(monkeypatch)
    result = crawl(web.url(A, "/"), web.url(B, "/"), rules=[PAGES], delay=0.05, max_depth=3, expect_exit=130)

    assert "Traceback" not in result.output
    assert result.summary is not None and result.summary["interrupted"] is True
    assert result.warc_files and result.summary["warc_files"] == len(result.warc_files)
    assert result.log and result.summary["urls"] == len(result.log)
    assert result.summary["records"] == len(result.records)
    assert (result.out / "resolved.jsonl").exists()
    assert not list(result.out.rglob("*.part"))
    # Not every URL was reached: those say the crawl was interrupted, not that something broke.
    unfinished = [e for e in result.log if e["outcome"] == "failed"]
    assert unfinished and all(str(e["reason"]).startswith("interrupted: ") for e in unfinished), result.log_text()
    # B's page waits out its Crawl-delay; A's run stops at its next wait, its pages not yet fetched left too.
    assert web.url(B, "/") in [e["url"] for e in unfinished], result.log_text()
    assert result.summary["parked_left"] == len(unfinished)  # each still in its host's backlog
    assert [e.bare_path for e in web.requests_for(B)] == ["/robots.txt"], describe(web.log)
    fetched = [e["url"] for e in result.log if e["outcome"] == "fetched"]
    assert fetched and len(fetched) < len(result.log)


def test_a_crawl_that_finishes_says_it_was_not_interrupted(crawl: Crawl, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(2))
    result = crawl(web.url(A, "/"), rules=[PAGES], delay=0)
    assert result.summary is not None and result.summary["interrupted"] is False


def test_a_second_ctrl_c_while_writing_abandons_the_rest_without_a_traceback(
    crawl: Crawl, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    web.add_host(A, star_site(6))
    interrupt_after_first_extract(monkeypatch)

    def write_resolved(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs, "write_resolved", write_resolved)
    result = crawl(web.url(A, "/"), rules=[PAGES], delay=0.05, expect_exit=130)
    assert "Traceback" not in result.output
    assert result.summary is None  # written last: its absence says OUT/ is incomplete
    assert read_jsonl(result.out / "records.jsonl") == result.records and result.records
    assert not (result.out / "resolved.jsonl").exists()
    assert not list(result.out.rglob("*.part"))


def test_a_second_ctrl_c_while_batches_finish_stops_at_once(
    crawl: Crawl, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    web.add_host(A, star_site(6))
    real_run = EventPump.run
    pools: list[ThreadPoolExecutor] = []

    def run(self: EventPump, *args: Any, **kwargs: Any) -> None:
        # As if Ctrl-C came twice: the first stops the loop, the second the wait for running batches.
        pools.extend(self._pools.values())
        for pool in self._pools.values():
            real_shutdown = pool.shutdown

            def shutdown(wait: bool = True, *, cancel_futures: bool = False, real: Any = real_shutdown) -> None:
                real(wait=False)
                raise KeyboardInterrupt

            pool.shutdown = shutdown  # type: ignore[method-assign]
        real_run(self, *args, **kwargs)

    interrupt_after_first_extract(monkeypatch)
    monkeypatch.setattr(EventPump, "run", run)
    try:
        result = crawl(web.url(A, "/"), rules=[PAGES], delay=0.05, expect_exit=130)
    finally:
        for pool in pools:  # no batch of this crawl may run on into the next test's emulator
            ThreadPoolExecutor.shutdown(pool, wait=True)
    assert "Traceback" not in result.output
    assert result.summary is None  # written last: its absence says OUT/ is incomplete
    # Records stream as they are committed: what is there is whole, and the resume does the rest.
    before = read_jsonl(result.out / "records.jsonl")
    monkeypatch.undo()  # no more Ctrl-C
    code, output = _run_in_process(["crawl", "--local", "--resume", "--out", str(result.out)], CRAWL_TIMEOUT_SECONDS)
    assert code == 0, output
    records = read_jsonl(result.out / "records.jsonl")
    assert records[: len(before)] == before
    assert sorted(r["url"] for r in records) == sorted({web.url(A, f"/p{i}.html") for i in range(1, 7)})


def test_summary_json_is_valid_json(crawl: Crawl, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(1))
    result = crawl(web.url(A, "/"), rules=[PAGES], delay=0)
    assert json.loads(Path(result.out / "summary.json").read_text(encoding="utf-8")) == result.summary


def sigterm_after_first_page(web: LoopbackWeb, out: Path, *seeds: str) -> tuple[int, str]:
    """Run ``crawl --local`` as a process and SIGTERM it once a /p page of A was served; (exit code, stderr)."""
    cmd = [sys.executable, "-m", "crawlstack.cli", "crawl", "--local", *seeds, "--out", str(out)]
    cmd += ["--allow-private", "127.0.0.0/8", "--delay", "0", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 30
        while not any(r.path.startswith("/p") and r.finished for r in web.requests_for(A)):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.decode(errors="replace")


def test_sigterm_writes_what_was_done_so_far_and_exits_130(web: LoopbackWeb, tmp_path: Path) -> None:
    # `timeout 120 crawlstack crawl --local ...` (or a container stopping) sends SIGTERM: it used to kill
    # the crawl with nothing in OUT/, not even the crawl log of the pages already fetched.
    links = "".join(f"<a href='/p{i}.html'>p</a>" for i in range(20))
    web.add_host(A, {"/": Response(f"<h1>home</h1>{links}")}, fallback=Response("<h1>page</h1>"))
    web.add_host(B, WAITING)
    out = tmp_path / "out"
    code, err = sigterm_after_first_page(web, out, web.url(A, "/"), web.url(B, "/"))
    assert code == 130, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    log = {e["url"]: e for e in map(json.loads, (out / "crawl-log.jsonl").read_text().splitlines())}
    assert {"outcome": "fetched", "depth": 0, "status": 200}.items() <= log[web.url(A, "/")].items()
    # Stopped before the end: B's page, waiting out its Crawl-delay, was never requested.
    assert [e.bare_path for e in web.requests_for(B)] == ["/robots.txt"], describe(web.log)
    assert str(log[web.url(B, "/")]["reason"]).startswith("interrupted: ")


def test_an_interrupt_stops_a_host_run_in_flight(web: LoopbackWeb, tmp_path: Path) -> None:
    # One host's twenty slow pages are one run in one fetch invocation: SIGTERM must not wait for all of them
    # (a container stopping gives a few seconds before SIGKILL, which leaves nothing in OUT/).
    links = "".join(f"<a href='/p{i}.html'>p</a>" for i in range(20))
    web.add_host(A, {"/": Response(f"<h1>home</h1>{links}")}, fallback=Response("<h1>slow</h1>", delay=0.5))
    out = tmp_path / "out"
    code, err = sigterm_after_first_page(web, out, web.url(A, "/"))
    assert code == 130, err
    assert json.loads((out / "summary.json").read_text())["interrupted"] is True
    pages = [r for r in web.requests_for(A) if r.path.startswith("/p")]
    assert len(pages) < 20, describe(web.log)  # stopped before the end
    unreached = [json.loads(line) for line in (out / "crawl-log.jsonl").read_text().splitlines()]
    assert any(str(e.get("reason", "")).startswith("interrupted: ") for e in unreached)
