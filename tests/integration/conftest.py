"""Fixtures for the local-crawl integration tests.

``web``: a running, empty :class:`LoopbackWeb`; add hosts with ``web.add_host``.
``crawl``: runs ``crawlstack crawl --local`` (in-process through
``crawlstack.cli.main``, or as a subprocess) and loads its outputs into a
:class:`CrawlResult`.
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from webs import ALLOW_LOOPBACK, UA, Crawl, CrawlResult, read_jsonl, write_rules

from crawlstack.demo.server import LoopbackWeb

# A crawl that hangs kills the test run (with every thread's traceback) rather than CI's whole budget.
CRAWL_TIMEOUT_SECONDS = 120


@pytest.fixture
def web() -> Iterator[LoopbackWeb]:
    with LoopbackWeb() as running:
        yield running


@pytest.fixture
def crawl(tmp_path: Path) -> Crawl:
    runs = iter(range(1000))

    def run(
        *seeds: str,
        rules: Sequence[dict[str, Any]] | Path | None = None,
        delay: float | None = 0.2,
        max_depth: int | None = None,
        max_pages: int | None = None,
        user_agent: str | None = UA,
        seeds_file: Path | None = None,
        extra: Sequence[str] = (),
        use_subprocess: bool = False,
        expect_exit: int | None = 0,
    ) -> CrawlResult:
        n = next(runs)
        out = tmp_path / f"out{n}"
        rules_dir = rules if isinstance(rules, Path) else write_rules(tmp_path / f"rules{n}", rules or [])
        argv = ["crawl", "--local", *seeds, "--rules", str(rules_dir), "--out", str(out), *ALLOW_LOOPBACK]
        if delay is not None:
            argv += ["--delay", str(delay)]
        if max_depth is not None:
            argv += ["--max-depth", str(max_depth)]
        if max_pages is not None:
            argv += ["--max-pages", str(max_pages)]
        if user_agent is not None:
            argv += ["--user-agent", user_agent]
        if seeds_file is not None:
            argv += ["--seeds-file", str(seeds_file)]
        argv += list(extra)

        output = ""
        start = time.monotonic()
        if use_subprocess:
            exe = Path(sys.executable).parent / "crawlstack"
            proc = subprocess.run(
                [str(exe), *argv],
                capture_output=True,
                text=True,
                timeout=CRAWL_TIMEOUT_SECONDS,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                check=False,
            )
            code = proc.returncode
            output = proc.stdout + proc.stderr
        else:
            from crawlstack.cli import main  # imported late: a missing CLI fails the test, not collection

            faulthandler.dump_traceback_later(CRAWL_TIMEOUT_SECONDS, exit=True)
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse errors and explicit exits
                code = exc.code if isinstance(exc.code, int) else 1
            finally:
                faulthandler.cancel_dump_traceback_later()
        elapsed = time.monotonic() - start

        summary_path = out / "summary.json"
        result = CrawlResult(
            argv=argv,
            exit_code=code,
            out=out,
            elapsed=elapsed,
            records=read_jsonl(out / "records.jsonl"),
            log=read_jsonl(out / "crawl-log.jsonl"),
            summary=json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else None,
            warc_files=sorted((out / "warc").glob("*.warc.gz")),
            output=output,
        )
        if expect_exit is not None:
            assert code == expect_exit, f"crawlstack {' '.join(argv)} exited {code}\n{output}"
        return result

    return run
