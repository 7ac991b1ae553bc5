"""Politeness efficiency: how close a crawl keeps each host to its delay, without going under it.

Loopback hosts (127.0.1.1, 127.0.1.2, ...) of ``--pages`` pages each,
every page linking to every page of its own host, are crawled with
``crawlstack crawl --local SEEDS --delay D`` in this process.  From the
server's own request log, per host (robots.txt counted: the delay covers it
too):

* ideal span = (requests - 1) x delay: back to back at exactly the delay;
* measured span = last arrival - first arrival;
* smallest gap between two consecutive arrivals.

Efficiency is the sum of ideal spans over the sum of measured ones (1.0 is
perfect; below it a host waited longer than its delay); a gap under the delay
would be impolite.

Two crawls, at issue 15's targets: 20 hosts at 0.5 s and 100 hosts at
1 s; then 2 hosts, for the runs' own precision.

    python bench/politeness.py [--pages 10]
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


# Issue 15's two crawl-wide targets: (hosts, pages per host, delay).
TARGETS = ((20, 10, 0.5), (100, 10, 1.0))


def efficiency_of(rows: list[dict[str, Any]]) -> float:
    span = sum(r["span_s"] for r in rows)
    return sum(r["ideal_s"] for r in rows) / span if span > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=10, help="pages per host")
    args = parser.parse_args(argv)
    if args.pages < 1:
        parser.error("--pages must be at least 1")
    load_before = load_average()

    figures = []
    runs: dict[str, Any] = {}
    notes = []
    for hosts, _, delay in TARGETS:
        rows, wall, summary = crawl(hosts, args.pages, delay)
        efficiency = efficiency_of(rows)
        worst = min(rows, key=lambda r: r["efficiency"] if r["efficiency"] is not None else float("inf"))
        gaps = [r["min_gap_s"] for r in rows if r["min_gap_s"] is not None]
        min_gap = min(gaps) if gaps else None
        expected = hosts * (args.pages + 1)
        requests = sum(r["requests"] for r in rows)
        label = f"{hosts} hosts x {args.pages} pages at {delay:g} s"
        print(f"{label}: {requests} requests in {wall:.1f} s; efficiency {efficiency:.3f}, min gap {min_gap}")
        figures += [
            figure(f"{label}: efficiency, all hosts", round(efficiency, 3), "", f"≥ {TARGET_EFFICIENCY}",
                   efficiency >= TARGET_EFFICIENCY),
            figure(f"{label}: efficiency, worst host", worst["efficiency"] or 0.0, ""),
            figure(f"{label}: smallest gap, any host", min_gap if min_gap is not None else "none",
                   "s" if min_gap else "", f"≥ {delay:g} s", None if min_gap is None else min_gap >= delay),
            figure(f"{label}: requests (robots.txt included)", requests, "", f"= {expected}", requests == expected),
            figure(f"{label}: crawl wall time", round(wall, 1), "s"),
        ]  # fmt: skip
        slow = sorted(rows, key=lambda r: r["efficiency"] or 0.0)[:3]
        notes.append(
            f"{label}: each host's ideal span is {args.pages * delay:g} s ({args.pages + 1} requests); the crawl "
            f"took {wall:.1f} s, hosts side by side, {requests / wall:.1f} requests a second where the delays "
            f"allowed {hosts / delay:g}. Least efficient hosts: "
            + ", ".join(f"{r['host']} {r['efficiency']} ({r['span_s']} s for {r['requests']})" for r in slow)
            + "."
        )
        runs[f"{hosts}x{args.pages}@{delay:g}"] = {"rows": rows, "outcomes": summary.get("outcomes")}
    few_rows, _, _ = crawl(FEW_HOSTS, args.pages, TARGETS[0][2])
    few = efficiency_of(few_rows)
    few_label = f"{FEW_HOSTS} hosts x {args.pages} pages at {TARGETS[0][2]:g} s"
    figures.append(figure(f"{few_label}: efficiency", round(few, 3), ""))
    runs["few"] = {"rows": few_rows}

    method = (
        "`crawlstack crawl --local --delay D` (in process, on the local backend) of loopback hosts x "
        f"{args.pages} pages, each page linking to all of its host's; from the server's request log "
        "(robots.txt included), per host ideal span (requests - 1) x D against last minus first arrival, "
        "crawl-wide the sum of ideal spans over the sum of measured ones, and the smallest gap between "
        "consecutive requests. One run of each."
    )
    notes.append(
        "Each page links to all of its host's, so a host waits once for its first page's links: fetched, "
        "flushed, extracted and dispatched into its backlog while its run lingers; whatever of that takes "
        "longer than one delay is lost span. Per-host rows are in bench/results/politeness.json (`runs`)."
    )
    report("politeness", method, figures, load_before=load_before, notes=" ".join(notes), runs=runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
