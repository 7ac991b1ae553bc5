"""A kill is not a failed delivery: ``kill -9`` during a local crawl, then ``--resume``.

Each crawl runs as a process (``killer.py``) that kills itself with SIGKILL
at a planned page, extract reading it or fetch about to request it: the
message of that stage is in flight at the kill, as with the OOM killer or
a ``kill -9``.  Judged from the exit codes and from OUT/.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CRAWL_TIMEOUT_SECONDS, _run_in_process
from webs import ALLOW_LOOPBACK, UA, Crawl, describe, host_pattern, mapping, read_jsonl, star_site, write_rules

from crawlstack import settings
from crawlstack.cli import main
from crawlstack.demo.server import LoopbackWeb
from crawlstack.local.backend import LocalState

A = "127.0.0.2"
PAGES = [mapping("page", host_pattern(A, r"/p\d+\.html"), {"title": "//h1/text()"})]
KILLER = Path(__file__).with_name("killer.py")
KILLED = -signal.SIGKILL
HELD_BACK = f"extraction dead-lettered: {settings.KILLED_WHILE_PROCESSING}"


def dlq(*argv: str) -> tuple[int, str, str]:
    """``crawlstack dlq ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["dlq", *argv])
    return code, out.getvalue(), err.getvalue()


def killable(plan: Path, stage: str, suffix: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``crawlstack ARGV`` as a process that ``plan`` kills at the page ending in ``suffix`` (``killer.py``)."""
    return subprocess.run(
        [sys.executable, str(KILLER), str(plan), stage, suffix, *argv],
        capture_output=True,
        text=True,
        timeout=CRAWL_TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )


def crawl_argv(web: LoopbackWeb, tmp_path: Path, out: Path) -> list[str]:
    rules = write_rules(tmp_path / "rules", PAGES)
    return ["crawl", "--local", web.url(A, "/"), "--rules", str(rules), "--out", str(out), *ALLOW_LOOPBACK,
            "--delay", "0", "--user-agent", UA, "--no-progress"]  # fmt: skip


def resume_argv(out: Path) -> list[str]:
    return ["crawl", "--local", "--resume", "--out", str(out), "--no-progress"]


def killed_until_the_plan_is_spent(web: LoopbackWeb, tmp_path: Path, stage: str, suffix: str, plan: str) -> Path:
    """Crawl, then resume, each run killed at its plan's next ``kill``, until no step is left; OUT/."""
    out, plan_file = tmp_path / "out", tmp_path / "plan"
    plan_file.write_text(plan, encoding="utf-8")
    argv = crawl_argv(web, tmp_path, out)
    while plan_file.read_text(encoding="utf-8").split():
        run = killable(plan_file, stage, suffix, *argv)
        assert run.returncode == KILLED, f"exit {run.returncode}\n{run.stderr}\n{describe(web.log)}"
        argv = resume_argv(out)
    return out


def assert_every_page_has_its_record(web: LoopbackWeb, out: Path, pages: int = 12) -> None:
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert not any(summary["dead_letter"].values()), summary["dead_letter"]
    wanted = {web.url(A, f"/p{i}.html") for i in range(1, pages + 1)}
    assert {r["url"] for r in read_jsonl(out / "records.jsonl")} == wanted
    log = {e["url"]: e for e in read_jsonl(out / "crawl-log.jsonl")}
    assert all(log[url]["outcome"] == "fetched" for url in wanted), log


def test_five_kills_during_one_warcs_extraction_are_not_failed_deliveries(web: LoopbackWeb, tmp_path: Path) -> None:
    # Five kills with the WARC's message in flight, two tries that failed (each starts the run of kills
    # again): a kill used to count as a failed receive, and the fifth sent the WARC to the DLQ for good.
    web.add_host(A, star_site(12))
    out = killed_until_the_plan_is_spent(web, tmp_path, "extract", "/p1.html", "kill kill fail kill kill fail kill")
    final = killable(tmp_path / "plan", "extract", "/p1.html", *resume_argv(out))
    assert final.returncode == 0, final.stderr
    assert_every_page_has_its_record(web, out)


def test_five_kills_during_a_hosts_run_give_no_false_alarm(web: LoopbackWeb, tmp_path: Path) -> None:
    # Each resume gives the host a fresh run; the killed run's message came back in the same batch
    # and was counted each time, until the DLQ took it and the crawl exited 1 with nothing lost.
    web.add_host(A, star_site(12))
    out = killed_until_the_plan_is_spent(web, tmp_path, "fetch", "/p3.html", "kill " * 5)
    final = killable(tmp_path / "plan", "fetch", "/p3.html", *resume_argv(out))
    assert final.returncode == 0, final.stderr
    assert_every_page_has_its_record(web, out)


def test_a_page_killing_extraction_three_times_in_a_row_is_dead_lettered_shown_and_redriven(
    web: LoopbackWeb, tmp_path: Path
) -> None:
    web.add_host(A, star_site(12))
    out = killed_until_the_plan_is_spent(web, tmp_path, "extract", "/p1.html", "kill " * settings.MAX_CONSECUTIVE_KILLS)
    # The next resume dead-letters the WARC rather than be killed by it again, and finishes the rest.
    run = killable(tmp_path / "plan", "extract", "/p1.html", *resume_argv(out))
    assert run.returncode == 1, run.stderr
    assert "dead-letter queues (extract 1)" in run.stderr and f"dlq show --local {out}" in run.stderr
    log = {e["url"]: e for e in read_jsonl(out / "crawl-log.jsonl")}
    p1 = log[web.url(A, "/p1.html")]
    assert (p1["outcome"], p1["reason"], p1["status"]) == ("failed", HELD_BACK, 200), p1
    held_back = {url for url, e in log.items() if e.get("reason") == HELD_BACK}
    records = {r["url"] for r in read_jsonl(out / "records.jsonl")}
    assert held_back and not held_back & records  # each page of that WARC, and no other
    assert len(held_back) + len(records) == 12, (held_back, records)

    code, shown, _ = dlq("show", "extract", "--local", str(out))
    assert code == 0
    lines = shown.splitlines()
    assert lines[0] == "extract dead-letter queue: 1 messages:", shown
    assert f"({settings.KILLED_WHILE_PROCESSING}): " in lines[1] and "ObjectCreated" in lines[1], shown

    code, moved, _ = dlq("redrive", "--local", str(out))
    assert code == 0 and "extract: moved 1 messages back from its dead-letter queue" in moved, moved
    code, output = _run_in_process(resume_argv(out), CRAWL_TIMEOUT_SECONDS)
    assert code == 0, output
    assert_every_page_has_its_record(web, out)


def test_redrive_is_refused_while_a_crawl_holds_out_and_show_still_reads(web: LoopbackWeb, tmp_path: Path) -> None:
    web.add_host(A, star_site(1))
    out = tmp_path / "out"
    code, output = _run_in_process(crawl_argv(web, tmp_path, out), CRAWL_TIMEOUT_SECONDS)
    assert code == 0, output
    holder = LocalState(out, "resume")  # as a running crawl holds it
    try:
        code, _, err = dlq("redrive", "--local", str(out))
        assert code == 2 and "a crawl is running there" in err and len(err.strip().splitlines()) == 1, err
        code, shown, _ = dlq("show", "--local", str(out))
        assert code == 0 and shown.splitlines() == [f"{key} dead-letter queue: 0 messages" for key in settings.QUEUES]
    finally:
        holder.close()
    code, _, err = dlq("redrive", "--local", str(tmp_path / "nothing"))
    assert code == 2 and "holds no crawl state" in err, err


def test_a_warc_whose_extraction_fails_every_try_says_so_on_its_pages_lines(
    crawl: Crawl, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlstack.extract import Extractor
    from crawlstack.local import runner

    web.add_host(A, star_site(3))
    real_page = Extractor._extract_page

    def extract_page(self: Extractor, archived: Any, *args: Any) -> None:
        if archived.url.endswith("/p1.html"):
            raise RuntimeError("a store that keeps failing")  # the whole WARC's message fails
        real_page(self, archived, *args)

    monkeypatch.setattr(Extractor, "_extract_page", extract_page)
    monkeypatch.setitem(runner.LOCAL_RETRY_SECONDS, "extract", 0)
    result = crawl(web.url(A, "/"), rules=PAGES, delay=0, expect_exit=1)
    tries = settings.QUEUES["extract"].max_receive_count
    log = {e["url"]: e for e in result.log}
    p1 = log[web.url(A, "/p1.html")]
    assert (p1["outcome"], p1["reason"]) == ("failed", f"extraction dead-lettered: {tries} failed tries"), p1
    assert log[web.url(A, "/")]["outcome"] == "fetched"  # its own WARC was extracted
    assert result.summary is not None and result.summary["dead_letter"]["extract"] == 1
