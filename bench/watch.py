"""Watching sources: a simulated week of 1,000 sources on 50 hosts, judged from the servers' logs and events.jsonl.

Each source is a listing on a loopback host whose items arrive as a Poisson
process in simulated time, at a rate log-uniform over a 100x span
(``RATES``); 10% of sources post 10x faster from halfway.  The servers read
the watch's clock from ``OUT/clock.json`` (as ``crawlstack watch`` writes
it), show the items that have arrived by then, newest first, 20 to a page
(``?page=N``), answer a conditional GET with 304 when nothing arrived since
the ETag, and ask in robots.txt for a Crawl-delay of 1 to 3 simulated
seconds.  One run:

    crawlstack sources add --file (1,000 sources, pagination page)
    crawlstack watch --simulate-days 7 --speed S --checks-per-day 3000

killed with SIGKILL halfway through, then ``crawlstack watch --local OUT``
with no other flag, as a user would resume.

The figures, from what the servers logged (in simulated time) and the events
(the arithmetic: bench/watch_judge.py):

1. politeness: the smallest gap between two requests to a host over its
   Crawl-delay (>= 1); on hosts with >= 48 checks a day, the busiest hour
   over ceil(the hour's even share) + 1 (<= 1);
2. priority follows yield: Spearman's rank correlation of checks against
   posting rate, over sources with >= 3 checks (>= 0.8); of the sources
   whose rate jumped, the share whose checks in some 24 hours within 3 days
   of the jump reached the geometric mean of their check frequencies before
   it and at the week's end (>= 80%);
3. freshness: the median latency from an item's arrival to the first
   response that showed it (an item never shown counts as the latest),
   within 1.15x of an oracle's: the same number of checks a day, given each
   source in proportion to the square root of its true rate (known for each
   half of the week), evenly spaced, seeing the same posts;
4. deeper pages (page 2 and on) that showed nothing new, over all requests
   (<= 5%);
5. exactly once: items any check was shown but never published, and events
   published twice (0 and 0), across the kill; the resumed run with no flag
   goes on to the simulation's end at its speed;
6. quiet sources: the share of checks that ended in a 304.

    python bench/watch.py [--speed 1200] [--days 7] [--sources 1000] [--hosts 50] [--seed 28]
        [--rates 0.2 20] [--priority-min P]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from common import checkout_env, figure, load_average, loopback_address, report
from watch_judge import deeper_waste, detections, median, oracle, reached

from crawlstack.demo.server import LoopbackWeb, Request, Response
from crawlstack.watch.plan_clock import PlanClock

DAY = 86_400.0
PER_PAGE = 20
BUDGET = 3000
# Items a day a source posts, log-uniform between these (a 100x span); a jump multiplies it by JUMP.
RATES = (0.2, 20.0)
JUMP = 10
PRIORITY_MAX = 24.0
# How much more than the √rate oracle's median detection latency the watch may take.
ORACLE_TARGET = 1.15
RULES = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": "/s/\\d+"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [
        {"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]},
        {"name": "posted", "processors": [{"type": "css", "parameters": {"selector": "time"}}, {"type": "to_number"}]},
    ],
}


class Clock:
    """The watch's simulated clock, read from OUT/clock.json as a server under test would."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, float] | None = None
        self.mtime = 0.0

    def now(self) -> float | None:
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return None
        if mtime != self.mtime:
            self.data, self.mtime = json.loads(self.path.read_text()), mtime
        assert self.data is not None
        return self.data["sim_start"] + self.data["speed"] * (time.time() - self.data["wall_start"])


class Source:
    def __init__(self, index: int, host: str, rate: float, rises: bool, start: float, days: float, rng: random.Random):
        self.index, self.host, self.rate, self.rises = index, host, rate, rises
        self.path = f"/s/{index}"
        self.arrivals: list[float] = []
        t, half = start, start + days * DAY / 2
        while True:
            current = rate * (JUMP if rises and t >= half else 1)
            t += rng.expovariate(current / DAY)
            if t >= start + days * DAY:
                break
            self.arrivals.append(t)


