"""Dollars per million pages: a local crawl whose every AWS call is counted and priced.

The generated web: ``--hosts`` (10) hosts x ``--pages`` (40) pages on loopback,
each page with 30 links, 80% of them to pages of its own host, 20% to pages
of the others, and one record per page (``bench/rules/cost.json``: title and
heading).  It is crawled with ``crawlstack crawl --local --endpoint-url``
through ``crawlstack.local.faulty.FaultyEndpoint`` (failing nothing) in front
of a moto server, and ``crawlstack.local.billing.Bill`` turns each call into
billable units at us-east-1 list prices.  Lambda is priced from the measured
time inside each handler (``summary.json``'s ``handler_seconds``) at each
function's memory size (``settings.FUNCTIONS``), arm64.

Local handler time runs on this host's CPU (not Graviton), with two or more
handler threads sharing the interpreter and a loopback round trip per AWS
call: it prices Lambda conservatively.  The pump's queue-depth polling and
empty receives are local mode's own and are not priced (see the billing
module); deployed, an event source mapping's idle long polls cost a few
cents a day whatever the crawl.

    python bench/cost.py [--hosts 10] [--pages 40] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Request
from crawlstack.local.billing import PRICES, Bill, lambda_usd
from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, moto_server

try:  # run as a script (python bench/cost.py) or imported as bench.cost
    from common import ROOT, checkout_env, loopback_address, machine, write_result  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    from bench.common import ROOT, checkout_env, loopback_address, machine, write_result

LINKS_PER_PAGE = 30
SAME_HOST_SHARE = 0.8
RULES = Path(__file__).with_name("rules") / "cost.json"
TARGET_USD_PER_MILLION = 3.0


def site(host: int, hosts: int, pages: int) -> Any:
    def respond(req: Request) -> str | None:
        stem = req.bare_path.strip("/").removesuffix(".html")
        if not stem.isdigit() or int(stem) >= pages:
            return None
        n = int(stem)
        rnd = random.Random(host * 1_000_003 + n)
        links = []
        for _ in range(LINKS_PER_PAGE):
            target = rnd.randrange(pages)
            if rnd.random() < SAME_HOST_SHARE or hosts == 1:
                links.append(f"/{target}.html")
            else:
                other = rnd.choice([h for h in range(hosts) if h != host])
                links.append(f"{{{{url:{loopback_address(other)}}}}}/{target}.html")
        anchors = "".join(f'<li><a href="{href}">page {i}</a></li>' for i, href in enumerate(links))
        return (
            f"<html><head><title>Host {host} page {n}</title></head><body>"
            f"<h1>Page {n} of host {host}</h1><ul>{anchors}</ul></body></html>"
        )

    return respond


def design_floor(batch: int = settings.SQS_BATCH_SIZE) -> dict[str, float]:
    """Dollars per million pages that the design's own contracts cost, at full batches, whatever the code.

    Per page: the dedupe's conditional write and the record's item (1 write
    unit each); per fetch batch of ``batch`` pages: three S3 PUTs (the WARC,
    its records for Athena, its crawl log) and the extract's GET of the WARC,
    and three SQS requests on each queue (one send or S3 notification, one
    receive, one delete of ``batch`` messages; a page's links are one
    frontier message).  Left out, so this is below any real figure: every
    politeness write (slot, claim, release, parking), the URL's start and
    outcome, robots.txt, and every Lambda second.
    """
    per_page = {
        "dynamodb": 2 * PRICES["ddb_wru"],
        "s3": (3 * PRICES["s3_put"] + PRICES["s3_get"]) / batch,
        "sqs": 3 * len(settings.QUEUES) * PRICES["sqs_requests"] / batch,
    }
    return {k: round(v * 1_000_000, 3) for k, v in per_page.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--pages", type=int, default=40, help="pages per host")
    parser.add_argument("--delay", type=float, default=0.2, help="crawl delay in seconds (default 0.2)")
    args = parser.parse_args(argv)

    bill = Bill()
    with (
        moto_server(reset=True) as upstream,
        LoopbackWeb() as web,
        FaultyEndpoint(upstream, FaultPlan(failure_rate=0.0)) as endpoint,
        tempfile.TemporaryDirectory() as out,
    ):
        endpoint.observers.append(bill.observe)
        for i in range(args.hosts):
            web.add_host(loopback_address(i), fallback=site(i, args.hosts, args.pages))
        seeds = [web.url(loopback_address(i), "/0.html") for i in range(args.hosts)]
        started = time.monotonic()
        status = subprocess.run(
            [sys.executable, "-m", "crawlstack.cli",
             "crawl", "--local", *seeds, "--out", out, "--rules", str(RULES), "--delay", str(args.delay),
             "--max-depth", "1000", "--allow-private", "127.0.0.0/8", "--endpoint-url", endpoint.url,
             "--no-progress"],
            cwd=ROOT, env=checkout_env(), check=False,
        ).returncode  # fmt: skip
        elapsed = time.monotonic() - started
        summary = json.loads(Path(out, "summary.json").read_text())
        records = len(Path(out, "records.jsonl").read_text().splitlines())
        page_requests = sum(1 for r in web.log if not r.path.endswith("robots.txt"))

    pages = summary["pages_fetched"]
    if status != 0 or pages == 0:
        raise SystemExit(f"cost: the crawl failed (exit {status}, {pages} pages)")
    per_page = 1_000_000 / pages
    gb_s = {
        key: seconds * settings.FUNCTIONS[settings.QUEUES[key].consumer].memory_mb / 1024
        for key, seconds in summary["handler_seconds"].items()
    }
    usd = bill.usd()
    usd["lambda"] = lambda_usd(sum(gb_s.values()))
    usd_per_million = {k: round(v * per_page, 4) for k, v in usd.items()}
    usd_per_million["total"] = round(sum(usd_per_million.values()), 4)
    calls = bill.calls_by_service()
    units = dict(bill.units)
    units["lambda_gb_s"] = sum(gb_s.values())
    floor = design_floor()
    per_batch = pages / max(1, summary["invocations"].get("fetch", 0))
    by_operation = {f"{s}:{o}": round(n / pages, 3) for (s, o), n in sorted(bill.billed_calls.items())}
    result = {
        "name": "cost",
        "machine": machine(),
        "method": (
            f"`crawlstack crawl --local` of a generated web ({args.hosts} hosts x {args.pages} pages, "
            f"{LINKS_PER_PAGE} links a page, {SAME_HOST_SHARE:.0%} same host, a record a page, delay {args.delay} s), "
            "in its own process, through a counting endpoint in front of a moto server in the benchmark's; each "
            "call priced at us-east-1 list prices by crawlstack.local.billing, Lambda from measured handler time "
            "at each function's memory, arm64."
        ),
        "pages": pages,
        "page_requests": page_requests,
        "records": records,
        "elapsed_s": round(elapsed, 1),
        "calls_per_page": {k: round(v / pages, 3) for k, v in sorted(calls.items())},
        "calls_per_page_by_operation": by_operation,
        "units_per_page": {k: round(v / pages, 4) for k, v in sorted(units.items())},
        "write_units_per_page_by_table": {
            t: round(v / pages, 3) for t, v in sorted(bill.write_units_by_table.items(), key=lambda kv: -kv[1])
        },
        "usd_per_million_pages": usd_per_million,
        "handler_ms_per_page": {k: round(v * 1000 / pages, 2) for k, v in summary["handler_seconds"].items()},
        "unbilled_calls": {f"{s}:{o}": n for (s, o), n in sorted(bill.unbilled_calls.items())},
        "prices": PRICES,
        "design_floor_usd_per_million_pages": floor,
        "pages_per_fetch_batch": round(per_batch, 2),
        "notes": (
            f"Where a page's write units go (DynamoDB, {units['ddb_wru'] / pages:.2f} a page): the hosts table "
            "holds its slot reservation and the host's claim and release; the urls table its dedupe claim and "
            "the start and outcome of its fetch; the results table its record. S3: three PUTs per fetch batch "
            f"(the WARC, its records, its crawl log), {per_batch:.1f} pages a fetch batch here. What the "
            f"design's own contracts cost at full batches of {settings.SQS_BATCH_SIZE}, before any politeness "
            "write and any Lambda second (bench/cost.py `design_floor`: the dedupe write and the record a page; "
            "three PUTs and a GET per batch; three SQS requests per batch on each queue): "
            f"${sum(floor.values()):.2f} a million pages (DynamoDB ${floor['dynamodb']:.2f}, S3 "
            f"${floor['s3']:.2f}, SQS ${floor['sqs']:.2f}), against the target of ${TARGET_USD_PER_MILLION:g}."
        ),
        "figures": [
            {
                "label": "cost per million pages",
                "value": usd_per_million["total"],
                "unit": "$",
                "target": f"<= ${TARGET_USD_PER_MILLION:g}",
                "meets": usd_per_million["total"] <= TARGET_USD_PER_MILLION,
            },
            *(
                {
                    "label": f"{service} share",
                    "value": usd_per_million[service],
                    "unit": "$ per M pages",
                    "target": None,
                    "meets": None,
                }
                for service in ("sqs", "dynamodb", "s3", "lambda")
            ),
            *(
                {
                    "label": f"{service} calls per page",
                    "value": round(n / pages, 2),
                    "unit": "calls",
                    "target": None,
                    "meets": None,
                }
                for service, n in sorted(calls.items())
            ),
            {
                "label": "dynamodb write units per page",
                "value": round(units["ddb_wru"] / pages, 2),
                "unit": "WRU",
                "target": None,
                "meets": None,
            },
            {
                "label": "the design's floor at full batches (arithmetic, see notes)",
                "value": round(sum(floor.values()), 2),
                "unit": "$",
                "target": None,
                "meets": None,
            },
            *(
                {
                    "label": f"dynamodb write units per page, {table} table",
                    "value": round(v / pages, 2),
                    "unit": "WRU",
                    "target": None,
                    "meets": None,
                }
                for table, v in sorted(bill.write_units_by_table.items(), key=lambda kv: -kv[1])
                if v / pages >= 0.05
            ),
        ],
    }
    write_result(result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
