"""Local mode at scale: a 100,000-page crawl of a 1,000-host web, its memory and its CPU per page over time.

A generated web on ``--hosts`` loopback addresses (127.0.1.1, ...), tree
shaped: page n of a host links to its 10 children (new URLs) and to
``CROSS_LINKS`` pages of other hosts, so every page fetched discovers about
ten new URLs and the crawl meets ten times as many URLs as its
``--max-pages`` budget lets it fetch.  Pages are ``--page-kb`` KB of text.

``crawlstack crawl --local SEEDS --delay 0 --max-pages N`` runs as a
subprocess; the web is served from this process.  Every half second this
samples the crawl's CPU seconds (``/proc/PID/stat``: user + system) and
resident memory (``VmRSS``) beside the pages the server has answered so far,
and at the end its peak RSS (``getrusage(RUSAGE_CHILDREN)``) and the
crawl's own summary.json.  CPU per page over the first and the last 10% of
pages is interpolated from the samples.

    python bench/scale.py [--hosts 1000] [--max-pages 100000] [--page-kb 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import checkout_env, figure, load_average, loopback_address, report

from crawlstack.demo.server import LoopbackWeb, Request
from crawlstack.local.metrics import metric_total

CHILDREN = 10
CROSS_LINKS = 2
# Issue 15's targets.
TARGET_RSS_MIB = 1024
TARGET_CPU_GROWTH = 1.2
SAMPLE_SECONDS = 0.5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def site(host: int, hosts: int, page_bytes: int) -> Any:
    filler = ("<p>" + "crawlstack scale benchmark filler text. " * 25 + "</p>\n") * max(1, page_bytes // 1040)

    def respond(req: Request) -> str | None:
        stem = req.bare_path.strip("/").removesuffix(".html")
        if not stem.isdigit():
            return None
        n = int(stem)
        rnd = random.Random(host * 1_000_003 + n)
        # Its children are new URLs; the others' pages it names are older ones (n > m), met already or soon.
        links = [f"/{n * CHILDREN + i}.html" for i in range(1, CHILDREN + 1)]
        links += [
            f"{{{{url:{loopback_address(rnd.randrange(hosts))}}}}}/{rnd.randrange(max(1, n))}.html"
            for _ in range(CROSS_LINKS)
        ]
        anchors = "".join(f'<li><a href="{href}">page</a></li>' for href in links)
        head = f"<html><head><title>page {n}</title></head><body><h1>page {n}</h1>"
        return f"{head}{filler}<ul>{anchors}</ul></body></html>"

    return respond


def proc_sample(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, RSS bytes) of process ``pid`` now; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    rss = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return cpu, rss


def cpu_at(samples: list[tuple[float, int, float, int]], pages: int) -> float:
    """CPU seconds when the server had answered ``pages`` pages, interpolated between samples."""
    before = max((s for s in samples if s[1] <= pages), key=lambda s: s[1], default=samples[0])
    after = min((s for s in samples if s[1] >= pages), key=lambda s: s[1], default=samples[-1])
    if after[1] == before[1]:
        return before[2]
    share = (pages - before[1]) / (after[1] - before[1])
    return before[2] + share * (after[2] - before[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--max-pages", type=int, default=100_000)
    parser.add_argument("--page-kb", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args(argv)
    load_before = load_average()

    with LoopbackWeb() as web, tempfile.TemporaryDirectory(prefix="crawlstack-scale-") as out:
        for i in range(args.hosts):
            web.add_host(loopback_address(i), fallback=site(i, args.hosts, args.page_kb * 1024))
        seeds = [web.url(loopback_address(i), "/0.html") for i in range(args.hosts)]
        seeds_file = Path(out) / "seeds.jsonl"
        seeds_file.write_text("".join(json.dumps({"url": s}) + "\n" for s in seeds))
        crawl_out = Path(out) / "out"
        cmd = [sys.executable, "-m", "crawlstack.cli", "crawl", "--local", "--seeds-file", str(seeds_file),
               "--out", str(crawl_out), "--delay", "0", "--max-depth", "1000", "--max-pages", str(args.max_pages),
               "--allow-private", "127.0.0.0/8", "--no-progress"]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.Popen(cmd, env=checkout_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples: list[tuple[float, int, float, int]] = []  # (seconds, pages answered, CPU seconds, RSS)
        while proc.poll() is None:
            got = proc_sample(proc.pid)
            pages = max(0, web.count() - args.hosts)  # less one robots.txt a host (nearly all asked for it early)
            if got is not None:
                samples.append((time.monotonic() - started, pages, *got))
            if time.monotonic() - started > args.timeout:
                proc.kill()
                break
            time.sleep(SAMPLE_SECONDS)
        stdout, stderr = proc.communicate()
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError(f"crawl exited {proc.returncode}: {(stderr or stdout).strip().splitlines()[-1:]}")
        summary = json.loads((crawl_out / "summary.json").read_text(encoding="utf-8"))
        peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        links = metric_total(crawl_out / "metrics.jsonl", "OutlinksFound")
        state_bytes = sum(p.stat().st_size for p in crawl_out.rglob("*") if p.is_file())

    fetched = int(summary["pages_fetched"])
    tenth = fetched // 10
    first = cpu_at(samples, tenth) - cpu_at(samples, 0)
    last = cpu_at(samples, fetched) - cpu_at(samples, fetched - tenth)
    growth = last / first if first > 0 else float("inf")
    total_cpu = samples[-1][2] if samples else 0.0
    rss_mib = peak_rss / 2**20
    print(f"{fetched} pages in {wall:.1f} s, {total_cpu:.0f} CPU s, peak RSS {rss_mib:.0f} MiB, growth {growth:.2f}")

    method = (
        f"`crawlstack crawl --local --delay 0 --max-pages {args.max_pages}` as a subprocess, of a generated "
        f"tree-shaped web on {args.hosts} loopback hosts served from the benchmark's own process (each page "
        f"{args.page_kb} KB, linking to {CHILDREN} new pages of its host and {CROSS_LINKS} of other hosts). "
        "CPU seconds and RSS of the crawl's process sampled every 0.5 s from /proc beside the pages the server "
        "had answered; peak RSS from getrusage(RUSAGE_CHILDREN). One run."
    )
    figures = [
        figure("pages fetched", fetched, "", f"≥ {args.max_pages}", fetched >= args.max_pages),
        figure("crawl wall time", round(wall, 1), "s"),
        figure("pages a second", round(fetched / wall, 1), "pages/s"),
        figure("CPU seconds a page, whole crawl", round(total_cpu / max(1, fetched) * 1000, 2), "ms"),
        figure("CPU a page, last 10% / first 10%", round(growth, 2), "x", f"≤ {TARGET_CPU_GROWTH}",
               growth <= TARGET_CPU_GROWTH),
        figure("peak RSS of the crawl", round(rss_mib), "MiB", f"≤ {TARGET_RSS_MIB}", rss_mib <= TARGET_RSS_MIB),
        figure("URLs met: new links found (10 a page)", fetched * CHILDREN, "", "≥ 1,000,000 at 100,000 pages",
               fetched * CHILDREN >= 1_000_000),
        figure("links found (extract's OutlinksFound)", int(links), ""),
        figure("URLs in the crawl log", int(summary["urls"]), ""),
        figure("OUT/ on disk", round(state_bytes / 2**20), "MiB"),
    ]  # fmt: skip
    notes = (
        f"CPU a page: {first / max(1, tenth) * 1000:.2f} ms over the first {tenth} pages, "
        f"{last / max(1, tenth) * 1000:.2f} ms over the last {tenth}. The page budget admits {args.max_pages} "
        f"URLs; every page fetched links to {CHILDREN} new ones, so about {args.max_pages * CHILDREN:,} URLs are "
        "met and all but the budget's are dropped by dispatch (`metrics.jsonl` counts them)."
    )
    report(
        "scale",
        method,
        figures,
        load_before=load_before,
        notes=notes,
        samples=[[round(t, 1), p, round(c, 2), r // 2**20] for t, p, c, r in samples],
        outcomes=summary.get("outcomes"),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
