"""Local mode at scale: does a page cost the same at the end of a big crawl as at the start?

A generated web on loopback (HOSTS hosts x PAGES pages, 30 links a page, 80%
on the same host) is crawled with ``crawlstack crawl --local --delay 0``.
The figure is the wall time per page, from the server's own request log,
over the first, middle and last 500 requests.

    python bench/local_scale.py [--hosts 20] [--pages 5000] [--max-pages 10000]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from crawlstack.cli import main as crawlstack
from crawlstack.demo.server import LoopbackWeb, Request

LINKS_PER_PAGE = 30
SAME_HOST_SHARE = 0.8


def address(i: int) -> str:
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


def site(host: int, hosts: int, pages: int) -> Any:
    def respond(req: Request) -> str | None:
        stem = req.bare_path.strip("/").removesuffix(".html")
        if not stem.isdigit():
            return None
        rnd = random.Random(host * 1_000_003 + int(stem))
        links = []
        for _ in range(LINKS_PER_PAGE):
            if rnd.random() < SAME_HOST_SHARE:
                links.append(f"/{rnd.randrange(pages)}.html")
            else:
                other = address(rnd.randrange(hosts))
                links.append(f"{{{{url:{other}}}}}/{rnd.randrange(pages)}.html")
        return "<html><body>" + "".join(f'<a href="{link}">p</a>' for link in links) + "</body></html>"

    return respond


def per_page_ms(times: list[float], start: int, count: int) -> float | None:
    window = times[start : start + count]
    if len(window) < 2:
        return None
    return (window[-1] - window[0]) / (len(window) - 1) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--max-pages", type=int, default=10000)
    parser.add_argument("--window", type=int, default=500)
    args = parser.parse_args()

    with LoopbackWeb() as web, tempfile.TemporaryDirectory() as out:
        for i in range(args.hosts):
            web.add_host(address(i), fallback=site(i, args.hosts, args.pages))
        seeds = [web.url(address(i), "/0.html") for i in range(args.hosts)]
        started = time.monotonic()
        status = crawlstack(
            ["crawl", "--local", *seeds, "--out", out, "--delay", "0", "--max-depth", "1000",
             "--max-pages", str(args.max_pages), "--allow-private", "127.0.0.0/8", "--no-progress"]
        )  # fmt: skip
        elapsed = time.monotonic() - started
        summary = json.loads(Path(out, "summary.json").read_text())
        times = sorted(r.arrived for r in web.log if not r.path.endswith("robots.txt"))

    n, w = len(times), args.window
    result = {
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "exit": status,
        "hosts": args.hosts,
        "url_space": args.hosts * args.pages,
        "pages_fetched": n,
        "urls_logged": summary["urls"],
        "elapsed_s": round(elapsed, 1),
        "ms_per_page_first": per_page_ms(times, 0, w),
        "ms_per_page_middle": per_page_ms(times, max(0, n // 2 - w // 2), w),
        "ms_per_page_last": per_page_ms(times, max(0, n - w), w),
    }
    print(json.dumps(result, indent=2))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