class Web:
    """The sources' listings, their robots.txt, and a log of what each request was shown (simulated times)."""

    def __init__(self, sources: list[Source], delays: dict[str, float], clock: Clock) -> None:
        self.sources = {s.path: s for s in sources}
        self.delays = delays
        self.clock = clock
        self.lock = threading.Lock()
        self.log: list[tuple[str, float, str, int, list[int]]] = []  # host, sim time, path, status, items shown

    def respond(self, host: str) -> Any:
        def answer(request: Request) -> Any:
            now = self.clock.now()
            if request.bare_path == "/robots.txt":
                with self.lock:
                    self.log.append((host, now or 0.0, "/robots.txt", 200, []))
                return Response(f"User-agent: *\nCrawl-delay: {self.delays[host]:g}\n", content_type="text/plain")
            source = self.sources.get(request.bare_path)
            if source is None or now is None:
                return None
            count = bisect.bisect_right(source.arrivals, now)
            etag = f'"{count}"'
            sent = {k.lower(): v for k, v in request.headers.items()}
            if sent.get("if-none-match") == etag:
                with self.lock:
                    self.log.append((host, now, request.path, 304, []))
                return Response(b"", status=304, headers={"ETag": etag})
            query = dict(parse_qsl(request.query))
            page = int(query["page"]) if query.get("page", "").isdigit() else 1
            newest = list(range(count - 1, -1, -1))[(page - 1) * PER_PAGE : page * PER_PAGE]
            with self.lock:
                self.log.append((host, now, request.path, 200, newest))
            items = "".join(
                f'<li><a href="{source.path}/{i}">{i}</a> <time>{source.arrivals[i]:.3f}</time></li>' for i in newest
            )
            return Response(f"<html><body><ul>{items}</ul></body></html>", headers={"ETag": etag})

        return answer


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    spread = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / spread if spread else 0.0  # every source checked as often: no ranking at all


