"""``crawlstack crawl stop|resume ID``: stop or resume a crawl of a deployed stack.

Parsed apart from ``crawl`` (``crawlstack.cli.main`` routes it first): ``crawl``
takes seed URLs as positionals, and ``crawl --local`` must keep working exactly as before.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from crawlstack.cli import common
from crawlstack.limits import crawl_id_flag

if TYPE_CHECKING:
    from crawlstack.aws import Connection, StackNames

JOB_ACTIONS = ("stop", "resume")


def job_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawlstack crawl",
        parents=[common.stack_options()],
        description="Stop or resume a crawl of a deployed stack. A stopped crawl makes no new request within "
        f"{jobs_bound()} s; its messages and tasks are held in DynamoDB until resume sends each back once.",
    )
    parser.add_argument("action", choices=JOB_ACTIONS)
    parser.add_argument("crawl_id", type=crawl_id_flag, metavar="ID", help="the crawl's id")
    return parser


def jobs_bound() -> str:
    from crawlstack import jobs

    return f"{jobs.STATE_CACHE_SECONDS:g}"


def run(args: argparse.Namespace) -> int:
    """``crawl stop|resume ID``: the jobs API on the resources the stack's outputs name, through ``crawlstack.aws``."""
    from crawlstack import jobs
    from crawlstack.aws.errors import aws_errors

    stack = common.stack(args)
    names = stack.names()
    try:
        with aws_errors(f"crawl {args.action} {args.crawl_id}"):
            return _run_job(args, names, stack.connection)
    except jobs.UnknownCrawl:
        print(f"crawlstack: error: the stack's crawls table has no crawl {args.crawl_id!r}", file=sys.stderr)
        return 2


def _run_job(args: argparse.Namespace, names: StackNames, connection: Connection) -> int:
    from crawlstack import wiring

    if args.action == "stop":
        wiring.stop_crawl(args.crawl_id, names, connection)
        print(
            f"stopped {args.crawl_id}: no new request within {jobs_bound()} s; "
            f"its work is held until 'crawlstack crawl resume {args.crawl_id}'"
        )
    else:
        sent = wiring.resume_crawl(args.crawl_id, names, connection)
        print(f"resumed {args.crawl_id}: {sent} held message{'' if sent == 1 else 's'} or task sent back")
    return 0
