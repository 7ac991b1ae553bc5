"""Local crawls of a hostile loopback host: an endless calendar, repeating path segments, links and
redirects to an unseeded port, and malformed hrefs.

Judged from the servers' request logs (what was requested, and how much) and from the crawl's
outputs: crawl-log.jsonl says why each URL that reached dispatch was dropped, and metrics.jsonl
counts the hrefs extract skipped, per class.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from webs import Crawl, CrawlResult, page

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Request, Response

TRAP = "127.0.0.61"
REPEATS = re.compile(r"/(?:x/){3}|/(?:a/b/){3}")

MALFORMED = [
    "javascript:void(0)",
    "mailto:trap@example.invalid",
    "tel:+15550100",
    "data:text/html,hi",
    "/bad%zz",
    "http://[::1/",
    f"http://{TRAP}:99999/",
    "/" + "z" * settings.MAX_URL_LENGTH,
]


def calendar(request: Request) -> str:
    """/calendar?month=YYYY-MM: links to the month before and after, forever."""
    year, month = (int(part) for part in request.query.removeprefix("month=").split("-"))
    after = (year + 1, 1) if month == 12 else (year, month + 1)
    before = (year - 1, 12) if month == 1 else (year, month - 1)
    return page(f"{year}-{month:02d}", [f"/calendar?month={y}-{m:02d}" for y, m in (before, after)])


@pytest.fixture
def other_port() -> Iterator[LoopbackWeb]:
    """The trap host's address on a second port, never seeded: nothing may reach it."""
    with LoopbackWeb({TRAP: {"/": page("other port"), "/robots.txt": Response("", status=404)}}) as web:
        yield web


def trap_host(web: LoopbackWeb, other: LoopbackWeb) -> str:
    elsewhere = other.url(TRAP, "/")
    routes = {
        "/": page(
            "trap home",
            ["/calendar?month=2031-07", "a/b/", "x/", elsewhere, "/to-other-port", "/to-bad-url", *MALFORMED],
        ),
        "/calendar": calendar,
        "/to-other-port": Response(status=302, headers={"Location": elsewhere}),
        "/to-bad-url": Response(status=302, headers={"Location": "/moved%zz"}),
    }
    # Any other path links on relatively, so paths grow: /a/b/, /x/, /a/b/x/, /x/x/, ...
    web.add_host(TRAP, routes, fallback=page("deeper", ["a/b/", "x/"]))
    return web.url(TRAP, "/")


def pages(web: LoopbackWeb) -> list[str]:
    return [path for path in web.paths(TRAP) if path != "/robots.txt"]


def metrics(out: Path) -> Counter[str]:
    """Metric totals from OUT/metrics.jsonl (the handlers' EMF lines)."""
    totals: Counter[str] = Counter()
    for line in (out / "metrics.jsonl").read_text().splitlines():
        try:
            emf = json.loads(line)
        except json.JSONDecodeError:
            continue
        for directive in emf.get("_aws", {}).get("CloudWatchMetrics", []):
            for metric in directive.get("Metrics", []):
                value = emf.get(metric["Name"])
                totals[metric["Name"]] += sum(value) if isinstance(value, list) else value
    return totals


def dropped(result: CrawlResult) -> dict[str, str]:
    return {e["url"]: e["reason"] for e in result.log if e["outcome"] == "dropped"}


def test_a_trap_host_is_bounded_by_depth_and_shape_and_its_other_port_is_never_touched(
    web: LoopbackWeb, other_port: LoopbackWeb, crawl: Crawl
) -> None:
    seed = trap_host(web, other_port)
    result = crawl(seed, delay=0, max_depth=3)

    requested = pages(web)
    assert web.paths(TRAP).count("/robots.txt") == 1
    # Depth bounds the calendar: the seed's month, then one step either way per level.
    months = sorted(p for p in requested if p.startswith("/calendar"))
    assert months == [f"/calendar?month=2031-{m:02d}" for m in (5, 6, 7, 8, 9)]
    # No repeating path was ever requested, and nothing went to the unseeded port.
    assert not [p for p in requested if REPEATS.search(p)], requested
    assert other_port.log == []
    assert len(requested) == len(set(requested)) <= 25

    base = seed.rstrip("/")
    other = other_port.url(TRAP, "/")
    reasons = dropped(result)
    assert reasons[other] == f"port {other_port.hosts[TRAP].port} is not allowed"
    assert reasons[f"{base}/a/b/a/b/a/b/"] == "trap: 'a/b' repeats 3 times in a row in the path"
    assert reasons[f"{base}/x/x/x/"] == "trap: 'x' repeats 3 times in a row in the path"
    # A redirect to a malformed URL is dropped by dispatch with the URL's own reason.
    assert reasons[f"{base}/moved%zz"] == "invalid URL: bad percent-escape '%zz'"
    assert result.log_entry(f"{base}/to-other-port")["reason"] == f"redirect to {other}"
    # Each URL has one line: the port's link and the redirect to it are one URL.
    assert len(result.log) == len({e["url"] for e in result.log})
    assert result.summary is not None and result.summary["outcomes"]["dropped"] == len(reasons)

    # Malformed hrefs are counted per class by extract, and go on to dispatch to be dropped with a line each:
    # 8 of them, and the redirect to /moved%zz.
    counts = metrics(result.out)
    assert counts["HrefsSkippedScheme"] == 4
    assert counts["HrefsSkippedPercentEscape"] == 1
    assert counts["HrefsSkippedIpv6"] == 1
    assert counts["HrefsSkippedPort"] == 1
    assert counts["HrefsSkippedTooLong"] == 1
    assert counts["UrlsPortRefused"] >= 1 and counts["UrlsTrapped"] >= 2 and counts["UrlsInvalid"] == 9


def test_the_per_host_cap_bounds_a_trap_host_however_deep_the_crawl(
    web: LoopbackWeb, other_port: LoopbackWeb, crawl: Crawl
) -> None:
    seed = trap_host(web, other_port)
    result = crawl(seed, delay=0, max_depth=50, extra=["--max-pages-per-host", "20"])

    requested = pages(web)
    assert len(requested) == 20 and len(set(requested)) == 20
    assert other_port.log == []
    # The first URL over the cap is claimed and skipped with the reason; later ones are dropped at no write.
    # Local mode runs two dispatch instances: each may have claimed one URL before either learnt the cap was
    # reached, and a claimed URL is always skipped with its line.
    capped = [e for e in result.log if e.get("reason") == "host page cap of 20 reached"]
    assert 1 <= len(capped) <= 2 and all(e["outcome"] == "skipped" for e in capped)
    assert metrics(result.out)["UrlsOverHostCap"] >= 1
    assert result.summary is not None and result.summary["settings"]["max_pages_per_host"] == 20


def test_an_allowed_port_is_crawled(web: LoopbackWeb, other_port: LoopbackWeb, crawl: Crawl) -> None:
    seed = web.add_host("127.0.0.62", {"/": page("home", [other_port.url(TRAP, "/")])}).base_url + "/"
    port = other_port.hosts[TRAP].port
    # The other host is in scope by an allow pattern; its port needs allowing too.
    refused = crawl(seed, delay=0, extra=["--allow", rf"^http://{TRAP}:"])
    assert other_port.log == []
    assert dropped(refused) == {other_port.url(TRAP, "/"): f"port {port} is not allowed"}
    allowed = crawl(seed, delay=0, extra=["--allow", rf"^http://{TRAP}:", "--allow-port", str(port)])
    assert allowed.outcome(other_port.url(TRAP, "/")) == "fetched"
    assert [e.path for e in other_port.log] == ["/robots.txt", "/"]
