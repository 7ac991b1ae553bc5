"""crawlstack against Scrapy, on Scrapy's own benchmark server: wall time for the same number of pages.

Scrapy's benchmark server (``python -m scrapy.utils.benchserver``, port
8998) answers every URL with a page of 20 random links into 100,000 URLs.
One after the other, in this run:

1. ``scrapy bench -s CLOSESPIDER_TIMEOUT=0 -s CLOSESPIDER_PAGECOUNT=N`` in a
   temporary directory (it starts and kills its own server); its pages are
   the stats' ``response_received_count``;
2. the server started here, then ``crawlstack crawl --local URL --delay 0
   --max-pages N ...`` from the same start URL as Scrapy's spider; its pages
   are ``summary.json``'s ``pages_fetched``.

Then both crawl a generated web served from this process: ``--hosts``
loopback hosts of real-sized pages (30 to 60 KB of text, each linking to
ten pages of its host and two of others), the whole web and nothing more:
Scrapy with a spider that follows every link within those hosts
(``scrapy runspider``, robots.txt obeyed, its other defaults), crawlstack
with ``crawl --local SEEDS --delay 0``.  Pages are counted from the
server's log.

Both are timed as subprocesses (``time.perf_counter`` around each), so each
includes its interpreter's start.  If something else already serves port
8998 (``scrapy bench`` has it hard-coded), both crawls use that server and
the result says so.

    python bench/scrapy_compare.py [--pages 1000] [--hosts 20]
"""

from __future__ import annotations

import argparse
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from common import ROOT, checkout_env, figure, load_average, loopback_address, port_in_use, report

PORT = 8998
START_URL = f"http://localhost:{PORT}/?total=100000&show=20"
# Issue 15's: at most Scrapy's wall time; stretch 0.75.
TARGET_RATIO = 1.0
STRETCH_RATIO = 0.75
WEB_LINKS = 10
WEB_CROSS_LINKS = 2

SPIDER = """
import json, os
import scrapy
from scrapy.linkextractors import LinkExtractor

class WebSpider(scrapy.Spider):
    name = "web"
    start_urls = json.loads(os.environ["BENCH_SEEDS"])
    allowed_domains = json.loads(os.environ["BENCH_HOSTS"])
    links = LinkExtractor()

    def parse(self, response):
        for link in self.links.extract_links(response):
            yield response.follow(link.url, self.parse)
"""


def scrapy_bench(pages: int, timeout: float) -> dict[str, Any]:
    """Run ``scrapy bench`` for ``pages`` pages; its wall time and final stats."""
    cmd = [
        sys.executable, "-m", "scrapy", "bench",
        "-s", "CLOSESPIDER_TIMEOUT=0", "-s", f"CLOSESPIDER_PAGECOUNT={pages}", "-s", "LOG_LEVEL=INFO",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="scrapy-bench-") as tmp:
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=timeout, check=False)
        wall = time.perf_counter() - started
    log = proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"scrapy bench exited {proc.returncode}: {_last_line(log)}")
    stats = log.rsplit("Dumping Scrapy stats:", 1)[-1] if "Dumping Scrapy stats:" in log else ""
    received = _stat(stats, "response_received_count")
    if received is None:
        raise RuntimeError(f"no response_received_count in scrapy bench's stats: {_last_line(log)}")
    elapsed = _stat(stats, "elapsed_time_seconds")
    reason = re.search(r"'finish_reason': '([^']*)'", stats)
    return {
        "command": " ".join(cmd[2:]),
        "wall_s": round(wall, 2),
        "pages": int(received),
        "crawl_s": elapsed,  # Scrapy's own elapsed_time_seconds: the crawl without start-up and shutdown
        "finish_reason": reason.group(1) if reason else None,
        "requests": _stat(stats, "downloader/request_count"),
    }


def _stat(stats: str, key: str) -> float | None:
    match = re.search(rf"'{re.escape(key)}': ([0-9.]+)", stats)
    if not match:
        return None
    number = float(match.group(1))
    return int(number) if number.is_integer() else number


def _seconds(value: float | None) -> str:
    return "not reported" if value is None else f"{value:.1f} s"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


