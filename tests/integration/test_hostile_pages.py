"""A hostile page costs only itself: one local crawl of a host serving every such page beside ordinary ones.

Judged as a user would: the crawl ends by itself and exits 0, no message is
left in a dead-letter queue, every ordinary page's record lands, and every
hostile page has its crawl-log line.  Only the extraction budget is shortened
(the crawl runs in this process), and the retry backoff, so a 503 with a
malformed Retry-After costs a fraction of a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from webs import ALLOW_LOOPBACK, Crawl, host_pattern, page, read_jsonl, robots, write_rules

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Response

HOST = "127.0.0.2"
BUSY = "127.0.0.3"  # answers its robots.txt 429
ORDINARY = [f"/p{i}.html" for i in range(1, 31)]
SLUG = r"(\w+-?)+\.html$"  # an ordinary slug pattern that backtracks badly on re


def ordinary(i: int) -> str:
    return page(f"page {i}", body=f"<p class='label'>Price: {i}</p>")


def deep_html(depth: int, text_nodes: int) -> str:
    return "<html><body><h1>" + "<div>x" * depth + "<b>y</b>z" * text_nodes + "</div>" * depth + "</h1></body></html>"


def hostile_site(busy_url: str) -> dict[str, Any]:
    hostile = {
        "/charset-base64.html": Response(
            "<h1>base64</h1><a href='/from-base64.html'>n</a>", content_type="text/html; charset=base64"
        ),
        "/charset-escape.html": Response(
            "<h1>caf\u00e9 \\ud800</h1>", content_type="text/html; charset=unicode_escape"
        ),
        "/nul-href.html": Response(b"<h1>nul</h1><a href='/a\x00b.html'>x</a><a href='/from-nul.html'>y</a>"),
        "/deep.json": Response("[" * 500 + "1" + "]" * 500, content_type="application/json"),
        "/deep-html.html": Response(deep_html(2000, 60_000)),
        "/regex.html": Response("<h1>regex</h1><p class='label'>" + "a " * 20 + "!</p>"),
        "/unavailable.html": Response("<h1>busy</h1>", status=503, headers={"Retry-After": "\u00b2"}),
    }
    links = [*ORDINARY, *hostile, "http://100.64.0.1/cgnat.html", "http://crafted.example/" + "a-" * 40 + "!", busy_url]
    site: dict[str, Any] = {"/": page("hostile pages", links), **hostile}
    for i, path in enumerate(ORDINARY, start=1):
        site[path] = ordinary(i)
    site["/from-base64.html"] = ordinary(101)
    site["/from-nul.html"] = ordinary(102)
    return site


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "RETRY_BASE_SECONDS", 0.05)


def test_hostile_pages_cost_only_themselves(web: LoopbackWeb, crawl: Crawl, quick_retries: None) -> None:
    web.add_host(BUSY, {"/robots.txt": robots("busy", status=429), "/": page("never fetched")})
    busy_url = web.url(BUSY, "/")
    web.add_host(HOST, hostile_site(busy_url))
    rules = [
        {
            "name": "item",
            "url_patterns": [{"type": "regex", "pattern": SLUG}, {"type": "regex", "pattern": host_pattern(HOST)}],
            "fields": [
                {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "h1"}}]},
                {
                    "name": "label",
                    "processors": [
                        {"type": "css", "parameters": {"selector": "p.label"}},
                        {"type": "regex", "parameters": {"pattern": r"(\s*\w+\s*)*:"}},
                    ],
                },
                {"name": "data", "processors": [{"type": "jsonpath", "parameters": {"expression": "$[0]"}}]},
            ],
        }
    ]
    port = str(web.hosts[BUSY].port)
    result = crawl(
        web.url(HOST, "/"),
        rules=rules,
        delay=0.2,
        max_depth=3,
        extra=["--allow", r"100\.64|127\.0\.0\.3", "--allow-port", port],
    )

    assert result.exit_code == 0
    assert result.summary is not None
    assert not any(result.summary["dead_letter"].values()), result.summary["dead_letter"]
    assert result.summary["handler_errors"] == []
    assert result.elapsed < 60

    titles = {r["url"]: r["fields"]["title"] for r in result.records}
    for i, path in enumerate(ORDINARY, start=1):
        assert titles[web.url(HOST, path)] == f"page {i}"
        assert result.record(web.url(HOST, path))["fields"]["label"] == "Price"

    # A charset that is no text encoding: decoded by detection, its links followed.
    assert titles[web.url(HOST, "/charset-base64.html")] == "base64"
    assert titles[web.url(HOST, "/from-base64.html")] == "page 101"
    assert titles[web.url(HOST, "/charset-escape.html")] == "caf\u00e9 \\ud800"
    # A stray NUL in one href: the page is text, its other links are followed.
    assert result.log_entry(web.url(HOST, "/nul-href.html"))["outcome"] == "fetched"
    assert titles[web.url(HOST, "/from-nul.html")] == "page 102"
    # JSON 500 deep: stored, cut at the documented depth, and the line says so.
    deep_json = result.log_entry(web.url(HOST, "/deep.json"))
    assert "JSON nested deeper than" in deep_json["note"], deep_json
    json.dumps(result.record(web.url(HOST, "/deep.json")), allow_nan=False)
    # HTML 2,000 deep: its text, in time linear in the page.
    assert titles[web.url(HOST, "/deep-html.html")].startswith("x" * 100)
    # A user regex that backtracks: no match, the page's other fields kept.
    assert result.record(web.url(HOST, "/regex.html"))["fields"] == {"title": "regex", "label": None, "data": None}
    # A malformed Retry-After: ignored, the usual backoff, and the URL ends failed with its status.
    unavailable = result.log_entry(web.url(HOST, "/unavailable.html"))
    assert unavailable["outcome"] == "failed" and unavailable["reason"].startswith("503"), unavailable
    # The address guard's allow-list: carrier-grade NAT is not public.
    cgnat = result.log_entry("http://100.64.0.1/cgnat.html")
    assert cgnat["reason"].startswith("address 100.64.0.1 is not public"), cgnat
    # robots.txt answered 429: the host is unavailable, its URL skipped with the reason.
    busy = result.log_entry(busy_url)
    assert (busy["outcome"], busy["reason"]) == ("skipped", "robots.txt unavailable (429)"), busy
    assert web.paths(BUSY) == ["/robots.txt"]


def test_sigterm_mid_extraction_writes_outputs_and_exits_130(web: LoopbackWeb, tmp_path: Path) -> None:
    """A page whose mapping backtracks on every value: SIGTERM while it is extracted still ends the crawl.

    Each of its 400 values costs a pattern timeout, 40 s in all without the
    page's budget; the crawl must stop within the budget of the page under way.
    """
    slow = "".join("<p>" + "a" * 40 + "!:</p>" for _ in range(400))
    web.add_host(HOST, {"/": page("seed", ["/slow.html"]), "/slow.html": Response(f"<h1>slow</h1>{slow}")})
    rules = write_rules(
        tmp_path / "rules",
        [
            {
                "name": "slow",
                "url_patterns": [{"type": "regex", "pattern": host_pattern(HOST)}],
                "fields": [
                    {
                        "name": "labels",
                        "multiple": True,
                        "processors": [
                            {"type": "css", "parameters": {"selector": "p"}},
                            {"type": "regex", "parameters": {"pattern": r"(\w|\w\w)+:"}},
                        ],
                    }
                ],
            }
        ],
    )
    out = tmp_path / "out"
    exe = Path(sys.executable).parent / "crawlstack"
    argv = [str(exe), "crawl", "--local", web.url(HOST, "/"), "--rules", str(rules), "--out", str(out)]
    proc = subprocess.Popen(
        [*argv, *ALLOW_LOOPBACK, "--delay", "0", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        # The slow page answered: its WARC goes to extract next.
        deadline = time.monotonic() + 60
        while "/slow.html" not in web.paths(HOST) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert "/slow.html" in web.paths(HOST), web.paths(HOST)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)  # a hang guard, far above the 5 s page budget
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["interrupted"] is True
    assert (out / "crawl-log.jsonl").exists() and (out / "records.jsonl").exists()
    # The batch under way finished within its page's budget, and its page says so.
    slow_line = next(e for e in read_jsonl(out / "crawl-log.jsonl") if e["url"] == web.url(HOST, "/slow.html"))
    assert slow_line["reason"] == "extraction budget of 5s exceeded", slow_line
