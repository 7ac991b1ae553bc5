"""``crawlstack records --local OUT`` and ``status --local OUT``: a local crawl as the deployed commands print it."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from webs import Crawl, host_pattern, mapping, star_site

from crawlstack.demo.server import LoopbackWeb
from crawlstack.local.backend import LocalState

A = "127.0.0.2"
RULES = [
    mapping("page", host_pattern(A, r"/p\d+\.html"), {"title": "//h1/text()"}),
    mapping("index", host_pattern(A, r"/"), {"title": "//h1/text()"}),
]


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "crawlstack"
    return subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60, check=False)


def records(*argv: str) -> subprocess.CompletedProcess[str]:
    return cli("records", *argv)


def test_records_local_prints_a_crawls_records_as_jsonl_or_csv(crawl: Crawl, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(3))
    result = crawl(web.url(A, "/"), rules=RULES, delay=0)
    out = str(result.out)

    printed = records("--local", out)
    assert printed.returncode == 0, printed.stderr
    # As the deployed results table gives them: without records.jsonl's "numbers", a copy for the query tables.
    expected = [{k: v for k, v in r.items() if k != "numbers"} for r in result.records]
    assert [json.loads(line) for line in printed.stdout.splitlines()] == expected

    pages = records("--local", out, "--mapping", "page", "--limit", "2")
    assert [json.loads(line)["mapping"] for line in pages.stdout.splitlines()] == ["page", "page"]

    table = list(csv.reader(io.StringIO(records("--local", out, "--format", "csv").stdout)))
    assert table[0][:2] == ["mapping", "url"] and "fields.title" in table[0] and len(table) == 1 + len(result.records)


def test_records_local_of_a_directory_with_no_crawl_is_one_line_and_exit_2(tmp_path: Path) -> None:
    printed = records("--local", str(tmp_path))
    assert printed.returncode == 2 and printed.stderr.count("\n") == 1 and "records.jsonl" in printed.stderr


def status_counts(out: Path) -> dict[str, str]:
    shown = cli("status", "--local", str(out))
    assert shown.returncode == 0, shown.stderr
    queues, crawls = shown.stdout.split("\n\n")
    assert [line.split()[0] for line in queues.splitlines()[2:]] == ["frontier", "fetch", "extract"]
    header, _, row = crawls.splitlines()
    return dict(zip(header.split(), row.split(), strict=False))


def test_status_local_reads_the_state_even_while_a_crawl_holds_it(crawl: Crawl, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(3))
    result = crawl(web.url(A, "/"), rules=RULES, delay=0)
    assert result.summary is not None
    state = LocalState(result.out, "resume")  # as a running crawl has it: the lock taken
    writer = sqlite3.connect(result.out / "state.sqlite", isolation_level=None)
    try:
        # ... and a write under way: status neither waits for it nor needs the lock.
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE crawls SET item = item")
        running = status_counts(result.out)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        state.close()
    assert running["crawl"] == result.summary["crawl_id"] and running["state"] == "running"
    assert int(running["fetched"]) == result.summary["pages_fetched"] == 4
    assert int(running["extracted"]) == len(result.records)
    assert status_counts(result.out)["state"] == "finished"


def test_status_local_of_a_directory_with_no_crawl_is_one_line_and_exit_2(tmp_path: Path) -> None:
    shown = cli("status", "--local", str(tmp_path))
    assert shown.returncode == 2 and shown.stderr.count("\n") == 1 and "state.sqlite" in shown.stderr
