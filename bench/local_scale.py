"""Local mode at scale: does a page cost the same at the end of a big crawl as at the start?

A generated web on loopback is crawled with ``crawlstack crawl --local
--delay 0``; the figure is the wall time per page, from the server's own
request log, over the first, middle and last ``--window`` requests.

Shapes (30 links a page either way):

* ``tree`` (default): page n links to its 10 children (new URLs, same host)
  and to 20 random pages already discovered, 80% on the same host; the
  frontier grows by 10 URLs a page, the work per page stays the same.
* ``random``: 30 random links into HOSTS x PAGES pages, 80% on the same
  host; early pages find mostly new URLs, late ones mostly known ones.

    python bench/local_scale.py [--shape tree] [--hosts 20] [--pages 5000] [--max-pages 2000]
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


def site(host: int, hosts: int, pages: int, shape: str) -> Any:
    def link(rnd: random.Random, page: int) -> str:
        if rnd.random() < SAME_HOST_SHARE:
            return f"/{page}.html"
        return f"{{{{url:{address(rnd.randrange(hosts))}}}}}/{page}.html"

    def respond(req: Request) -> str | None:
        stem = req.bare_path.strip("/").removesuffix(".html")
        if not stem.isdigit():
            return None
        n = int(stem)
        rnd = random.Random(host * 1_000_003 + n)
        if shape == "tree":
            links = [f"/{n * 10 + i}.html" for i in range(1, 11)]
            links += [link(rnd, rnd.randrange(max(1, n))) for _ in range(LINKS_PER_PAGE - 10)]
        else:
            links = [link(rnd, rnd.randrange(pages)) for _ in range(LINKS_PER_PAGE)]
        return "<html><body>" + "".join(f'<a href="{href}">p</a>' for href in links) + "</body></html>"

    return respond


def per_page_ms(times: list[float], start: int, count: int) -> float | None:
    window = times[start : start + count]
    if len(window) < 2:
        return None
    return (window[-1] - window[0]) / (len(window) - 1) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=("tree", "random"), default="tree")
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=5000, help="pages per host (random shape)")
    parser.add_argument("--max-pages", type=int, default=2000)
    parser.add_argument("--window", type=int, default=300)
    args = parser.parse_args()

    with LoopbackWeb() as web, tempfile.TemporaryDirectory() as out:
        for i in range(args.hosts):
            web.add_host(address(i), fallback=site(i, args.hosts, args.pages, args.shape))
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
        "shape": args.shape,
        "hosts": args.hosts,
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
