"""What several commands share: the usage error, argument types, the stack's options, tables on the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from crawlstack import limits, settings
from crawlstack.cli.safe_text import terminal_text
from crawlstack.limits import integer_flag, number_flag

if TYPE_CHECKING:
    from crawlstack.aws import Queue
    from crawlstack.aws.stack import Stack
    from crawlstack.queueing import Depth


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line."""


# Every numeric flag has a finite range (crawlstack.limits): a value past what
# DynamoDB or the crawl can take is a usage error here, not a traceback mid-crawl.
list_limit_flag = integer_flag(limits.LIST_LIMIT)


# --- a deployed stack -------------------------------------------------------------


def stack_options() -> argparse.ArgumentParser:
    """The options every command for a deployed stack takes."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("stack")
    group.add_argument(
        "--stack",
        default=settings.STACK_NAME,
        metavar="NAME",
        help=f"the deployed stack whose outputs name the resources (default {settings.STACK_NAME})",
    )
    group.add_argument("--region", metavar="REGION", help="AWS region (default: AWS_REGION or your AWS config)")
    group.add_argument("--endpoint-url", metavar="URL", help="an AWS-compatible endpoint (moto server) instead of AWS")
    return common


def add_athena_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=number_flag(limits.QUERY_TIMEOUT_SECONDS, stored=False),
        default=settings.QUERY_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"cancel an Athena query still running after this long (default {settings.QUERY_TIMEOUT_SECONDS:g})",
    )


def stack(args: argparse.Namespace) -> Stack:
    """The stack ``--stack`` names, through its outputs, on a connection to ``--region`` and ``--endpoint-url``.

    Commands call it as ``common.stack``: one place where a test stands a fake stack in for every command.
    """
    from crawlstack.aws import Connection  # boto3: only for commands that reach a stack
    from crawlstack.aws.stack import Stack

    return Stack(Connection(args.region, args.endpoint_url), args.stack)


def queue_depth(queue: Queue) -> Depth:
    """A stack's queue's depth (``crawlstack.aws.Queue``); its failure is one line naming the queue."""
    from crawlstack.aws.errors import aws_errors

    with aws_errors(f"queue {queue.url}"):
        return queue.depth()


def deployed_call(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a deployed-stack command; its DeployedError is one line on stderr and its exit status."""
    from crawlstack.aws.errors import DeployedError

    try:
        return command(args)
    except DeployedError as exc:
        print(f"crawlstack: error: {terminal_text(str(exc))}", file=sys.stderr)
        return exc.status


# --- tables on the terminal -------------------------------------------------------


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if not columns:  # a statement without a result set (DDL)
        return
    # Page text reaches the terminal here: no escape sequence of it may.
    columns = [terminal_text(c) for c in columns]
    cells = [[terminal_text(cell(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells if i < len(r))]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)).rstrip())


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)