class BenchServer:
    """``python -m scrapy.utils.benchserver``, started and stopped here."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> BenchServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "scrapy.utils.benchserver"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
        deadline = time.monotonic() + 30
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            seen.append(line.strip())
            if line.startswith("Bench server at"):
                return self
        self.__exit__()
        raise RuntimeError(f"the benchmark server did not start: {seen[-1] if seen else 'no output'}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def crawlstack_crawl(pages: int, timeout: float) -> dict[str, Any]:
    """``crawlstack crawl --local`` of the benchmark server for ``pages`` pages; wall time and summary."""
    import json

    with tempfile.TemporaryDirectory(prefix="crawlstack-bench-") as out:
        args = [
            "crawl", "--local", START_URL, "--out", out, "--max-pages", str(pages), "--delay", "0",
            "--allow-private", "127.0.0.0/8", "--max-depth", "100000", "--no-progress",
        ]  # fmt: skip
        cmd = [sys.executable, "-m", "crawlstack.cli", *args]
        started = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=ROOT, env=checkout_env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"crawlstack crawl exited {proc.returncode}: {_last_line(proc.stderr or proc.stdout)}")
        summary = json.loads(Path(out, "summary.json").read_text(encoding="utf-8"))
    return {
        "command": "crawlstack " + " ".join(a if a != out else "OUT" for a in args),
        "wall_s": round(wall, 2),
        "pages": int(summary["pages_fetched"]),
        "crawl_s": summary.get("elapsed_seconds"),  # the crawl itself, from its summary
        "outcomes": summary.get("outcomes"),
        "concurrency": summary.get("settings", {}).get("fetch_concurrency"),
        "emulator": summary.get("emulator"),
    }


def web_site(host: int, hosts: int, pages: int) -> dict[str, Any]:
    """Host ``host``'s pages: /0.html .. /{pages-1}.html, 30-60 KB each, ten same-host links and two to others."""
    from crawlstack.demo.server import Response

    routes: dict[str, Any] = {}
    for n in range(pages):
        rnd = random.Random(host * 100_003 + n)
        size = rnd.randrange(30_000, 60_000)
        text = "".join(f"<p>{' '.join(rnd.choices(WORDS, k=60))}</p>\n" for _ in range(size // 420))
        links = [f"/{rnd.randrange(pages)}.html" for _ in range(WEB_LINKS - 1)] + [f"/{(n + 1) % pages}.html"]
        links += [
            f"{{{{url:{loopback_address(rnd.randrange(hosts))}}}}}/{rnd.randrange(pages)}.html"
            for _ in range(WEB_CROSS_LINKS)
        ]
        anchors = "".join(f'<li><a href="{href}">more</a></li>' for href in links)
        head = f"<html><head><title>page {n}</title></head><body><h1>page {n}</h1>"
        routes[f"/{n}.html"] = Response(f"{head}{text}<ul>{anchors}</ul></body></html>")
    return routes


WORDS = ("crawler", "polite", "serverless", "frontier", "record", "mapping", "extract", "dispatch", "robots", "delay")


def web_compare(hosts: int, pages_per_host: int, timeout: float) -> dict[str, Any]:
    """Scrapy, then crawlstack, over the same generated web; each one's wall time and pages served."""
    import json

    from crawlstack.demo.server import LoopbackWeb

    results: dict[str, Any] = {}
    for crawler in ("scrapy", "crawlstack"):
        with LoopbackWeb() as web, tempfile.TemporaryDirectory(prefix="web-bench-") as tmp:
            addresses = [loopback_address(i) for i in range(hosts)]
            for i, address in enumerate(addresses):
                web.add_host(address, web_site(i, hosts, pages_per_host))
            seeds = [web.url(a, "/0.html") for a in addresses]
            if crawler == "scrapy":
                spider = Path(tmp) / "spider.py"
                spider.write_text(SPIDER, encoding="utf-8")
                cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-s", "ROBOTSTXT_OBEY=True",
                       "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False"]  # fmt: skip
                env = checkout_env(BENCH_SEEDS=json.dumps(seeds), BENCH_HOSTS=json.dumps(addresses))
            else:
                out = str(Path(tmp) / "out")
                cmd = [sys.executable, "-m", "crawlstack.cli", "crawl", "--local", *seeds, "--out", out, "--delay", "0",
                       "--max-depth", "100000", "--allow-private", "127.0.0.0/8", "--no-progress"]  # fmt: skip
                env = checkout_env()
            started = time.perf_counter()
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout, check=False)
            wall = time.perf_counter() - started
            if proc.returncode != 0:
                raise RuntimeError(f"{crawler} exited {proc.returncode}: {_last_line(proc.stderr or proc.stdout)}")
            pages = {(r.address, r.bare_path) for r in web.log if r.bare_path != "/robots.txt"}
            results[crawler] = {"wall_s": round(wall, 2), "pages": len(pages), "requests": len(web.log)}
        print(f"web, {crawler}: {results[crawler]['pages']} pages in {wall:.1f} s", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000, help="pages each crawler fetches (default 1000)")
    parser.add_argument("--hosts", type=int, default=20, help="hosts of the generated web (default 20)")
    parser.add_argument("--host-pages", type=int, default=50, help="pages per host of the generated web")
    args = parser.parse_args(argv)
    if args.pages < 1:
        parser.error("--pages must be at least 1")
    load_before = load_average()
    timeout = max(900.0, args.pages * 2.0)

    shared = port_in_use(PORT)
    scrapy = scrapy_bench(args.pages, timeout)
    print(f"scrapy bench: {scrapy['pages']} pages in {scrapy['wall_s']:.1f} s", flush=True)
    if shared or port_in_use(PORT):
        shared = True
        ours = crawlstack_crawl(args.pages, timeout)
    else:
        with BenchServer():
            ours = crawlstack_crawl(args.pages, timeout)
    print(f"crawlstack: {ours['pages']} pages in {ours['wall_s']:.1f} s", flush=True)
    web = web_compare(args.hosts, args.host_pages, timeout)
    web_ratio = web["crawlstack"]["wall_s"] / web["scrapy"]["wall_s"]
    web_pages = args.hosts * args.host_pages

    ratio = ours["wall_s"] / scrapy["wall_s"]
    per_page = (ours["wall_s"] / ours["pages"]) / (scrapy["wall_s"] / scrapy["pages"])
    method = (
        f"`scrapy bench` (Scrapy {version('scrapy')}, its defaults: 16 requests at once, 8 per domain, no "
        f"robots.txt) and then `crawlstack crawl --local --delay 0`, each stopped after "
        f"{args.pages} pages of Scrapy's benchmark server on loopback from the same start URL; wall time of each "
        "as a subprocess, interpreter start included, one run each. Then both crawl the whole of a generated web "
        f"of {args.hosts} loopback hosts x {args.host_pages} pages of 30-60 KB (`scrapy runspider` with a spider "
        "following every link within those hosts, robots.txt obeyed; `crawlstack crawl --local SEEDS --delay 0`), "
        "pages counted from the server's log."
    )
    if shared:
        method += f" Port {PORT} was already served by another process, so both crawls used that server."
    notes = (
        f"Pages: Scrapy stops after CLOSESPIDER_PAGECOUNT={args.pages} and finishes the requests in flight, so "
        f"it may count a few more. Per page, crawlstack took {per_page:.1f}x Scrapy's time. The crawls alone "
        f"(without interpreter start and shutdown): Scrapy {_seconds(scrapy['crawl_s'])} (its "
        f"elapsed_time_seconds), crawlstack {_seconds(ours['crawl_s'])} (summary.json elapsed_seconds). "
        "crawlstack also fetches robots.txt "
        "and runs every page through its three handlers, queues and tables (SQLite in OUT/); Scrapy keeps its "
        "frontier in memory. On the benchmark server crawlstack keeps one request at a time to its one host; "
        f"Scrapy keeps 8. On the generated web: Scrapy {web['scrapy']['pages']} pages in "
        f"{web['scrapy']['wall_s']:.1f} s, crawlstack {web['crawlstack']['pages']} in "
        f"{web['crawlstack']['wall_s']:.1f} s."
    )
    emulated = ours.get("emulator") or {}
    emulator_figures = []
    if emulated.get("calls"):
        # moto serves one request at a time under its lock: the crawl can be no
        # shorter than that time, whatever the handlers do around it.
        floor = emulated["seconds"] / scrapy["wall_s"]
        emulator_figures = [
            figure("crawlstack emulated AWS calls per page", round(emulated["calls"] / ours["pages"], 1), "calls"),
            figure(
                "crawlstack time inside the emulator per page",
                round(emulated["seconds"] * 1000 / ours["pages"], 1),
                "ms",
            ),
            figure("emulator time alone / Scrapy wall time", round(floor, 2), "x"),
        ]
        notes += (
            f" The embedded emulator served {emulated['calls']} AWS calls, one at a time under its lock, in "
            f"{emulated['seconds']:.1f} s of the crawl (summary.json `emulator`): that time alone is "
            f"{floor:.2f}x Scrapy's wall time."
        )
    report(
        "scrapy_compare",
        method,
        [
            figure("Scrapy wall time", round(scrapy["wall_s"], 1), "s"),
            figure("Scrapy pages", scrapy["pages"], "pages"),
            figure("crawlstack wall time", round(ours["wall_s"], 1), "s"),
            figure("crawlstack pages", ours["pages"], "pages"),
            figure("crawlstack / Scrapy wall time", round(ratio, 2), "x", f"≤ {TARGET_RATIO}x", ratio <= TARGET_RATIO),
            figure("crawlstack / Scrapy, stretch", round(ratio, 2), "x", f"≤ {STRETCH_RATIO}x", ratio <= STRETCH_RATIO),
            figure(
                f"generated web ({args.hosts} hosts, 30-60 KB pages): crawlstack / Scrapy wall time",
                round(web_ratio, 2),
                "x",
                f"≤ {TARGET_RATIO}x",
                web_ratio <= TARGET_RATIO,
            ),
            figure(
                "generated web: pages fetched, crawlstack / Scrapy",
                f"{web['crawlstack']['pages']} / {web['scrapy']['pages']}",
                "",
                f"= {web_pages}",
                web["crawlstack"]["pages"] == web["scrapy"]["pages"] == web_pages,
            ),
            *emulator_figures,
        ],
        load_before=load_before,
        notes=notes,
        pages_asked=args.pages,
        shared_server=shared,
        per_page_ratio=round(per_page, 2),
        scrapy=scrapy,
        crawlstack=ours,
        web=web,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
