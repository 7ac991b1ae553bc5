"""Local mode's state in OUT/: refusals, resume after a kill or a full disk, a lock, a damaged database.

Each crawl runs the CLI on the local backend (``crawlstack.local.backend``)
against a loopback web, and is judged from the server's request log and
the files in OUT/.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import pytest
from conftest import CRAWL_TIMEOUT_SECONDS, _run_in_process
from webs import (
    ALLOW_LOOPBACK,
    UA,
    Crawl,
    describe,
    host_pattern,
    mapping,
    page_requests,
    read_jsonl,
    star_site,
    write_rules,
)

from crawlstack.demo.server import LoopbackWeb
from crawlstack.fetch.addresses import REFUSAL
from crawlstack.local.backend import STATE_FILE, LocalState
from crawlstack.local.sqlite import SqliteJournal
from crawlstack.local.sqlite.db import StateDb

A, B = "127.0.0.2", "127.0.0.3"
PAGES = [mapping("page", host_pattern(A, r"/p\d+\.html"), {"title": "//h1/text()"}),
         mapping("page-b", host_pattern(B, r"/p\d+\.html"), {"title": "//h1/text()"})]  # fmt: skip
REFUSED = "use --resume to continue or --overwrite to start again"


def cli(*argv: str) -> tuple[int | None, str]:
    return _run_in_process(list(argv), CRAWL_TIMEOUT_SECONDS)


def resume(out: Path, *extra: str) -> tuple[int | None, str]:
    return cli("crawl", "--local", "--resume", "--out", str(out), "--no-progress", *extra)


def test_an_out_holding_state_is_refused_and_overwrite_starts_again(crawl: Crawl, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(2))
    first = crawl(web.url(A, "/"), rules=PAGES, delay=0)
    before = (first.out / "records.jsonl").read_bytes()
    proc = run_cli(first.argv)
    assert proc.returncode == 2 and proc.stderr == f"crawlstack: error: {first.out} holds a crawl's state: {REFUSED}\n"
    assert (first.out / "records.jsonl").read_bytes() == before  # nothing touched
    assert len(page_requests(web, A)) == 3
    code, _ = cli(*first.argv, "--overwrite")
    assert code == 0
    assert len(read_jsonl(first.out / "records.jsonl")) == 2
    assert Counter(e.bare_path for e in page_requests(web, A))["/p1.html"] == 2  # crawled again from scratch


def run_cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess, for its exact stderr (an in-process run shares pytest's streams)."""
    exe = Path(sys.executable).parent / "crawlstack"
    return subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    "extra",
    [["--delay", "1"], ["--rules", "x"], ["http://127.0.0.2/"], ["--emulate-aws"], ["--endpoint-url", "http://x"]],
)
def test_resume_takes_only_out_no_progress_and_concurrency(tmp_path: Path, extra: list[str]) -> None:
    proc = run_cli(["crawl", "--local", "--resume", "--out", str(tmp_path / "out"), *extra])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_resume_with_no_state_says_so(tmp_path: Path) -> None:
    code, _ = resume(tmp_path)
    assert code == 2
    assert not (tmp_path / STATE_FILE).exists()


@pytest.mark.parametrize("content", ["garbage", "foreign"])
def test_a_damaged_or_foreign_state_database_is_refused_and_left_as_it_is(tmp_path: Path, content: str) -> None:
    path = tmp_path / STATE_FILE
    if content == "garbage":
        path.write_bytes(b"this is not a database" * 100)
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
        conn.close()
    before = path.read_bytes()
    proc = run_cli(["crawl", "--local", "--resume", "--out", str(tmp_path)])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "not a crawlstack state database" in proc.stderr, proc.stderr
    assert path.read_bytes() == before


def test_a_second_crawl_on_one_out_is_refused_while_the_first_holds_it(crawl: Crawl, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(1))
    first = crawl(web.url(A, "/"), rules=PAGES, delay=0)
    holder = LocalState(first.out, "resume")  # as a running crawl holds it
    try:
        code, _ = resume(first.out)
        assert code == 2
        # A reader opens the state read-only and is not refused.
        reader = StateDb(first.out / STATE_FILE, read_only=True)
        with reader.reading() as conn:
            assert conn.execute("SELECT count(*) FROM crawls").fetchone()[0] == 1
        reader.close()
    finally:
        holder.close()
    assert resume(first.out)[0] == 0  # free again


