"""``crawlstack crawl --local``: run a crawl in this process, state and outputs in --out.

``crawl stop|resume ID`` (a deployed crawl) is parsed apart: ``crawlstack.cli.crawl_jobs``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from crawlstack import limits
from crawlstack.cli.common import UsageError
from crawlstack.cli.options import add_settings, check_config_size, given_settings, ranges_help
from crawlstack.cli.safe_text import terminal_text
from crawlstack.cli.seed import read_seeds
from crawlstack.config import CrawlConfig
from crawlstack.limits import integer_flag
from crawlstack.local.options import LocalOptions
from crawlstack.rules import load_rules

# ``crawl --local``'s exit status when it fetched no page at all: a crawl that ran but reached nothing.
NOTHING_FETCHED = 3

# What ``crawl --local --resume`` may be given besides itself; everything else comes from the saved crawl.
RESUME_FLAGS = frozenset({"local", "resume", "out", "no_progress", "concurrency"})


def register(sub: Any) -> None:
    crawl = sub.add_parser(
        "crawl",
        help="run a crawl",
        description="Run a crawl locally, in this process. Its state is kept in OUT/state.sqlite, so a crawl "
        "that was stopped or killed goes on with --resume.",
        epilog=ranges_help("crawl"),
    )
    crawl.add_argument("seeds", nargs="*", metavar="SEED_URL", help="URLs to start from (depth 0)")
    crawl.add_argument("--local", action="store_true", help="run in this process (state and outputs in --out)")
    crawl.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished crawl in --out with its own seeds, rules and settings "
        "(only --out, --no-progress and --concurrency may be given)",
    )
    crawl.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh where --out holds an earlier crawl: remove what it wrote (and nothing else)",
    )
    crawl.add_argument(
        "--emulate-aws",
        action="store_true",
        help="run the handlers on the AWS adapters against moto in this process (fidelity mode; no resume)",
    )
    crawl.add_argument("--rules", metavar="DIR", help="directory of JSON mapping rules (or one file)")
    crawl.add_argument("--out", metavar="DIR", required=True, help="output directory")
    add_settings(crawl, "crawl", defaults=True)
    crawl.add_argument("--seeds-file", metavar="FILE", help='JSON lines: {"url", "record_id"?, "want"?}')
    crawl.add_argument(
        "--endpoint-url", metavar="URL", help="use this AWS-compatible endpoint instead of the embedded one"
    )
    crawl.add_argument(
        "--concurrency", type=integer_flag(limits.CONCURRENCY), default=8, metavar="N", help="concurrent fetch batches"
    )
    crawl.add_argument(
        "--extract-concurrency",
        type=integer_flag(limits.CONCURRENCY),
        default=1,
        metavar="N",
        help="concurrent extract invocations (default 1); deployed, extract scales out, and more "
        "instances send more duplicate links to dispatch",
    )
    crawl.add_argument("--no-progress", action="store_true", help="no progress display even on a terminal")


def run(args: argparse.Namespace) -> int:
    from crawlstack.local.runner import crawl_local, resume_local  # the whole local stack: only when crawling

    if not args.local:
        raise UsageError(
            "only local crawls run from here (--local); to crawl with a deployed stack, "
            "seed it with `crawlstack seed URL...` (see README)"
        )
    if args.resume:
        if args.emulate_aws or args.endpoint_url:
            raise UsageError("--resume continues a crawl on local state; not with --emulate-aws or --endpoint-url")
        extra = _flags_given(args)
        if extra:
            raise UsageError(
                f"--resume takes its seeds, rules and settings from {args.out}; not {', '.join(extra)} "
                "(only --out, --no-progress and --concurrency)"
            )
        resumed = LocalOptions(
            rules_dir=None,
            out_dir=args.out,
            fetch_concurrency=args.concurrency,
            progress=False if args.no_progress else None,
        )
        return _run_crawl(args, lambda: resume_local(resumed))
    if args.rules and not Path(args.rules).exists():
        raise UsageError(f"rules: {args.rules}: no such file or directory")
    # Every problem up front, before any request.
    ruleset = load_rules(args.rules, check_schema=True) if args.rules else None
    seeds = read_seeds(args, ruleset)
    given = given_settings(args, "crawl")
    check_config_size("crawl", given)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    options = LocalOptions(
        rules_dir=args.rules,
        out_dir=args.out,
        config=CrawlConfig().with_values(**given),
        endpoint_url=args.endpoint_url,
        fetch_concurrency=args.concurrency,
        extract_concurrency=args.extract_concurrency,
        progress=False if args.no_progress else None,
        emulate_aws=args.emulate_aws,
        overwrite=args.overwrite,
    )
    return _run_crawl(args, lambda: crawl_local(seeds, options))


def _flags_given(args: argparse.Namespace) -> list[str]:
    """The ``crawl`` options (and seeds) ``args`` sets to other than their defaults, as the user spells them."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    defaults = vars(parser.parse_args(["crawl", "--out", "-"]))
    return [
        "SEED_URL" if dest == "seeds" else "--" + dest.replace("_", "-")
        for dest, value in vars(args).items()
        if dest in defaults and value != defaults[dest] and dest not in RESUME_FLAGS
    ]


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``timeout``, ``kill``, a container stopping) stops a local crawl as Ctrl-C does.

    Without this the process died at once and OUT/ held nothing, not even the
    crawl log of what was fetched.  A second SIGTERM, like a second Ctrl-C,
    abandons the batches still finishing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_crawl(args: argparse.Namespace, crawl: Callable[[], dict[str, Any]]) -> int:
    """Run ``crawl``, then print its one-line summary and any warnings; the exit code."""
    from crawlstack.local.backend import StateError
    from crawlstack.local.sqlite.db import StorageFull

    try:
        with _terminate_as_interrupt():
            summary = crawl()
    except StateError as exc:
        raise UsageError(str(exc)) from None
    except StorageFull as exc:
        # Without a local state (--emulate-aws, --endpoint-url) there is nothing to resume.
        again = f"crawlstack crawl --local --resume --out {args.out}"
        if args.emulate_aws or args.endpoint_url:
            again = "run it again with --overwrite"
        print(
            f"crawlstack: error: {terminal_text(str(exc))}; the crawl stopped: make room, then {again}", file=sys.stderr
        )
        return 1
    except Exception as exc:
        if not _endpoint_failure(exc):
            raise
        endpoint = args.endpoint_url or "(embedded)"
        print(f"crawlstack: error: AWS endpoint {endpoint} unreachable or failing: {exc}", file=sys.stderr)
        return 1
    outcomes = summary["outcomes"]
    print(
        f"crawled {summary['pages_fetched']} pages in {summary['elapsed_seconds']:.1f}s: "
        f"{summary['records']} records, {outcomes.get('skipped', 0)} skipped, {outcomes.get('failed', 0)} failed, "
        f"{outcomes.get('dropped', 0)} dropped -> {args.out}"
    )
    _print_endings(summary, args.out)
    if summary["handler_errors"]:
        print(
            f"warning: {len(summary['handler_errors'])} handler errors, "
            f"first: {terminal_text(str(summary['handler_errors'][0]))}",
            file=sys.stderr,
        )
    dead = {queue: n for queue, n in summary["dead_letter"].items() if n}
    if dead:
        # Dead-lettered messages are work the crawl never did (records or links lost): not a success.
        counts = ", ".join(f"{queue} {n}" for queue, n in sorted(dead.items()))
        where = "summary.json" if args.emulate_aws or args.endpoint_url else f"crawlstack dlq show --local {args.out}"
        print(f"crawlstack: warning: messages went to dead-letter queues ({counts}); see {where}", file=sys.stderr)
        return 1
    if not summary["pages_fetched"]:
        print("crawlstack: no page was fetched (see the hints above and the crawl log)", file=sys.stderr)
        return NOTHING_FETCHED
    return 0


