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

Both are timed as subprocesses (``time.perf_counter`` around each), so each
includes its interpreter's start.  If something else already serves port
8998 (``scrapy bench`` has it hard-coded), both crawls use that server and
the result says so.

    python bench/scrapy_compare.py [--pages 1000]
"""

from __future__ import annotations

import argparse
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from common import ROOT, checkout_env, figure, load_average, port_in_use, report

PORT = 8998
START_URL = f"http://localhost:{PORT}/?total=100000&show=20"
TARGET_RATIO = 1.5


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000, help="pages each crawler fetches (default 1000)")
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

    ratio = ours["wall_s"] / scrapy["wall_s"]
    per_page = (ours["wall_s"] / ours["pages"]) / (scrapy["wall_s"] / scrapy["pages"])
    method = (
        f"`scrapy bench` (Scrapy {version('scrapy')}, its defaults: 16 requests at once, 8 per domain, no "
        f"robots.txt) and then `crawlstack crawl --local --delay 0` (embedded moto), each stopped after "
        f"{args.pages} pages of Scrapy's benchmark server on loopback from the same start URL; wall time of each "
        "as a subprocess, interpreter start included, one run each."
    )
    if shared:
        method += f" Port {PORT} was already served by another process, so both crawls used that server."
    notes = (
        f"Pages: Scrapy stops after CLOSESPIDER_PAGECOUNT={args.pages} and finishes the requests in flight, so "
        f"it may count a few more. Per page, crawlstack took {per_page:.1f}x Scrapy's time. The crawls alone "
        f"(without interpreter start and shutdown): Scrapy {_seconds(scrapy['crawl_s'])} (its "
        f"elapsed_time_seconds), crawlstack {_seconds(ours['crawl_s'])} (summary.json elapsed_seconds). "
        "crawlstack also fetches robots.txt "
        "and runs every page through its three handlers, queues and tables (moto, in process); Scrapy keeps its "
        "frontier in memory."
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
            *emulator_figures,
        ],
        load_before=load_before,
        notes=notes,
        pages_asked=args.pages,
        shared_server=shared,
        per_page_ratio=round(per_page, 2),
        scrapy=scrapy,
        crawlstack=ours,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
