"""``crawlstack watch --local OUT``: re-check a watch's sources on their schedule, new items to OUT/events.jsonl."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crawlstack import limits
from crawlstack.cli.common import UsageError
from crawlstack.cli.options import add_settings, given_settings
from crawlstack.cli.safe_text import terminal_text
from crawlstack.limits import integer_flag, number_flag


def register(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="re-check a watch's sources on their schedule, publishing new items to OUT/events.jsonl",
        description="Re-check the sources in OUT (crawlstack sources add) on their schedule until stopped, "
        "through the crawl's handlers and politeness; each new item is one line of OUT/events.jsonl. "
        "Run it again to resume: a flag not given is the watch's own from its last run, and a simulation goes on "
        "as it was.",
    )
    watch.add_argument("--local", metavar="OUT_DIR", required=True, help="the watch's output directory")
    watch.add_argument(
        "--checks-per-day",
        type=integer_flag(limits.CHECKS_PER_DAY),
        metavar="N",
        help="a day's budget of checks for all sources together (default: no budget)",
    )
    watch.add_argument(
        "--simulate-days",
        type=number_flag(limits.SIMULATE_DAYS, stored=False),
        metavar="N",
        help="run N simulated days, then stop; simulated time is --sim-start + --speed x wall time elapsed "
        "(run again, a simulation goes on to its own end)",
    )
    watch.add_argument(
        "--speed",
        type=number_flag(limits.SIMULATION_SPEED, stored=False),
        metavar="X",
        help="simulated seconds per wall second (default 1; run again, the simulation's own unless given)",
    )
    watch.add_argument(
        "--sim-start",
        type=limits.time_flag(limits.SIM_START_YEARS),
        metavar="ISO8601",
        help="the simulation's start, in the years {} to {} (default: now)".format(*limits.SIM_START_YEARS),
    )
    # No defaults here: a flag not given is the watch's own from its last run (WatchSettings).
    add_settings(watch, "watch", defaults=False)
    watch.add_argument(
        "--concurrency", type=integer_flag(limits.CONCURRENCY), default=8, metavar="N", help="concurrent fetch batches"
    )
    watch.add_argument("--no-progress", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    # The local stack (the handlers, SQLite): only when watching.
    from crawlstack.local.backend import StateError
    from crawlstack.local.sqlite.db import StorageFull
    from crawlstack.local.watch import WatchOptions, watch_local

    options = WatchOptions(
        out=args.local,
        checks_per_day=args.checks_per_day,
        given=given_settings(args, "watch"),
        simulate_days=args.simulate_days,
        speed=args.speed,
        sim_start=args.sim_start,
        fetch_concurrency=args.concurrency,
        progress=not args.no_progress,
    )
    try:
        done = watch_local(options)
    except StateError as exc:
        raise UsageError(str(exc)) from exc
    except StorageFull as exc:
        print(
            f"crawlstack: error: {terminal_text(str(exc))}; the watch stopped: make room, then run it again",
            file=sys.stderr,
        )
        return 1
    print(
        f"watched until {done['sim_reached'][:19]}Z: {done['checks_sent']} checks sent, {done['checks_done']} done, "
        f"{done['items_seen']} items seen -> {args.local}/events.jsonl"
    )
    return 130 if done["interrupted"] else 0
