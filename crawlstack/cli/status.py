"""``crawlstack status``: queue depths and each crawl's counts, of a deployed stack or of a local crawl's OUT/."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.cli import common
from crawlstack.cli.common import UsageError, print_table
from crawlstack.cli.safe_text import terminal_text
from crawlstack.limits import crawl_id_lookup_flag

# "retrying": a try failed with an HTTP error and the next is scheduled (crawlstack.fetch.outcomes); last,
# as it came last.  "fetching" is written no more (a host's run reads a URL's state instead); the column
# stays for items written before, and for scripts that read it.
URL_STATES = ("queued", "fetching", "fetched", "skipped", "failed", "retrying")


def url_counts(states: Mapping[str, int], crawl: Mapping[str, Any]) -> Counter[str]:
    """A crawl's URLs by state: the urls table's, with the outcomes only the crawl log holds.

    A page fetched or skipped on its first try keeps only its claim
    (``queued``) in the urls table; the crawl item counts those outcomes
    at each flush.  So they move from ``queued`` to their outcome here.
    The counters count tries: after a crash, a page fetched again counts
    twice (and ``queued`` is then that much short, never below zero).
    """
    counts = Counter({state: int(n) for state, n in states.items()})
    for outcome in settings.LOGGED_OUTCOMES:
        logged = int(crawl.get(f"{settings.LOGGED_COUNTER_PREFIX}{outcome}") or 0)
        counts[outcome] += logged
        counts["queued"] = max(0, counts["queued"] - logged)
    return counts


def register(sub: Any) -> None:
    status = sub.add_parser(
        "status",
        parents=[common.stack_options()],
        help="queue depths and a crawl's counts",
        description="Queue depths (visible, in flight, delayed) and dead-letter depths, then URLs per outcome "
        "and records extracted, per crawl or for crawl ID. The counts come from a Scan of the urls and results "
        "tables, which reads every item: its cost grows with the tables (--no-counts skips it). A crawl's state "
        "(running or stopped) and page budget come from the crawls table.",
    )
    status.add_argument(
        "crawl_id", nargs="?", type=crawl_id_lookup_flag, metavar="ID", help="one crawl (default: every crawl)"
    )
    status.add_argument("--no-counts", action="store_true", help="queue depths only: no table scans")
    status.add_argument(
        "--local",
        metavar="OUT_DIR",
        help="a local crawl's OUT/ instead, read without taking its lock (works while the crawl runs)",
    )


def run(args: argparse.Namespace) -> int:
    if args.local:
        from crawlstack.local.backend import StateError
        from crawlstack.local.status import local_status

        try:
            found = local_status(Path(args.local), args.crawl_id)
        except StateError as exc:
            raise UsageError(f"--local: {exc}") from exc
        rows = [[k, q.visible, q.in_flight, q.delayed, d.visible + d.in_flight] for k, (q, d) in found.queues.items()]
        print_table(["queue", "visible", "in flight", "delayed", "dead-lettered"], rows)
        if not args.no_counts:
            _print_crawls(found.url_states, found.extracted, found.crawls, args.crawl_id)
        _print_watch(found.sources)
        return 0
    from crawlstack import aws
    from crawlstack.aws import Queue

    stack = common.stack(args)
    rows = []
    for key in settings.QUEUES:
        queue = Queue(stack.queue_url(key), key, connection=stack.connection)
        dlq = Queue(stack.dlq_url(key), f"{key} DLQ", connection=stack.connection)
        depth, dead = common.queue_depth(queue), common.queue_depth(dlq)
        rows.append([key, depth.visible, depth.in_flight, depth.delayed, dead.visible + dead.in_flight])
    print_table(["queue", "visible", "in flight", "delayed", "dead-lettered"], rows)
    if args.no_counts:
        return 0
    on = stack.connection
    states = aws.UrlStore(stack.table("urls"), connection=on).count_states(args.crawl_id)
    extracted = aws.ResultStore(stack.table("results"), connection=on).count_by_crawl(args.crawl_id)
    configs = aws.CrawlStore(stack.table("crawls"), connection=on).items(args.crawl_id)
    _print_crawls(states, extracted, configs, args.crawl_id)
    watch_table = stack.outputs.get(settings.OUTPUT_TABLE["watch"])
    if watch_table:
        sources = list(aws.DynamoSources(watch_table, connection=on).standings(time.time()))
        schedule = stack.outputs.get(settings.OUTPUT_SCHEDULE)
        if sources and schedule:
            from crawlstack.aws.schedule import schedule_state

            state, expression = schedule_state(stack.connection, schedule)
            print(f"\nwatch: schedule {terminal_text(schedule)} {state.lower()}, {expression}")
        _print_watch(sources)
    return 0


def _print_watch(sources: Sequence[tuple[str, float | None, float | None, float | None, int, int]]) -> None:
    """A watch's sources and where each stands, as ``status`` prints them (nothing without sources)."""
    if not sources:
        return
    from crawlstack.fetch.crawllog import iso_time

    print()
    rows = [
        [sid, _num(priority), _num(tokens), iso_time(nxt)[:19] + "Z" if nxt else "", checks, items]
        for sid, priority, tokens, nxt, checks, items in sources
    ]
    print_table(["source", "checks/day", "tokens", "next check", "checks", "items"], rows)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _print_crawls(
    states: dict[str, Counter[str]], extracted: dict[str, int], configs: dict[str, dict[str, Any]], crawl_id: str | None
) -> None:
    """URLs per state, records and the page budget of each crawl, as ``status`` prints them."""
    crawls = sorted(set(states) | set(extracted) | set(configs) | ({crawl_id} if crawl_id else set()))
    print()
    if not crawls:
        print("no crawl has seen a URL yet")
        return
    rows = []
    for crawl in crawls:
        config = configs.get(crawl, {})
        counts = url_counts(states.get(crawl, {}), config)
        budget = ""
        if config.get("max_pages") is not None:
            budget = f"{config.get('pages_admitted', 0)}/{config['max_pages']}"
        # A crawl without a config item runs on the stack's defaults.
        state = config.get("state", "running")
        rows.append([crawl, state, *(counts.get(s, 0) for s in URL_STATES), extracted.get(crawl, 0), budget])
    print_table(["crawl", "state", *URL_STATES, "extracted", "budget"], rows)
