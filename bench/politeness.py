"""Politeness efficiency: how close a crawl keeps each host to its delay, without going under it.

``--hosts`` loopback hosts (127.0.1.1, 127.0.1.2, ...) of ``--pages`` pages
each, every page linking to every page of its own host, are crawled with
``crawlstack crawl --local SEEDS --delay 0.5`` in this process.  From the
server's own request log, per host (robots.txt counted: the delay covers it
too):

* ideal span = (requests - 1) x delay: back to back at exactly the delay;
* measured span = last arrival - first arrival;
* smallest gap between two consecutive arrivals.

Efficiency is the sum of ideal spans over the sum of measured ones (1.0 is
perfect; below it a host waited longer than its delay); a gap under the delay
would be impolite.

    python bench/politeness.py [--hosts 20] [--pages 10] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import figure, load_average, loopback_address, report

from crawlstack.cli import main as crawlstack
from crawlstack.demo.server import LoopbackWeb, Request

# Issue 14's: crawl-wide, 20 hosts x 10 pages at 0.5 s.
TARGET_EFFICIENCY = 0.95


def site(pages: int) -> Any:
    links = "".join(f'<a href="/{n}.html">page {n}</a> ' for n in range(pages))

    def respond(req: Request) -> str | None:
        stem = req.bare_path.strip("/").removesuffix(".html")
        if not stem.isdigit() or int(stem) >= pages:
            return None  # robots.txt too: a 404, which allows everything
        return f"<html><body><h1>page {stem}</h1>{links}</body></html>"

    return respond


def per_host(arrivals: dict[str, list[float]], delay: float) -> list[dict[str, Any]]:
    rows = []
    for host, times in sorted(arrivals.items()):
        times = sorted(times)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        span = times[-1] - times[0]
        ideal = (len(times) - 1) * delay
        rows.append(
            {
                "host": host,
                "requests": len(times),
                "ideal_s": round(ideal, 3),
                "span_s": round(span, 3),
                "efficiency": round(ideal / span, 3) if span > 0 else None,
                "min_gap_s": round(min(gaps), 3) if gaps else None,
            }
        )
    return rows


FEW_HOSTS = 2


def crawl(hosts: int, pages: int, delay: float) -> tuple[list[dict[str, Any]], float, dict[str, Any]]:
    """Crawl ``hosts`` loopback hosts of ``pages`` pages at ``delay``: per-host rows, wall time, summary."""
    with LoopbackWeb() as web, tempfile.TemporaryDirectory() as out:
        addresses = [loopback_address(i) for i in range(hosts)]
        for address in addresses:
            web.add_host(address, fallback=site(pages))
        seeds = [web.url(address, "/0.html") for address in addresses]
        started = time.perf_counter()
        status = crawlstack(
            ["crawl", "--local", *seeds, "--out", out, "--delay", str(delay), "--max-depth", "10",
             "--allow-private", "127.0.0.0/8", "--no-progress"]
        )  # fmt: skip
        wall = time.perf_counter() - started
        summary = json.loads(Path(out, "summary.json").read_text())
        arrivals: dict[str, list[float]] = defaultdict(list)
        for req in web.log:
            arrivals[req.address].append(req.arrived)
    if status != 0:
        raise SystemExit(f"crawlstack crawl exited {status}")
    return per_host(arrivals, delay), wall, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=10, help="pages per host")
    parser.add_argument("--delay", type=float, default=0.5)
    args = parser.parse_args(argv)
    if args.hosts < 1 or args.pages < 1 or args.delay <= 0:
        parser.error("--hosts and --pages must be at least 1, --delay above 0")
    load_before = load_average()

    rows, wall, summary = crawl(args.hosts, args.pages, args.delay)
    # The same crawl of two hosts: four requests a second, well within what
    # local mode's emulator sustains, so it shows the runs' own precision.
    few_rows, _, _ = crawl(FEW_HOSTS, args.pages, args.delay)
    few = sum(r["ideal_s"] for r in few_rows) / max(1e-9, sum(r["span_s"] for r in few_rows))
    ideal = sum(r["ideal_s"] for r in rows)
    span = sum(r["span_s"] for r in rows)
    efficiency = ideal / span if span > 0 else 0.0
    worst = min(rows, key=lambda r: r["efficiency"] if r["efficiency"] is not None else float("inf"))
    gaps = [r["min_gap_s"] for r in rows if r["min_gap_s"] is not None]
    min_gap = min(gaps) if gaps else None
    expected = args.hosts * (args.pages + 1)
    requests = sum(r["requests"] for r in rows)
    print(f"{requests} requests ({expected} expected) in {wall:.1f} s; efficiency {efficiency:.3f}, min gap {min_gap}")

    method = (
        f"`crawlstack crawl --local --delay {args.delay:g}` (in process, embedded moto) of {args.hosts} loopback "
        f"hosts x {args.pages} pages, each page linking to all of its host's; from the server's request log "
        f"(robots.txt included), per host ideal span (requests - 1) x {args.delay:g} s against last minus first "
        "arrival, and the smallest gap between consecutive requests. One run."
    )
    figures = [
        figure("efficiency, all hosts (ideal / measured span)", round(efficiency, 3), "", f"≥ {TARGET_EFFICIENCY}",
               efficiency >= TARGET_EFFICIENCY),
        figure(f"efficiency, worst host ({worst['host']})", worst["efficiency"] or 0.0, ""),
        figure("smallest gap, any host", min_gap if min_gap is not None else "none", "s" if min_gap else "",
               f"≥ {args.delay:g} s", None if min_gap is None else min_gap >= args.delay),
        figure("requests (robots.txt included)", requests, "", f"= {expected}", requests == expected),
        figure("crawl wall time", round(wall, 1), "s"),
        figure(f"efficiency, {FEW_HOSTS} hosts x {args.pages} pages (within local throughput)", round(few, 3), ""),
    ]  # fmt: skip
    slow = sorted(rows, key=lambda r: r["efficiency"] or 0.0)[:3]
    notes = (
        f"Each host's ideal span is {(args.pages) * args.delay:g} s ({args.pages + 1} requests); the crawl "
        f"took {wall:.1f} s in all, hosts running side by side. Least efficient hosts: "
        + ", ".join(f"{r['host']} {r['efficiency']} ({r['span_s']} s for {r['requests']})" for r in slow)
        + f". All hosts together got {requests / wall:.1f} requests a second where their delays allowed "
        f"{args.hosts / args.delay:g}. Each page links to all of its host's, so a host waits once for its "
        "first page's links: fetched, flushed, extracted and dispatched into its backlog, while its run lingers; "
        "whatever of that takes longer than one delay is lost span (ARCHITECTURE.md, Local mode at scale: "
        "every AWS call of a page runs through the emulator in this process). The same crawl of "
        f"{FEW_HOSTS} hosts, {FEW_HOSTS / args.delay:g} requests a second: {few:.3f}. "
        "Per-host rows are in bench/results/politeness.json (`hosts`, `few_hosts`)."
    )
    report(
        "politeness",
        method,
        figures,
        load_before=load_before,
        notes=notes,
        delay_s=args.delay,
        pages_fetched=summary.get("pages_fetched"),
        outcomes=summary.get("outcomes"),
        hosts=rows,
        few_hosts=few_rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
