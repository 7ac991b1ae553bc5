"""Watching sources: a simulated week of 1,000 sources on 50 hosts, judged from the servers' logs and events.jsonl.

Each source is a listing on a loopback host whose items arrive as a Poisson
process in simulated time, at a rate log-uniform over a 100x span; 10% of
sources post 10x faster from halfway.  The servers read the watch's clock
from ``OUT/clock.json`` (as ``crawlstack watch`` writes it), show the items
that have arrived by then, newest first, 20 to a page (``?page=N``), answer
a conditional GET with 304 when nothing arrived since the ETag, and ask in
robots.txt for a Crawl-delay of 1 to 3 simulated seconds.  One run:

    crawlstack sources add --file (1,000 sources, pagination page)
    crawlstack watch --simulate-days 7 --speed S --checks-per-day 3000

killed with SIGKILL halfway through and run again, as a user would resume.

The figures, from what the servers logged (in simulated time) and the events:

1. politeness: the smallest gap between two requests to a host over its
   Crawl-delay (>= 1); on hosts with >= 48 checks a day, the busiest hour
   over ceil(the hour's even share) + 1 (<= 1);
2. priority follows yield: Spearman's rank correlation of checks against
   posting rate, over sources with >= 3 checks (>= 0.8); of the sources
   whose rate rose with a new priority >= 0.5, the share that reached half
   their new check frequency within 3 simulated days;
3. freshness: the median latency from post to publish, against a uniform
   schedule with the same number of checks (the anchor: >= 2x better);
4. exactly once: items any check was shown but never published, and
   events published twice (0 and 0), across the kill;
5. quiet sources: the share of checks that ended in a 304.

    python bench/watch.py [--speed 1200] [--days 7] [--sources 1000] [--hosts 50]
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

from crawlstack.demo.server import LoopbackWeb, Request, Response

DAY = 86_400.0
PER_PAGE = 20
BUDGET = 3000
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
            current = rate * (10 if rises and t >= half else 1)
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


def run_watch(out: Path, argv: list[str], kill_after: float | None) -> None:
    cli = [str(Path(sys.executable).parent / "crawlstack"), "watch", "--local", str(out), *argv]
    env = checkout_env()
    if kill_after is not None:
        proc = subprocess.Popen(cli, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        time.sleep(kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    subprocess.run(cli, env=env, check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--speed", type=float, default=1200.0)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args(argv)
    load_before = load_average()
    rng = random.Random(args.seed)
    hosts = [loopback_address(200 + i) for i in range(args.hosts)]
    delays = {h: rng.choice((1.0, 2.0, 3.0)) for h in hosts}
    start = time.time()
    sources = [
        Source(i, hosts[i % args.hosts], 10 ** rng.uniform(math.log10(0.5), math.log10(50)), rng.random() < 0.1,
               start, args.days, rng)
        for i in range(args.sources)
    ]  # fmt: skip
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
                 "priority_min": 0.5, "priority_max": 24.0}
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
    return judge(args, sources, delays, web.log, events, start, wall, load_before)


def judge(
    args: argparse.Namespace,
    sources: list[Source],
    delays: dict[str, float],
    log: list[tuple[str, float, str, int, list[int]]],
    events: list[dict[str, Any]],
    start: float,
    wall: float,
    load_before: float | None,
) -> int:
    by_path = {s.path: s for s in sources}
    # 1. politeness, in simulated time.
    times: dict[str, list[float]] = defaultdict(list)
    checks_by_source: dict[str, list[float]] = defaultdict(list)
    not_modified = 0
    for host, at, path, status, _ in log:
        times[host].append(at)
        bare = path.split("?", 1)[0]
        if bare in by_path and "page=" not in path:
            checks_by_source[bare].append(at)
            not_modified += status == 304
    gaps = {h: min(b - a for a, b in itertools.pairwise(sorted(ts))) for h, ts in times.items() if len(ts) > 1}
    ratio = min(gap / delays[h] for h, gap in gaps.items())
    worst_hour = 0.0
    for host in times:
        host_checks = sorted(t for p, ts in checks_by_source.items() if by_path[p].host == host for t in ts)
        for day in range(int(args.days)):
            in_day = [t for t in host_checks if start + day * DAY <= t < start + (day + 1) * DAY]
            if len(in_day) < 48:
                continue
            hours = Counter(int((t - start - day * DAY) // 3600) for t in in_day)
            worst_hour = max(worst_hour, max(hours.values()) / (math.ceil(len(in_day) / 24) + 1))
    # 2. priority follows yield.
    checked = [
        (len(checks_by_source[s.path]), s.rate * (5.5 if s.rises else 1))
        for s in sources
        if len(checks_by_source[s.path]) >= 3
    ]
    rho = spearman([float(c) for c, _ in checked], [r for _, r in checked])
    half = start + args.days * DAY / 2
    reached, rose = 0, 0
    for s in sources:
        if not s.rises:
            continue
        after = sorted(t for t in checks_by_source[s.path] if t >= half)
        last_days = [t for t in after if t >= half + (args.days / 2 - 2) * DAY]
        new_freq = len(last_days) / 2  # checks a day over the last two days
        if new_freq < 0.5:
            continue
        rose += 1
        window = [t for t in after if t < half + 3 * DAY]
        best = max((sum(1 for u in window if t <= u < t + DAY) for t in window), default=0)
        reached += best >= new_freq / 2
    # 3. freshness against a uniform schedule of the same number of checks.
    published = {(e["source_id"], e["identity"]): e for e in events}
    latencies = []
    for (source_id, identity), event in published.items():
        source = sources[int(source_id[1:])]
        index = int(identity.rsplit("/", 1)[-1])
        latencies.append(datetime.fromisoformat(event["published_at"]).timestamp() - source.arrivals[index])
    total_checks = sum(len(v) for v in checks_by_source.values())
    period = args.days * DAY * len(sources) / max(total_checks, 1)
    uniform = []
    for s in sources:
        offset = (s.index / len(sources)) * period
        for a in s.arrivals:
            k = math.ceil((a - start - offset) / period)
            uniform.append(start + offset + k * period - a)
    ours, anchor = statistics.median(latencies), statistics.median(uniform)
    # 4. exactly once.
    shown = {
        (f"s{by_path[p.split('?', 1)[0]].index}", i)
        for _, _, p, st, items in log
        if st == 200 and p.split("?", 1)[0] in by_path
        for i in items
    }
    got = Counter((e["source_id"], int(e["identity"].rsplit("/", 1)[-1])) for e in events)
    missed = len(shown - set(got))
    twice = sum(1 for n in got.values() if n > 1)
    figures = [
        figure("smallest host gap / Crawl-delay (simulated)", round(ratio, 3), "x", ">= 1", ratio >= 1 - 1e-6),
        figure("busiest hour / (ceil(even share) + 1)", round(worst_hour, 3), "x", "<= 1", worst_hour <= 1),
        figure("Spearman: checks vs posting rate (>= 3 checks)", round(rho, 3), "", ">= 0.8", rho >= 0.8),
        figure("rate risen: reached half new frequency in 3 days", f"{reached}/{rose}", "", "all", reached == rose),
        figure("median post-to-publish latency (hours)", round(ours / 3600, 2), "h", None, None),
        figure("uniform schedule, same checks (anchor, hours)", round(anchor / 3600, 2), "h", None, None),
        figure("freshness gain over uniform", round(anchor / ours, 2), "x", ">= 2", anchor / ours >= 2),
        figure("items shown but never published", missed, "", "0", missed == 0),
        figure("events published twice", twice, "", "0", twice == 0),
        figure("checks ending in 304", round(not_modified / max(total_checks, 1), 3), "", None, None),
        figure("checks (first pages) / events", f"{total_checks} / {len(events)}", "", None, None),
        figure("wall time", round(wall, 1), "s", None, None),
    ]
    method = (
        f"{len(sources)} sources on {args.hosts} loopback hosts, rates log-uniform 0.5-50 items/day (10% x10 from "
        f"halfway), a simulated {args.days:g}-day week at --speed {args.speed:g}, --checks-per-day {BUDGET}, "
        "Crawl-delay 1-3 simulated s; killed with SIGKILL halfway and run again; judged from the servers' logs "
        "(simulated times) and events.jsonl"
    )
    report("watch", method, figures, load_before=load_before)
    for f in figures:
        print(f"{f['label']}: {f['value']}{f['unit']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
