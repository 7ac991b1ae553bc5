"""The ``crawlstack`` command.

    crawlstack crawl --local SEED_URL... --rules DIR --out DIR [options]
    crawlstack rules validate PATH
    crawlstack rules test RULES_FILE_OR_DIR --url URL [--file SAVED_PAGE]

For a deployed stack (its CloudFormation outputs, ``crawlstack.aws.stack``):

    crawlstack seed URL... [--crawl-id ID] [--seeds-file F]
    crawlstack status [ID] [--local OUT_DIR]
    crawlstack records [--crawl-id ID] [--mapping M | --resolved] [--limit N] [--format jsonl|csv] [--local OUT_DIR]
    crawlstack query "SQL" [--local OUT_DIR]
    crawlstack report OUT_DIR | --crawl-id ID --out FILE
    crawlstack dlq show|redrive [QUEUE] [--local OUT_DIR]
    crawlstack crawl stop|resume ID

Every user mistake (a bad URL, a broken rules file, a bad flag) ends in a
one-line message on stderr and exit status 2, never a traceback; a failure
at run time (an AWS error, a failed query) is one line and exit status 1.

Each command is a module of this package, named as the command, with
``register(sub)`` (its parser) and ``run(args)`` (its exit status); a new
command is a new module and a line in ``COMMANDS``. The heavy imports (boto3,
the local runner, DuckDB, lxml, plotly) stay inside the commands that use
them, so that ``crawlstack --help`` and a mistyped flag answer at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from crawlstack.cli import crawl, crawl_jobs, dlq, query, records, report, rules, seed, sources, status, watch
from crawlstack.cli.common import UsageError, deployed_call
from crawlstack.cli.safe_text import terminal_text
from crawlstack.rules import RulesInvalid


class Command(Protocol):
    """A command's module."""

    def register(self, sub: Any) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# In the order ``crawlstack --help`` lists them.
COMMANDS: dict[str, Command] = {
    module.__name__.rpartition(".")[2]: module
    for module in (crawl, rules, seed, status, records, query, report, dlq, sources, watch)
}
# The commands that may reach a stack: a DeployedError is one line and its exit status.
STACK_COMMANDS = frozenset({"seed", "status", "records", "query", "report", "dlq", "sources"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawlstack", description="A polite, serverless web crawler and scraper.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "crawl" and argv[1] in crawl_jobs.JOB_ACTIONS:
        # Parsed apart: ``crawl`` takes seed URLs as positionals, and
        # ``crawl --local`` must keep working exactly as before.
        return deployed_call(crawl_jobs.run, crawl_jobs.job_parser().parse_args(argv[1:]))
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.command]
    try:
        if args.command in STACK_COMMANDS:
            return deployed_call(command.run, args)
        return command.run(args)
    except RulesInvalid as exc:
        for error in exc.errors:
            print(f"crawlstack: {terminal_text(str(error))}", file=sys.stderr)
        return 2
    except UsageError as exc:
        # Messages may quote a seeds file's or a page's text.
        print(f"crawlstack: error: {terminal_text(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crawlstack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``| head``): stop quietly, as other CLIs do. Python's
        # own flush of stdout at exit would fail again, so stdout goes to the null device first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
