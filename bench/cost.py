"""Dollars per million pages: local crawls whose every AWS call is counted and priced.

Measured as issue 14 sets it.  Generated webs on loopback, each page with 30
links, 80% of them to pages of its own host, 20% to pages of the others, and
one record per page (``bench/rules/cost.json``: title and heading):

* ``deep``: 4 hosts x 250 pages, deep per-host backlogs, at ``--delay 0``
  (the headline figure);
* ``today``: 10 hosts x 40 pages, the web this benchmark crawled before, at
  ``--delay 0``;
* the deep web's shape at 1 s and 5 s delays, smaller so politeness fits in
  a minute: 4 hosts x 30 pages at 1 s, 4 hosts x 8 pages at 5 s;
* ``hosts-100``: 100 hosts x 10 pages at ``--delay 0``, for AWS calls per
  page with many hosts.

Each is crawled with ``crawlstack crawl --local --endpoint-url
--extract-concurrency 4`` (four extract instances at once, so duplicate links
reach dispatch as they would deployed) in its own interpreter, through
``crawlstack.local.faulty.FaultyEndpoint`` (failing nothing) in front of a
fresh moto server, and ``crawlstack.local.billing.Bill`` turns each call into
billable units at the prices in ``crawlstack.local.billing.PRICES``
(us-east-1 list prices).  Lambda is priced from the wall time of each handler
call, sleeps included (``summary.json``'s ``handler_seconds``), at each
function's memory size (``settings.FUNCTIONS``), arm64, plus one request per
invocation (``invocations``); CloudWatch Logs from the bytes the functions
log (``log_bytes``: their loggers' lines at INFO, the deployed level, and
their EMF metric lines; see ``crawlstack.local.billing.LogMeter``).

Local handler time runs on this host's CPU (not Graviton), with two or more
handler threads sharing the interpreter and a loopback round trip per AWS
call: it prices Lambda conservatively.  The pump's queue-depth polling and
empty receives are local mode's own and are not priced (see the billing
module); deployed, an event source mapping's idle long polls cost a few
cents a day whatever the crawl.

    python bench/cost.py [--only deep,today,delay-1,delay-5,hosts-100] [--extract-concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Request
from crawlstack.local.billing import PRICES, Bill, lambda_requests_usd, lambda_usd, logs_usd
from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, moto_server

try:  # run as a script (python bench/cost.py) or imported as bench.cost
    from common import (  # type: ignore[import-not-found]
        ROOT,
        checkout_env,
        load_average,
        loopback_address,
        machine,
        write_result,
    )
except ImportError:  # pragma: no cover
    from bench.common import ROOT, checkout_env, load_average, loopback_address, machine, write_result

LINKS_PER_PAGE = 30
SAME_HOST_SHARE = 0.8
RULES = Path(__file__).with_name("rules") / "cost.json"
# Issue 14: at --delay 0, on the deep web and on today's.
TARGET_USD_PER_MILLION = 2.5
TARGET_WEBS = ("deep", "today")  # hosts-100 is measured by AWS calls per page
STRETCH_USD_PER_MILLION = 1.5
EXTRACT_INSTANCES = 4
SERVICES = ("sqs", "dynamodb", "s3", "lambda", "lambda_requests", "logs")


@dataclass(frozen=True)
class Web:
    key: str
    hosts: int
    pages: int
    delay: float
    what: str

    @property
    def shape(self) -> str:
        return f"{self.hosts} hosts x {self.pages} pages"


WEBS = (
    Web("deep", 4, 250, 0.0, "deep per-host backlogs"),
    Web("today", 10, 40, 0.0, "today's web"),
    Web("delay-1", 4, 30, 1.0, "the deep web's shape, smaller"),
    Web("delay-5", 4, 8, 5.0, "the deep web's shape, smaller"),
    # Issue 14 measures 100 hosts by AWS calls per page (local mode's emulator cannot serve them politely).
    Web("hosts-100", 100, 10, 0.0, "many hosts, shallow backlogs"),
)


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


def design_floor(
    delay: float = settings.DEFAULT_DELAY_SECONDS, hosts: int = settings.QUEUES["fetch"].batch_size
) -> dict[str, float]:
    """Dollars per million pages that the design's own contracts cost, whatever the code, by service.

    The design (``crawlstack.runs``): a fetch invocation works ``hosts``
    hosts at once, each busy at ``delay`` seconds a page, and they flush
    together every ``settings.RUN_FLUSH_SECONDS``.

    * Per page, DynamoDB: the urls table's dedupe claim and the results
      table's record, a write unit each (a first try's outcome is the
      crawl log's: ``crawlstack.fetch.outcomes.logged_only``).
    * Per flush, amortised over its ``hosts x RUN_FLUSH_SECONDS / delay``
      pages (at least one): three S3 PUTs (the WARC, its crawl-log object,
      extract's records object), extract's GET of the WARC, and the WARC's
      extract-queue message (S3's delivery, a receive, a delete).
    * SQS, amortised: a page's links are one frontier message, sent,
      received and deleted ``SQS_BATCH_SIZE`` at a time (three requests per
      ten pages); a host's run message (sent, received and deleted ten at a
      time) once per run, amortised over the ``(fetch timeout -
      RUN_STOP_MARGIN_SECONDS) / delay`` pages of a run.

    Left out, so this is below any real figure: each run's lease, renewals
    and release, admission's backlog bundles and run schedules, robots.txt,
    every read, and every Lambda second and request.
    """
    if delay <= 0:
        raise ValueError("the floor amortises a flush over a delay's pages: give a delay > 0")
    pages_per_flush = max(1.0, hosts * settings.RUN_FLUSH_SECONDS / delay)
    run_seconds = settings.FUNCTIONS["fetch"].timeout_seconds - settings.RUN_STOP_MARGIN_SECONDS
    pages_per_run = max(1.0, run_seconds / delay)
    per_message = 3 / settings.SQS_BATCH_SIZE  # send, receive, delete, ten messages a call
    per_page = {
        "dynamodb": 2 * PRICES["ddb_wru"],
        "s3": (3 * PRICES["s3_put"] + PRICES["s3_get"]) / pages_per_flush,
        "sqs": (per_message + 3 / pages_per_flush + per_message / pages_per_run) * PRICES["sqs_requests"],
    }
    return {k: round(v * 1_000_000, 3) for k, v in per_page.items()}


def crawl(web: Web, extract_instances: int = EXTRACT_INSTANCES) -> dict[str, Any]:
    """Crawl ``web`` once against a fresh moto server, every call counted; its bill per million pages."""
    bill = Bill()
    with (
        moto_server(reset=True) as upstream,
        LoopbackWeb() as server,
        FaultyEndpoint(upstream, FaultPlan(failure_rate=0.0)) as endpoint,
        tempfile.TemporaryDirectory() as out,
    ):
        endpoint.observers.append(bill.observe)
        for i in range(web.hosts):
            server.add_host(loopback_address(i), fallback=site(i, web.hosts, web.pages))
        seeds = [server.url(loopback_address(i), "/0.html") for i in range(web.hosts)]
        started = time.monotonic()
        # Logs at INFO, the deployed application log level (infra.functions), so
        # log_bytes counts what a deployed crawl would log; the lines themselves
        # (on the crawl's stdout) are not wanted here.
        status = subprocess.run(
            [sys.executable, "-m", "crawlstack.cli",
             "crawl", "--local", *seeds, "--out", out, "--rules", str(RULES), "--delay", str(web.delay),
             "--max-depth", "1000", "--allow-private", "127.0.0.0/8", "--endpoint-url", endpoint.url,
             "--extract-concurrency", str(extract_instances), "--no-progress"],
            cwd=ROOT, env=checkout_env(POWERTOOLS_LOG_LEVEL="INFO"), stdout=subprocess.DEVNULL, check=False,
        ).returncode  # fmt: skip
        elapsed = time.monotonic() - started
        summary = json.loads(Path(out, "summary.json").read_text())
        records = len(Path(out, "records.jsonl").read_text().splitlines())
        decisions = fetch_decisions(Path(out, "metrics.jsonl"))
        page_requests = sum(1 for r in server.log if not r.path.endswith("robots.txt"))

    pages = summary["pages_fetched"]
    if status != 0 or pages == 0:
        raise SystemExit(f"cost: the crawl of {web.key} failed (exit {status}, {pages} pages)")
    log_bytes = summary.get("log_bytes") or {}
    invoked = invoked_functions(summary)
    uncounted = uncounted_logs(summary)
    if uncounted:
        raise SystemExit(f"cost: {web.key}: the logs of {', '.join(uncounted)} were not counted: {log_bytes}")
    per_page = 1_000_000 / pages
    consumer = {key: settings.QUEUES[key].consumer for key in summary["handler_seconds"]}
    gb_s = {
        key: seconds * settings.FUNCTIONS[consumer[key]].memory_mb / 1024
        for key, seconds in summary["handler_seconds"].items()
    }
    invocations = sum(summary["invocations"].values())
    logged = {f: (v.get("logger") or 0) + v.get("emf", 0) for f, v in log_bytes.items()}
    usd = bill.usd()
    usd["lambda"] = lambda_usd(sum(gb_s.values()))
    usd["lambda_requests"] = lambda_requests_usd(invocations)
    usd["logs"] = logs_usd(sum(logged.values()))
    usd_per_million = {k: round(usd[k] * per_page, 4) for k in SERVICES}
    usd_per_million["total"] = round(sum(usd_per_million.values()), 4)
    units = dict(bill.units)
    units["lambda_gb_s"] = sum(gb_s.values())
    units["lambda_requests"] = invocations
    units["log_bytes"] = sum(logged.values())
    print(
        f"cost: {web.key} ({web.shape}, delay {web.delay:g} s): {pages} pages in {elapsed:.1f} s, "
        f"${usd_per_million['total']:.2f} a million pages",
        file=sys.stderr,
    )
    return {
        "web": web.key,
        "hosts": web.hosts,
        "pages_per_host": web.pages,
        "delay": web.delay,
        "pages": pages,
        "page_requests": page_requests,
        "records": records,
        "elapsed_s": round(elapsed, 1),
        "usd_per_million_pages": usd_per_million,
        "calls_per_page": {k: round(v / pages, 3) for k, v in sorted(bill.calls_by_service().items())},
        "calls_per_page_by_operation": {
            f"{s}:{o}": round(n / pages, 3) for (s, o), n in sorted(bill.billed_calls.items())
        },
        "units_per_page": {k: round(v / pages, 4) for k, v in sorted(units.items())},
        "write_units_per_page_by_table": {
            t: round(v / pages, 3) for t, v in sorted(bill.write_units_by_table.items(), key=lambda kv: -kv[1])
        },
        "handler_ms_per_page": {k: round(v * 1000 / pages, 2) for k, v in summary["handler_seconds"].items()},
        "invocations": summary["invocations"],
        "log_bytes_per_page": {
            f: {kind: round(n / pages, 1) for kind, n in v.items() if n is not None}
            for f, v in sorted(log_bytes.items())
            if f in invoked
        },
        "pages_per_fetch_invocation": round(pages / max(1, summary["invocations"].get("fetch", 0)), 2),
        "sleep_or_wake": decisions,
        "unbilled_calls": {f"{s}:{o}": n for (s, o), n in sorted(bill.unbilled_calls.items())},
    }


def invoked_functions(summary: dict[str, Any]) -> list[str]:
    """The functions a crawl ran: the consumers of the queues its pump invoked (``summary.json``'s ``invocations``).

    A crawl runs dispatch, fetch and extract; the watch's schedule function is
    not among them, so a crawl's bill must not wait for its logs.
    """
    invoked = {settings.QUEUES[key].consumer for key, n in (summary.get("invocations") or {}).items() if n}
    return sorted(invoked)


def uncounted_logs(summary: dict[str, Any]) -> list[str]:
    """The invoked functions whose logged bytes the crawl did not count: a bill without them is not a bill."""
    log_bytes = summary.get("log_bytes") or {}
    return [f for f in invoked_functions(summary) if (log_bytes.get(f) or {}).get("logger") is None]


# The fetch function's metrics of what each wait became (functions/fetch/handler.py).
DECISION_METRICS = {
    "RunWaitsSlept": "waits slept",
    "RunSecondsSlept": "seconds slept",
    "RunsRescheduled": "runs rescheduled",
    "RunsDeadline": "runs at the deadline",
    "RunsDone": "runs done",
}


def fetch_decisions(metrics_file: Path) -> dict[str, float]:
    """Sleep or be woken, as the fetch function counted it (``DECISION_METRICS``) in ``OUT/metrics.jsonl``."""
    totals = dict.fromkeys(DECISION_METRICS.values(), 0.0)
    for line in metrics_file.read_text().splitlines():
        try:
            emf = json.loads(line)
        except ValueError:
            continue
        if not isinstance(emf, dict) or emf.get("service") != "fetch":
            continue
        for name, label in DECISION_METRICS.items():
            values = emf.get(name)
            if isinstance(values, list):
                totals[label] += sum(float(v) for v in values)
            elif isinstance(values, int | float):
                totals[label] += float(values)
    return {k: round(v, 2) for k, v in totals.items()}


def sleep_or_wake_note(decided: dict[str, float]) -> str:
    """Where each wait was slept or left to a delayed run message, as the fetch function counted it."""
    if not decided:
        return ""
    return (
        f"Sleep or be woken (should_sleep, per wait; metrics.jsonl): {decided['waits slept']:.0f} waits slept "
        f"({decided['seconds slept']:.1f} s in all, lingering for links included), "
        f"{decided['runs rescheduled']:.0f} runs rescheduled to a delayed message, "
        f"{decided['runs at the deadline']:.0f} at the invocation's deadline, {decided['runs done']:.0f} done."
    )


def _fig(label: str, value: Any, unit: str = "", target: str | None = None, meets: bool | None = None) -> dict:
    return {"label": label, "value": value, "unit": unit, "target": target, "meets": meets}


def figures(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows: each web's total, then its shares and calls, then the other delays and the floor."""
    out: list[dict[str, Any]] = []
    target = f"<= ${TARGET_USD_PER_MILLION:g} (stretch ${STRETCH_USD_PER_MILLION:g})"
    for web in WEBS:
        run = runs.get(web.key)
        if run is None or web.delay:
            continue
        usd = run["usd_per_million_pages"]
        where = f"{web.key} web, {web.shape}, delay 0"
        if web.key in TARGET_WEBS:
            met = usd["total"] <= TARGET_USD_PER_MILLION
            out.append(_fig(f"cost per million pages, {where}", usd["total"], "$", target, met))
        else:
            out.append(_fig(f"cost per million pages, {where}", usd["total"], "$"))
        out += [_fig(f"{service} share, {web.key}", usd[service], "$ per M pages") for service in SERVICES]
        out += [
            _fig(f"{service} calls per page, {web.key}", v, "calls") for service, v in run["calls_per_page"].items()
        ]
        out.append(_fig(f"dynamodb write units per page, {web.key}", run["units_per_page"]["ddb_wru"], "WRU"))
    for web in WEBS:
        run = runs.get(web.key)
        if run is not None and web.delay:
            out.append(
                _fig(
                    f"cost per million pages, delay {web.delay:g} s ({web.shape})",
                    run["usd_per_million_pages"]["total"],
                    "$",
                )
            )
            decided = run.get("sleep_or_wake") or {}
            if decided:
                out.append(
                    _fig(
                        f"waits slept / runs rescheduled, delay {web.delay:g} s",
                        f"{decided['waits slept']:.0f} / {decided['runs rescheduled']:.0f}",
                    )
                )
    floor = design_floor()
    out.append(
        _fig(
            f"the design's floor at {settings.DEFAULT_DELAY_SECONDS:g} s: claim and record a page, "
            "a flush's objects shared (arithmetic, see notes)",
            round(sum(floor.values()), 2),
            "$",
        )
    )
    deep = runs.get("deep")
    if deep is not None:
        out += [
            _fig(f"dynamodb write units per page, {table} table, deep", v, "WRU")
            for table, v in deep["write_units_per_page_by_table"].items()
            if v >= 0.05
        ]
    return out


def notes(runs: dict[str, dict[str, Any]]) -> str:
    parts = []
    for key in ("deep", "today"):
        run = runs.get(key)
        if run is None:
            continue
        total = run["usd_per_million_pages"]["total"]
        verdict = (
            "meets the stretch"
            if total <= STRETCH_USD_PER_MILLION
            else "meets the target, not the stretch"
            if total <= TARGET_USD_PER_MILLION
            else "misses the target"
        )
        parts.append(
            f"{key} web at delay 0: ${total:.2f} a million pages, which {verdict} "
            f"(<= ${TARGET_USD_PER_MILLION:g}, stretch ${STRETCH_USD_PER_MILLION:g}); "
            f"{run['units_per_page']['ddb_wru']:.2f} write units and {run['pages_per_fetch_invocation']:.1f} pages "
            "a fetch invocation."
        )
    for web in WEBS:
        run = runs.get(web.key)
        if run is not None and web.delay:
            parts.append(
                f"At {web.delay:g} s ({web.shape}): ${run['usd_per_million_pages']['total']:.2f} a million pages, "
                f"Lambda ${run['usd_per_million_pages']['lambda']:.2f} of it (fetch "
                f"{run['handler_ms_per_page'].get('fetch', 0):.0f} ms a page, sleeps included), "
                f"{run['pages_per_fetch_invocation']:.1f} pages a fetch invocation. A small web: an invocation's "
                f"sleep is shared by its {web.hosts} hosts, not the {settings.QUEUES['fetch'].batch_size} of a "
                "full batch, and each flush's objects and each host's fixed costs (robots.txt, its run's lease "
                "and release) by few pages; bench/paper.py works these out at scale. "
                + sleep_or_wake_note(run.get("sleep_or_wake") or {})
            )
    floor = design_floor()
    fast = design_floor(1.0)
    delay = settings.DEFAULT_DELAY_SECONDS
    hosts = settings.QUEUES["fetch"].batch_size
    parts.append(
        "Where a page's write units go: the urls table holds its dedupe claim (a duplicate link is dropped on a "
        "read first), and nothing more for a page fetched on its first try (its outcome is its flush's "
        "crawl-log line; a retry's state is written and read); the results table its record; the crawls table "
        "a count of the flush's outcomes per crawl; the hosts table each "
        "host's run (a conditional schedule when a dispatch batch that admits to the host finds it has none, a "
        "consistent read of it otherwise; per fetch invocation a "
        "lease, a renewal every "
        f"{settings.RUN_LEASE_SECONDS - settings.RUN_LEASE_RENEW_BEFORE_SECONDS:g} s and a release), its page-cap "
        "counter and its robots.txt; the parked table the hosts' backlog bundles (put at admission, replaced or "
        "deleted at a flush). S3: per flush of a fetch invocation's hosts, one WARC and one crawl-log object a "
        "crawl, and extract's records object. The design's floor (bench/cost.py `design_floor`), before any "
        "run or admission write, any read and any Lambda second: the dedupe claim and the record "
        "a page (a write unit each); a flush's three PUTs, extract's GET and the WARC's three extract-queue "
        f"requests over its pages ({hosts} hosts x {settings.RUN_FLUSH_SECONDS:g} s / delay: "
        f"{hosts * settings.RUN_FLUSH_SECONDS / delay:.0f} at {delay:g} s); the frontier's send, receive and "
        f"delete per {settings.SQS_BATCH_SIZE} pages (a page's links are one message); a host's run message "
        "per run of (fetch timeout - stop margin) / delay pages. At the stack's default delay of "
        f"{delay:g} s: ${sum(floor.values()):.2f} a million pages (DynamoDB ${floor['dynamodb']:.2f}, S3 "
        f"${floor['s3']:.3f}, SQS ${floor['sqs']:.3f}); at 1 s ${sum(fast.values()):.2f}."
    )
    deep_fetch_log = runs["deep"]["log_bytes_per_page"].get("fetch", {}).get("logger") if "deep" in runs else None
    if deep_fetch_log is None:
        fetch_log = ""
    elif deep_fetch_log >= 100:
        fetch_log = (
            f"; fetch's logger lines are most of the logs share ({deep_fetch_log:.0f} bytes a page on the deep web)"
        )
    else:
        fetch_log = (
            f"; fetch's logger lines at INFO are {deep_fetch_log:.0f} bytes a page on the deep web (a page's "
            "outcome is logged at DEBUG: its crawl-log line is the record)"
        )
    parts.append(
        "Lambda is billed on each handler call's wall time, sleeps included, on this host's CPU (not Graviton) "
        "with handler threads sharing one interpreter; the extract instances run at once, but they share one "
        "process's memory of links already sent (crawlstack.wiring builds one set of services a process), so "
        "fewer duplicate links reach dispatch than four separate Lambda containers would send. Logs: the "
        "functions' logger lines at INFO and their EMF metric lines; Lambda's START/END/REPORT lines are not "
        f"sent (system log level WARN){fetch_log}. Left out: X-Ray traces, CloudWatch custom metrics (per "
        "metric-month, not per page), log storage, Lambda's billed init time."
    )
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--only", default=",".join(w.key for w in WEBS), help="comma-separated webs: " + ", ".join(w.key for w in WEBS)
    )
    parser.add_argument("--extract-concurrency", type=int, default=EXTRACT_INSTANCES, metavar="N")
    args = parser.parse_args(argv)
    chosen = [w for w in WEBS if w.key in args.only.split(",")]
    if not chosen:
        parser.error(f"--only: none of {args.only!r} is a web")

    load_before = load_average()
    started = time.monotonic()
    runs = {web.key: crawl(web, args.extract_concurrency) for web in chosen}
    headline = runs.get("deep") or next(iter(runs.values()))
    shapes = "; ".join(f"{w.key}: {w.shape}, delay {w.delay:g} s" for w in chosen)
    result = {
        "name": "cost",
        "machine": machine(),
        "method": (
            f"`crawlstack crawl --local --extract-concurrency {args.extract_concurrency}` of generated webs "
            f"({shapes}; {LINKS_PER_PAGE} links a page, {SAME_HOST_SHARE:.0%} same host, a record a page; the 1 s "
            "and 5 s webs are smaller so politeness fits in a minute), each in its own process, through a counting "
            "endpoint in front of a fresh moto server in the benchmark's; every AWS call priced at "
            "crawlstack.local.billing's us-east-1 list prices; Lambda from each handler call's wall time (sleeps "
            "included) at each function's memory, arm64, plus a request per invocation; CloudWatch Logs ingestion "
            "from the bytes the functions log at INFO (logger and EMF lines)."
        ),
        "load": {"before": load_before},
        "bench_seconds": round(time.monotonic() - started, 1),
        "extract_instances": args.extract_concurrency,
        # The headline web's figures at the top level, as bench/paper.py reads them.
        "headline_web": headline["web"],
        **{k: v for k, v in headline.items() if k not in ("web",)},
        "prices": PRICES,
        "design_floor_usd_per_million_pages": design_floor(),
        "runs": runs,
        "notes": notes(runs),
        "figures": figures(runs),
    }
    write_result(result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
