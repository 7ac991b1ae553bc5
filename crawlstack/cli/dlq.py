"""``crawlstack dlq show|redrive``: a stack's (or a local crawl's) dead-letter queues."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.cli import common
from crawlstack.cli.common import UsageError, list_limit_flag
from crawlstack.cli.safe_text import terminal_text


def register(sub: Any) -> None:
    common_options = common.stack_options()
    dlq = sub.add_parser("dlq", help="inspect or redrive dead-letter queues")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)
    queues = list(settings.QUEUES)
    show = dlq_sub.add_parser(
        "show",
        parents=[common_options],
        help="print dead-lettered messages without removing them",
        description="Print messages of a dead-letter queue (receive count, sent time, body) and leave them there.",
    )
    show.add_argument("queue", nargs="?", choices=queues, metavar="QUEUE", help=f"one of {', '.join(queues)}")
    show.add_argument("--limit", type=list_limit_flag, default=10, metavar="N", help="messages per queue (default 10)")
    show.add_argument("--local", metavar="OUT_DIR", help="a local crawl's dead-letter queues instead")
    redrive = dlq_sub.add_parser(
        "redrive",
        parents=[common_options],
        help="move dead-lettered messages back to their queue",
        description="Move messages from a dead-letter queue back to its source queue: each batch is sent, "
        "and deleted from the DLQ only once the send succeeded.",
    )
    redrive.add_argument("queue", nargs="?", choices=queues, metavar="QUEUE", help=f"one of {', '.join(queues)}")
    redrive.add_argument("--limit", type=list_limit_flag, metavar="N", help="move at most N messages per queue")
    redrive.add_argument(
        "--local", metavar="OUT_DIR", help="a local crawl's instead (refused while it runs); then crawl --resume"
    )


def run(args: argparse.Namespace) -> int:
    from crawlstack.aws import Queue

    if args.local:
        return _dlq_local(args)
    stack = common.stack(args)
    keys = [args.queue] if args.queue else list(settings.QUEUES)
    status = 0
    for key in keys:
        dlq = Queue(stack.dlq_url(key), f"{key} DLQ", connection=stack.connection)
        if args.dlq_command == "show":
            peeked = dlq.peek(args.limit)
            print(f"{key} dead-letter queue: {common.queue_depth(dlq).visible} messages" + (":" if peeked else ""))
            for m in peeked:
                sent = datetime.fromtimestamp(m.sent_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                print(f"  received {m.receive_count}x, sent {sent}: {terminal_text(m.body)}")
        else:
            moved = dlq.move_to(Queue(stack.queue_url(key), key, connection=stack.connection), args.limit)
            print(f"{key}: moved {moved.moved} messages back from its dead-letter queue")
            for failure in moved.failed:
                print(f"crawlstack: {key}: not moved: {terminal_text(str(failure))}", file=sys.stderr)
            status = status or (1 if moved.failed else 0)
    return status


def _dlq_local(args: argparse.Namespace) -> int:
    """``dlq show|redrive --local OUT``: as for a stack, on a local crawl's state (``local.dead_letters``)."""
    from crawlstack.local import dead_letters
    from crawlstack.local.backend import StateError

    out = Path(args.local)
    keys = [args.queue] if args.queue else list(settings.QUEUES)
    try:
        if args.dlq_command == "show":
            for shown in dead_letters.show(out, keys, args.limit):
                print(f"{shown.key} dead-letter queue: {shown.total} messages" + (":" if shown.letters else ""))
                for m in shown.letters:
                    sent = datetime.fromtimestamp(m.sent_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                    why = f" ({terminal_text(m.reason)})" if m.reason else ""
                    print(f"  received {m.receive_count}x, sent {sent}{why}: {terminal_text(m.body)}")
            return 0
        moved = dead_letters.redrive(out, keys, args.limit)
    except StateError as exc:
        raise UsageError(f"--local: {exc}") from None
    for key, count in moved.items():
        print(f"{key}: moved {count} messages back from its dead-letter queue")
    if any(moved.values()):
        print(f"next: crawlstack crawl --local --resume --out {out}")
    return 0