def _print_endings(summary: dict[str, Any], out: str) -> None:
    """The top reasons for each outcome, the guards that kept the crawl from URLs, and where to look next."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    reasons = summary.get("top_reasons") or {}
    if any(reasons.values()):
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        table.add_column("outcome")
        table.add_column("URLs", justify="right")
        table.add_column("reason")
        for outcome, rows in reasons.items():
            for reason, count in rows:
                table.add_row(outcome, str(count), terminal_text(reason))
        console.print(table)
    for hint in summary.get("guards") or []:
        console.print(f"hint: {terminal_text(hint)}")
    if _fresh(Path(out) / "report.html", Path(out) / "summary.json"):
        console.print(f"report: {out}/report.html (plots)")
    console.print(f"details: {out}/crawl-log.jsonl (a line a URL), {out}/summary.json")


def _fresh(path: Path, since: Path) -> bool:
    """``path`` exists and was written no earlier than ``since`` (a report that failed leaves an older one)."""
    try:
        return path.stat().st_mtime >= since.stat().st_mtime
    except OSError:
        return False


def _endpoint_failure(exc: BaseException) -> bool:
    """The AWS endpoint could not be reached, or kept failing: a runtime failure, not a bug."""
    from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

    from crawlstack.local.pump import EndpointUnavailable

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return status >= 500 or "Throttl" in str(error.get("Code", ""))
    return isinstance(exc, EndpointConnectionError | ConnectionClosedError | EndpointUnavailable)
