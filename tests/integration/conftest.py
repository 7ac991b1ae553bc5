"""Fixtures for the local-crawl integration tests.

``handler_loggers`` (session, automatic): the handlers' loggers, built before any test.
``stack``: the stack's queues, tables and bucket on the embedded emulator, their
names in the environment as the Lambdas see them (no rules loaded);
``stack_names``: the same names as the adapters take them.
``web``: a running, empty :class:`LoopbackWeb`; add hosts with ``web.add_host``.
``crawl``: runs ``crawlstack crawl --local`` (in-process through
``crawlstack.cli.main``, or as a subprocess) and loads its outputs into a
:class:`CrawlResult`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from webs import ALLOW_LOOPBACK, UA, Crawl, CrawlResult, describe, read_jsonl, write_rules

from crawlstack import aws, settings
from crawlstack.demo.server import LoopbackWeb
from crawlstack.local import faulty, resources
from crawlstack.local.emulator import EmbeddedAws
from functions import container

# A crawl that takes longer fails its test (with the server log and the crawl's stack) instead of hanging the run.
CRAWL_TIMEOUT_SECONDS = float(os.environ.get("CRAWLSTACK_ITEST_TIMEOUT", "60"))


# Set once an in-process crawl timed out: its thread still runs and holds the emulator, so later
# crawls in this process run as subprocesses instead.
_leaked_crawls: list[threading.Thread] = []


def _run_in_process(argv: list[str], timeout: float) -> tuple[int | None, str]:
    """Run ``crawlstack.cli.main(argv)`` in a daemon thread; (exit code or None on timeout, diagnostics)."""
    from crawlstack.cli import main  # imported late: a missing CLI fails the test, not collection

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["code"] = main(argv)
        except SystemExit as exc:  # argparse errors and explicit exits
            outcome["code"] = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            outcome["error"] = traceback.format_exc()

    thread = threading.Thread(target=target, name="crawlstack-cli", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        _leaked_crawls.append(thread)
        frame = sys._current_frames().get(thread.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(no stack)"
        return None, f"crawl still running after {timeout:.0f}s; its stack:\n{stack}"
    if "error" in outcome:
        return 1, outcome["error"]
    return int(outcome.get("code") or 0), ""


@pytest.fixture(scope="session", autouse=True)
def handler_loggers() -> None:
    """Build the handlers' Powertools loggers once, before any test, on the session's stdout.

    They are process-wide (named loggers: a later ``for_service`` reuses the first's setup) and each
    keeps the stream that was ``sys.stdout`` when it was built, as in Lambda.
    Left to the run's first in-process crawl, they kept that test's capsys
    stream, which closes when the test ends: every later crawl then failed on
    it ("I/O operation on closed file", LogMeter flushing the handler's stream).
    """
    from crawlstack.lambdas.observability import for_service

    for function in settings.FUNCTIONS:
        for_service(function)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    monkeypatch.setenv(settings.ENV_RULES_DIR, "")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    # The adapters' default connection (the environment's) finds moto through these; EmbeddedAws writes none.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with EmbeddedAws():
        container.reset()
        names = resources.create_all(visibility_timeout=30)
        for key, value in names.items():
            monkeypatch.setenv(key, value)
        try:
            yield names
        finally:
            container.reset()


@pytest.fixture
def stack_names(stack: dict[str, str]) -> aws.StackNames:
    """The names of ``stack``'s resources, read as the handlers read them (``aws.StackNames``)."""
    return aws.StackNames.from_env(stack)


@pytest.fixture
def web() -> Iterator[LoopbackWeb]:
    with LoopbackWeb() as running:
        yield running


@pytest.fixture
def crawl(tmp_path: Path, web: LoopbackWeb) -> Crawl:
    """Run a local crawl; a timeout or an unexpected exit code fails the test with ``web``'s request log."""
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
        server: LoopbackWeb | None = None,
    ) -> CrawlResult:
        served = server or web
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
        if use_subprocess or _leaked_crawls:
            exe = Path(sys.executable).parent / "crawlstack"
            try:
                proc = subprocess.run(
                    [str(exe), *argv],
                    capture_output=True,
                    text=True,
                    timeout=CRAWL_TIMEOUT_SECONDS,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    check=False,
                )
                code: int | None = proc.returncode
                output = proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as exc:
                code, output = None, f"killed after {exc.timeout:.0f}s"
        else:
            code, output = _run_in_process(argv, CRAWL_TIMEOUT_SECONDS)
        elapsed = time.monotonic() - start
        if code is None:
            pytest.fail(f"crawlstack {' '.join(argv)}\n{output}\nserver log:\n{describe(served.log)}")

        summary_path = out / "summary.json"
        result = CrawlResult(
            argv=argv,
            exit_code=int(code),
            out=out,
            elapsed=elapsed,
            records=read_jsonl(out / "records.jsonl"),
            log=read_jsonl(out / "crawl-log.jsonl"),
            summary=json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else None,
            warc_files=sorted((out / "warc").glob("*.warc.gz")),
            output=output,
        )
        if expect_exit is not None:
            assert code == expect_exit, (
                f"crawlstack {' '.join(argv)} exited {code}\n{output}\nserver log:\n{describe(served.log)}"
            )
        if code == 0 and result.summary is not None:
            # Every crawl ends with all its work done: nothing parked, nothing
            # in a dead-letter queue, no URL left unfinished.
            assert result.summary["parked_left"] == 0, result.summary
            assert not any(result.summary["dead_letter"].values()), result.summary
            unfinished = [e for e in result.log if "unfinished" in str(e.get("reason", ""))]
            assert not unfinished, unfinished
        return result

    return run


@pytest.fixture
def moto_server() -> Iterator[str]:
    """A moto server on a free loopback port, for crawls with ``--endpoint-url``; its URL."""
    with faulty.moto_server() as url:
        yield url