@contextmanager
def disk_full_after(ready: Callable[[], bool]) -> Iterator[None]:
    """Every state transaction fails with SQLITE_FULL, and every journal append with ENOSPC, once ``ready()``.

    The disk stays full until the block ends.
    """
    real = StateDb.transaction
    real_append = SqliteJournal._append
    full = False

    def append(self: SqliteJournal, line: bytes) -> None:
        nonlocal full
        full = full or ready()
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, line)

    @contextmanager
    def transaction(self: StateDb) -> Iterator[sqlite3.Connection]:
        nonlocal full
        full = full or ready()
        with real(self) as conn:
            if full:
                raise sqlite3.OperationalError("database or disk is full")
            yield conn

    StateDb.transaction = transaction  # type: ignore[method-assign]
    SqliteJournal._append = append  # type: ignore[method-assign]
    try:
        yield
    finally:
        StateDb.transaction = real  # type: ignore[method-assign]
        SqliteJournal._append = real_append  # type: ignore[method-assign]


def test_a_full_disk_stops_the_crawl_and_what_was_committed_resumes(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(16))
    out = tmp_path / "out"
    rules = tmp_path / "rules"
    write_rules(rules, PAGES)
    argv = ["crawl", "--local", web.url(A, "/"), "--rules", str(rules), "--out", str(out), *ALLOW_LOOPBACK,
            "--delay", "0.05", "--user-agent", UA, "--no-progress"]  # fmt: skip
    with disk_full_after(lambda: len(page_requests(web, A)) >= 6):
        code, output = cli(*argv)
    assert code == 1, output
    assert len(page_requests(web, A)) < 17, describe(web.log)
    code, output = resume(out)
    assert code == 0, output
    assert_every_page_once_in_outputs(web, out, 17)


