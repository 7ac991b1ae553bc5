"""``crawlstack crawl stop|resume ID``: stop or resume a crawl of a deployed stack.

Parsed apart from ``crawl`` (``crawlstack.cli.main`` routes it first): ``crawl``
takes seed URLs as positionals, and ``crawl --local`` must keep working exactly as before.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from crawlstack import settings
from crawlstack.cli import common
from crawlstack.limits import crawl_id_flag

if TYPE_CHECKING:
    from crawlstack.aws import StackNames

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
    from crawlstack import aws, jobs
    from crawlstack.deployed import aws_errors

    stack = common.stack(args)
    outputs = {settings.ENV_TABLE[key]: stack.table(key) for key in settings.TABLES}
    outputs |= {settings.ENV_QUEUE_URL[key]: stack.queue_url(key) for key in settings.QUEUES}
    outputs[settings.ENV_BUCKET] = stack.output(settings.OUTPUT_BUCKET)
    names = aws.StackNames.from_env(outputs)
    env: dict[str, str] = {}
    if args.endpoint_url:
        env["AWS_ENDPOINT_URL"] = args.endpoint_url
    if args.region:
        env["AWS_DEFAULT_REGION"] = args.region
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    aws.reset_clients()
    try:
        with aws_errors(f"crawl {args.action} {args.crawl_id}"):
            return _run_job(args, names)
    except jobs.UnknownCrawl:
        print(f"crawlstack: error: the stack's crawls table has no crawl {args.crawl_id!r}", file=sys.stderr)
        return 2
    finally:
        aws.reset_clients()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_job(args: argparse.Namespace, names: StackNames) -> int:
    from crawlstack import wiring

    if args.action == "stop":
        wiring.stop_crawl(args.crawl_id, names)
        print(
            f"stopped {args.crawl_id}: no new request within {jobs_bound()} s; "
            f"its work is held until 'crawlstack crawl resume {args.crawl_id}'"
        )
    else:
        sent = wiring.resume_crawl(args.crawl_id, names)
        print(f"resumed {args.crawl_id}: {sent} held message{'' if sent == 1 else 's'} or task sent back")
    return 0
