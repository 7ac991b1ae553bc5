"""One crawl on the local backend and on the AWS adapters (moto, ``--emulate-aws``) gives the same outputs.

The same handlers and domain code run on both (``crawlstack.wiring.Stores``);
a difference here is a store that drifted from its counterpart.  Judged
from OUT/ and the server's log: the same requests, records, crawl-log
lines and resolved records.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from webs import Crawl, host_pattern, mapping, page, robots

from crawlstack.demo.server import LoopbackWeb, Response

A, B = "127.0.0.2", "127.0.0.3"
RULES = [
    mapping("page", host_pattern(A, r"/p\d+\.html"), {"title": "//h1/text()"}),
    mapping("other", host_pattern(B, r"/.*"), {"title": "//h1/text()"}),
]


def site(web: LoopbackWeb) -> None:
    web.add_host(
        A,
        {
            "/robots.txt": robots("User-agent: *\nDisallow: /private\n"),
            "/": page("index", ["/p1.html", "/p2.html", "/private/x.html", "/gone.html", "bad://x"]),
            "/p1.html": page("one", ["/p2.html", "{{url:" + B + "}}/"]),
            "/p2.html": page("two", ["/p1.html", "/p3.html?a=1"]),
            "/p3.html": Response(page("three"), status=200),
            "/gone.html": Response("gone", status=404),
        },
    )
    web.add_host(B, {"/": page("b index", ["/b1.html"]), "/b1.html": page("b one")})


def comparable(out: Path, port_of: dict[str, int]) -> dict[str, Any]:
    """OUT/'s records, crawl log and resolved records with the run's own times and ports taken out."""

    def lines(name: str) -> list[dict[str, Any]]:
        path = out / name
        return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]

    def plain(url: str) -> str:
        for host, port in port_of.items():
            url = url.replace(f"{host}:{port}", host)
        return url

    records = sorted(
        (plain(r["url"]), r["mapping"], json.dumps(r["fields"], sort_keys=True), r["depth"])
        for r in lines("records.jsonl")
    )
    log_lines = lines("crawl-log.jsonl")
    for line in log_lines:
        if line["outcome"] == "fetched":  # each try's start, to the microsecond, in UTC, and its end
            started = line.pop("started_at")
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", started)
            assert line.pop("fetched_at") >= datetime.fromisoformat(started).timestamp()
    log = sorted(json.dumps({**e, "url": plain(e["url"])}, sort_keys=True) for e in log_lines)
    return {"records": records, "log": log, "resolved": lines("resolved.jsonl")}


def test_the_local_backend_and_the_aws_adapters_give_the_same_crawl(crawl: Crawl, web: LoopbackWeb) -> None:
    site(web)
    ports = {A: web.hosts[A].port, B: web.hosts[B].port}
    allow_b = ["--allow-port", str(ports[B])]
    local = crawl(web.url(A, "/"), rules=RULES, delay=0, max_depth=3, extra=allow_b)
    requests_local = Counter((e.address, e.bare_path) for e in web.log)
    web.clear_log()
    on_aws = crawl(web.url(A, "/"), rules=RULES, delay=0, max_depth=3, extra=[*allow_b, "--emulate-aws"])
    requests_aws = Counter((e.address, e.bare_path) for e in web.log)

    assert requests_local == requests_aws
    assert comparable(local.out, ports) == comparable(on_aws.out, ports)
    assert local.summary is not None and on_aws.summary is not None
    assert local.summary["outcomes"] == on_aws.summary["outcomes"]
    assert local.summary["emulator"] is None and on_aws.summary["emulator"]["calls"] > 0