def run_watch(out: Path, argv: list[str], kill_after: float) -> None:
    """The watch with ``argv``, killed after ``kill_after`` seconds, then run again with no flag but ``--local``."""
    cli = [str(Path(sys.executable).parent / "crawlstack"), "watch", "--local", str(out)]
    env = checkout_env()
    proc = subprocess.Popen([*cli, *argv], env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    time.sleep(kill_after)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    subprocess.run([*cli, "--no-progress"], env=env, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--speed", type=float, default=1200.0)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--rates", type=float, nargs=2, default=RATES, metavar=("LOW", "HIGH"), help="items a day")
    parser.add_argument("--priority-min", type=float, default=None, help="each source's (default: the default)")
    args = parser.parse_args(argv)
    load_before = load_average()
    rng = random.Random(args.seed)
    hosts = [loopback_address(200 + i) for i in range(args.hosts)]
    delays = {h: rng.choice((1.0, 2.0, 3.0)) for h in hosts}
    start = time.time()
    low, high = (math.log10(r) for r in args.rates)
    sources = [
        Source(i, hosts[i % args.hosts], 10 ** rng.uniform(low, high), rng.random() < 0.1, start, args.days, rng)
        for i in range(args.sources)
    ]
    with tempfile.TemporaryDirectory(prefix="crawlstack-watch-bench-") as tmp:
        work = Path(tmp)
        out = work / "out"
        clock = Clock(out / "clock.json")
        web = Web(sources, delays, clock)
        with LoopbackWeb() as loop:
            for host in hosts:
                loop.add_host(host, fallback=web.respond(host))
            rules = work / "rules"
            rules.mkdir()
            (rules / "listing.json").write_text(json.dumps(RULES))
            lines = [
                {"url": loop.url(s.host, s.path), "mapping": "listing", "id": f"s{s.index}", "pagination": "page",
                 "priority_max": PRIORITY_MAX}
                | ({"priority_min": args.priority_min} if args.priority_min is not None else {})
                for s in sources
            ]  # fmt: skip
            (work / "sources.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
            cli = [
                str(Path(sys.executable).parent / "crawlstack"),
                "sources",
                "add",
                "--file",
                str(work / "sources.jsonl"),
            ]
            subprocess.run([*cli, "--rules", str(rules), "--local", str(out)], env=checkout_env(), check=True)
            sim_start = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(start))
            watch = [
                *("--simulate-days", f"{args.days:g}", "--speed", f"{args.speed:g}", "--sim-start", sim_start),
                *("--checks-per-day", str(BUDGET), "--delay", "1", "--allow-private", "127.0.0.0/8", "--no-progress"),
            ]
            wall = time.monotonic()
            run_watch(out, watch, kill_after=args.days * DAY / args.speed / 2)
            wall = time.monotonic() - wall
            events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
            resumed = json.loads((out / "clock.json").read_text())
            with sqlite3.connect(out / "state.sqlite") as db:
                clock = db.execute("SELECT anchor, at, rate FROM plan_clock").fetchone()
                (day_end,) = db.execute("SELECT day_end FROM watch_day").fetchone()
            # How much later than planned the last day ends, after stalls re-spread the days.
            resumed["moved"] = PlanClock(*clock).real(day_end) - day_end if clock else 0.0
    return judge(args, sources, delays, web.log, events, start, wall, resumed, load_before)


def judge(
    args: argparse.Namespace,
    sources: list[Source],
    delays: dict[str, float],
    log: list[tuple[str, float, str, int, list[int]]],
    events: list[dict[str, Any]],
    start: float,
    wall: float,
    resumed: dict[str, float],
    load_before: float | None,
) -> int:
    by_path = {s.path: s for s in sources}
    end, half = start + args.days * DAY, start + args.days * DAY / 2
    # 1. politeness, in simulated time.
    times: dict[str, list[float]] = defaultdict(list)
    checks_by_source: dict[str, list[float]] = defaultdict(list)
    shown = []
    not_modified = 0
    for host, at, path, status, items in log:
        times[host].append(at)
        bare, _, query = path.partition("?")
        if bare not in by_path:
            continue
        page = dict(parse_qsl(query)).get("page", "1")
        shown.append((at, bare, int(page) if page.isdigit() else 1, items))
        if "page=" not in path:
            checks_by_source[bare].append(at)
            not_modified += status == 304
    gaps = {h: min(b - a for a, b in itertools.pairwise(sorted(ts))) for h, ts in times.items() if len(ts) > 1}
    ratio = min(gap / delays[h] for h, gap in gaps.items())
    worst_hour, worst_at = 0.0, ""
    for host in times:
        host_checks = sorted(t for p, ts in checks_by_source.items() if by_path[p].host == host for t in ts)
        for day in range(int(args.days)):
            in_day = [t for t in host_checks if start + day * DAY <= t < start + (day + 1) * DAY]
            if len(in_day) < 48:
                continue
            (hour, most), *_ = Counter(int((t - start - day * DAY) // 3600) for t in in_day).most_common(1)
            if most / (math.ceil(len(in_day) / 24) + 1) > worst_hour:
                worst_hour = most / (math.ceil(len(in_day) / 24) + 1)
                worst_at = f"{host}, day {day} hour {hour}: {most} of {len(in_day)} checks"
    # 2. priority follows yield.
    checked = [
        (len(checks_by_source[s.path]), s.rate * ((1 + JUMP) / 2 if s.rises else 1))
        for s in sources
        if len(checks_by_source[s.path]) >= 3
    ]
    rho = spearman([float(c) for c, _ in checked], [r for _, r in checked])
    hit, jumped = reached(checks_by_source, [s.path for s in sources if s.rises], half, end)
    # 3. freshness: detection against the √rate oracle with as many checks a day.
    arrivals = {s.path: s.arrivals for s in sources}
    ours = detections(shown, arrivals)
    total_checks = sum(len(v) for v in checks_by_source.values())
    stretches = {s.path: [(start, half, s.rate), (half, end, s.rate * (JUMP if s.rises else 1))] for s in sources}
    best = oracle(arrivals, stretches, total_checks / args.days, end, seed=args.seed)
    ours_median, best_median = median(ours), median(best)
    gap = ours_median / best_median
    published = []
    for event in events:
        source = sources[int(event["source_id"][1:])]
        index = int(event["identity"].rsplit("/", 1)[-1])
        published.append(datetime.fromisoformat(event["published_at"]).timestamp() - source.arrivals[index])
    # 4. deeper pages that found nothing new.
    wasted = deeper_waste(shown)
    requests = len(log)
    # 5. exactly once.
    shown_items = {(by_path[p].index, i) for _, p, _, items in shown for i in items}
    got = Counter((int(e["source_id"][1:]), int(e["identity"].rsplit("/", 1)[-1])) for e in events)
    missed = len(shown_items - set(got))
    twice = sum(1 for n in got.values() if n > 1)
    last_request = max(at for _, at, _, _, _ in log)
    went_on = resumed.get("speed") == args.speed and last_request >= end - DAY / 24
    figures = [
        figure("smallest host gap / Crawl-delay (simulated)", round(ratio, 3), "x", ">= 1", ratio >= 1 - 1e-6),
        figure("busiest hour / (ceil(even share) + 1)", round(worst_hour, 3), "x", "<= 1", worst_hour <= 1),
        figure("busiest hour: where", worst_at, "", None, None),
        figure("Spearman: checks vs posting rate (>= 3 checks)", round(rho, 3), "", ">= 0.8", rho >= 0.8),
        figure("rate jumped: reached the geometric-mean frequency in 3 days", f"{hit}/{jumped}", "", ">= 80%",
               hit >= 0.8 * jumped),
        figure("median detection latency (hours)", round(ours_median / 3600, 2), "h", None, None),
        figure("sqrt-rate oracle, same checks (anchor, hours)", round(best_median / 3600, 2), "h", None, None),
        figure("detection latency / oracle's", round(gap, 3), "x", f"<= {ORACLE_TARGET}", gap <= ORACLE_TARGET),
        figure("median post-to-publish latency (hours)", round(statistics.median(published) / 3600, 2), "h", None,
               None),
        figure("items never shown by the week's end (ours / oracle)",
               f"{sum(math.isinf(x) for x in ours)} / {sum(math.isinf(x) for x in best)}", "", None, None),
        figure("deeper pages with nothing new / requests", round(wasted / requests, 4), "", "<= 0.05",
               wasted / requests <= 0.05),
        figure("items shown but never published", missed, "", "0", missed == 0),
        figure("events published twice", twice, "", "0", twice == 0),
        figure("resumed with no flag: same speed, on to the end", "yes" if went_on else "no", "", "yes", went_on),
        figure("plan's end moved later by stalls (simulated hours)", round(resumed["moved"] / 3600, 2), "h", None,
               None),
        figure("checks ending in 304", round(not_modified / max(total_checks, 1), 3), "", None, None),
        figure("checks (first pages) / events / requests", f"{total_checks} / {len(events)} / {requests}", "", None,
               None),
        figure("wall time", round(wall, 1), "s", None, None),
    ]  # fmt: skip
    method = (
        f"{len(sources)} sources on {args.hosts} loopback hosts, rates log-uniform {args.rates[0]:g}-{args.rates[1]:g} "
        f"items/day (10% x{JUMP} from halfway), seed {args.seed}, priority_max {PRIORITY_MAX:g}"
        + (f", priority_min {args.priority_min:g}" if args.priority_min is not None else "")
        + ", a simulated "
        f"{args.days:g}-day week at --speed {args.speed:g}, --checks-per-day {BUDGET}, Crawl-delay 1-3 simulated s; "
        "killed with SIGKILL halfway and run again with `watch --local OUT` alone; judged from the servers' logs "
        "(simulated times) and events.jsonl (bench/watch_judge.py)"
    )
    report("watch", method, figures, load_before=load_before)
    for f in figures:
        print(f"{f['label']}: {f['value']}{f['unit']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