def test_a_full_disk_is_one_line_even_when_closing_metrics_jsonl_fails_again(
    tmp_path: Path, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk is full for OUT/metrics.jsonl too: its writes and its close at the end fail with the kernel's
    # ENOSPC (it is /dev/full), after the state's own failure stopped the crawl.
    web.add_host(A, star_site(16))
    out = tmp_path / "out"
    rules = write_rules(tmp_path / "rules", PAGES)
    real_open = Path.open

    def open_path(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if self.name == "metrics.jsonl" and mode[:1] in "wa":
            return real_open(Path("/dev/full"), "w", *args, **kwargs)
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_path)
    argv = ["crawl", "--local", web.url(A, "/"), "--rules", str(rules), "--out", str(out), *ALLOW_LOOPBACK,
            "--delay", "0.05", "--user-agent", UA, "--no-progress"]  # fmt: skip
    # Not capsys: the handlers' loggers keep the stdout they first find, and capsys's is closed with its test.
    with disk_full_after(lambda: len(page_requests(web, A)) >= 6), redirect_stderr(io.StringIO()) as err:
        code, traceback = cli(*argv)
    assert (code, traceback) == (1, "")
    [line] = err.getvalue().splitlines()
    assert line.startswith(f"crawlstack: error: no room left to write {out}: "), line
    assert line.endswith(f"the crawl stopped: make room, then crawlstack crawl --local --resume --out {out}"), line
    monkeypatch.undo()
    code, output = resume(out)
    assert code == 0, output
    assert_every_page_once_in_outputs(web, out, 17)


def assert_every_page_once_in_outputs(web: LoopbackWeb, out: Path, pages: int, host: str = A) -> None:
    requested = Counter(e.bare_path for e in page_requests(web, host))
    assert len(requested) == pages, describe(web.log)
    log = read_jsonl(out / "crawl-log.jsonl")
    urls = Counter(e["url"] for e in log)
    assert all(n == 1 for n in urls.values()), urls
    assert sum(1 for e in log if e["outcome"] == "fetched" and host in e["url"]) == pages, log
    records = Counter(r["url"] for r in read_jsonl(out / "records.jsonl") if host in r["url"])
    assert len(records) == pages - 1 and all(n == 1 for n in records.values()), records  # the index has no record
    port = str(web.hosts[host].port)
    refetched = {e["url"].split(port, 1)[1] for e in log if e.get("refetched") and host in e["url"]}
    twice = {path for path, n in requested.items() if n > 1}
    # Each page requested twice says so; a page marked was requested (before the kill, and again).
    assert twice <= refetched <= set(requested), (twice, refetched)


def test_kill_9_mid_crawl_then_resume_fetches_every_page(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(30))
    web.add_host(B, star_site(30))
    out = tmp_path / "out"
    rules = tmp_path / "rules"
    write_rules(rules, PAGES)
    argv = ["crawl", "--local", web.url(A, "/"), web.url(B, "/"), "--rules", str(rules), "--out", str(out),
            *ALLOW_LOOPBACK, "--delay", "0.1", "--user-agent", UA, "--no-progress"]  # fmt: skip
    proc = subprocess.Popen([str(Path(sys.executable).parent / "crawlstack"), *argv], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(page_requests(web, A)) + len(page_requests(web, B)) < 20 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    before = Counter(e.bare_path for e in page_requests(web, A) + page_requests(web, B))
    assert sum(before.values()) < 62, describe(web.log)
    code, output = resume(out)
    assert code == 0, output
    for host in (A, B):
        assert_every_page_once_in_outputs(web, out, 31, host)
    summary = read_summary(out)
    assert summary["resumed"] is True and summary["emulator"] is None


def read_summary(out: Path) -> dict[str, object]:
    return dict(json.loads((out / "summary.json").read_text(encoding="utf-8")))


def test_resume_gives_a_host_with_tasks_and_no_run_message_a_fresh_run(tmp_path: Path) -> None:
    """A kill between a run's schedule and its message's send leaves a run nothing starts; recover starts one."""
    from crawlstack.messages import FetchTask, RunMessage

    state = LocalState(tmp_path, "new")
    stores = state.stores()
    task = FetchTask(url="http://h.test/", fp="fp", host="h.test", depth=0, crawl_id="local", not_before=0)
    stores.backlog.add("h.test", 0, [task])
    assert stores.runs.schedule("h.test", "lost-run", time.time(), time.time() + 3600)  # its message never sent
    state.close()

    state = LocalState(tmp_path, "resume")
    state.recover()
    stores = state.stores()
    [message] = stores.fetch_queue.receive(10, 30)
    run = RunMessage.from_json(message.body)
    assert run.host == "h.test" and run.run_id != "lost-run"
    assert stores.runs.get("h.test").run_id == run.run_id
    state.close()


def test_a_crawl_stopped_before_its_seeds_were_sent_sends_them_on_resume(
    tmp_path: Path, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlstack.local import runner

    web.add_host(A, star_site(3))
    rules = write_rules(tmp_path / "rules", PAGES)
    out = tmp_path / "out"

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C between the saved settings and the seeds

    monkeypatch.setattr(runner, "_send_seeds", interrupted)
    code, _ = cli("crawl", "--local", web.url(A, "/"), "--rules", str(rules), "--out", str(out), *ALLOW_LOOPBACK,
                  "--delay", "0", "--user-agent", UA, "--no-progress")  # fmt: skip
    assert code == 130 and not web.log
    monkeypatch.undo()
    code, output = resume(out)
    assert code == 0, output
    assert_every_page_once_in_outputs(web, out, 4)


def test_the_handlers_log_nothing_to_the_terminal_below_warning(tmp_path: Path, web: LoopbackWeb) -> None:
    # The handlers' loggers take their level when first imported: the crawl's environment must be set by then.
    web.add_host(A, {"/": '<a href="http://127.0.0.9:9/off-site">x</a><a href="/p1.html">p</a>', "/p1.html": "p"})
    proc = run_cli(["crawl", "--local", web.url(A, "/"), "--out", str(tmp_path / "out"), *ALLOW_LOOPBACK,
                    "--delay", "0", "--no-progress"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("crawled 2 pages"), proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith("{")], proc.stdout  # no log line


def test_a_crawl_that_fetched_nothing_exits_3_naming_the_guard(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(1))
    proc = run_cli(["crawl", "--local", web.url(A, "/"), "--out", str(tmp_path / "out"), "--no-progress"])
    assert proc.returncode == 3, proc.stderr
    assert not web.log  # a loopback address is not public: nothing was asked of it
    assert "hint: 1 URLs are on addresses that are not public: --allow-private CIDR reaches them" in proc.stdout
    assert proc.stderr.count("\n") == 1 and "no page was fetched" in proc.stderr
    summary = read_summary(tmp_path / "out")
    assert summary["guards"] and summary["top_reasons"] == {"skipped": [[f"address {REFUSAL}", 1]]}
