"""On paper: the deployed stack's throughput and cost at 1 000 and 100 000 hosts.

Nothing is crawled here.  The per-page figures come from ``bench/cost.py``'s
measured ``bench/results/cost.json`` (handler time per page per function,
billable units and dollars per million pages); the limits are AWS's
documented quotas (cited in ``LIMITS``) and the stack's own settings
(``cdk.json``'s fetch maximum concurrency, ``crawlstack.settings``).  For each
number of hosts and politeness delay it works out:

* the politeness ceiling: every host fetched once per delay, hosts / delay
  pages a second;
* the Lambda concurrency each function needs at a rate: pages/s x seconds of
  handler per page (fetch also holds its invocation for the network time of
  each page, an assumption: loopback measures none);
* each limit as a ceiling on pages/s, and which one binds, with the stack as
  deployed by default and with every raisable quota raised;
* pages a day, dollars a day and per million pages.

Without a ``cost.json`` it uses ``SAMPLE_COST`` (labelled as a sample in the
output), so the arithmetic can be read before the measurement exists.

    python bench/paper.py [--cost bench/results/cost.json] [--fetch-latency 0.5]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlstack import settings

HOSTS = (1_000, 100_000)
DELAYS = (5.0, 1.0)
FUNCTIONS = ("dispatch", "fetch", "extract")
# Network time per page that a loopback measurement does not have (an input, not a measurement).
DEFAULT_FETCH_LATENCY_S = 0.5
# A full SQS batch: the fetcher fetches a batch's tasks in parallel threads.
FULL_BATCH = 10
# The stack as deployed by default: cdk.json's crawlstack:fetch_concurrency (infra/config.py).
STACK_FETCH_MAX_CONCURRENCY = 10
# Bytes a host name takes in the crawl item's seed_hosts set, on average (an assumption), and the rest of the item.
HOST_NAME_BYTES = 20
CRAWL_ITEM_BASE_BYTES = 1024
# Writes a page makes to its host's politeness item: reserve, claim, release (and mark_parked when it parked).
HOST_ITEM_WRITES_PER_PAGE = 4

# AWS limits, each with where it is documented (checked 2026-11-22).
LIMITS: dict[str, tuple[float, str, str]] = {
    "account_concurrency": (
        1_000,
        "Lambda concurrent executions per Region, default; raisable to tens of thousands",
        "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
    ),
    "esm_concurrency": (
        1_000,
        "SQS event source mapping (standard queue): at most 1 000 batches processed at once; it starts at 5 "
        "and adds up to 300 a minute (so about 3.3 minutes from 5 to 1 000). Its MaximumConcurrency setting "
        "takes 2 to 1 000",
        "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html; "
        "https://docs.aws.amazon.com/lambda/latest/api/API_ScalingConfig.html",
    ),
    "ddb_table_wru": (
        40_000,
        "DynamoDB on-demand: 40 000 write (and read) request units a second per table, default table-level "
        "quota; raisable. A new table takes 4 000 WRU/s at once and doubles its previous peak within 30 minutes",
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html; "
        "https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb",
    ),
    "ddb_partition_wru": (
        1_000,
        "DynamoDB: one partition serves at most 1 000 WRU (or 3 000 RRU) a second, so one item takes at most "
        "1 000 one-KB writes a second",
        "https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb",
    ),
    "ddb_item_bytes": (
        400 * 1024,
        "DynamoDB item size limit, 400 KB; an UpdateItem consumes write units for the larger of the item's "
        "sizes before and after, per KB",
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html; "
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html",
    ),
    "sqs_in_flight": (
        120_000,
        "SQS standard queue: about 120 000 messages in flight (received, not deleted); backlog unlimited; "
        "DelaySeconds at most 15 minutes",
        "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html",
    ),
}

# Shaped like bench/cost.py's output; the figures are an illustration, not a measurement.
SAMPLE_COST: dict[str, Any] = {
    "name": "cost",
    "machine": "SAMPLE (no bench/results/cost.json)",
    "method": "sample figures for reading the arithmetic; run bench/cost.py for measured ones",
    "pages": 100,
    "calls_per_page": {"sqs": 2.3, "dynamodb": 15.0, "s3": 2.4},
    "units_per_page": {
        "sqs_requests": 2.7,
        "ddb_wru": 12.0,
        "ddb_rru": 2.7,
        "s3_put": 1.2,
        "s3_get": 1.2,
        "lambda_gb_s": 0.37,
    },
    "usd_per_million_pages": {"sqs": 1.1, "dynamodb": 8.0, "s3": 6.4, "lambda": 4.9, "total": 20.4},
    "handler_ms_per_page": {"dispatch": 190.0, "fetch": 360.0, "extract": 90.0},
    "prices": {"lambda_gb_s": 0.0000133334},
    "figures": [],
}


# --- the arithmetic (pure functions) ---------------------------------------------
def politeness_ceiling(hosts: int, delay: float) -> float:
    """Pages a second when every host is fetched once per delay."""
    return hosts / delay


def seconds_per_page(handler_ms: dict[str, float], fetch_latency_s: float, fetch_parallel: int = 1) -> dict[str, float]:
    """Invocation seconds each function spends per page; dispatch may be keyed by its queue, "frontier".

    ``fetch_parallel``: pages one fetch invocation waits on the network for at
    once (1: each page alone, the conservative case; a full batch's 10 tasks
    are fetched in parallel threads).
    """
    dispatch = handler_ms.get("dispatch", handler_ms.get("frontier"))
    if dispatch is None:
        raise KeyError("handler_ms_per_page has neither 'dispatch' nor 'frontier'")
    return {
        "dispatch": dispatch / 1000,
        "fetch": handler_ms["fetch"] / 1000 + fetch_latency_s / fetch_parallel,
        "extract": handler_ms["extract"] / 1000,
    }


def concurrency_needed(rate: float, seconds: dict[str, float]) -> dict[str, float]:
    """Concurrent invocations per function at ``rate`` pages a second (Little's law)."""
    return {name: rate * s for name, s in seconds.items()}


def crawl_item_bytes(hosts: int) -> int:
    """The crawls item of a crawl seeded on ``hosts`` hosts: its config plus the seed_hosts set."""
    return CRAWL_ITEM_BASE_BYTES + hosts * HOST_NAME_BYTES


def budget_counter_ceiling(hosts: int) -> float:
    """Pages a second the crawl's page budget counter admits (0: the item cannot hold the seed hosts).

    A dispatch container takes up to ``settings.BUDGET_CHUNK`` pages of the
    budget with one UpdateItem of ``pages_admitted`` on the crawl's item (far
    from the budget's end), which costs a write unit per KB of that whole
    item, and one item is one partition.
    """
    size = crawl_item_bytes(hosts)
    if size > LIMITS["ddb_item_bytes"][0]:
        return 0.0
    return LIMITS["ddb_partition_wru"][0] / math.ceil(size / 1024) * settings.BUDGET_CHUNK


@dataclass(frozen=True)
class Quotas:
    account_concurrency: float
    fetch_max_concurrency: float
    table_wru: float


DEFAULT_QUOTAS = Quotas(
    account_concurrency=LIMITS["account_concurrency"][0],
    fetch_max_concurrency=STACK_FETCH_MAX_CONCURRENCY,
    table_wru=LIMITS["ddb_table_wru"][0],
)
# Only the stack's own setting raised (to the most it takes): no quota request to AWS.
FETCH_RAISED = Quotas(
    account_concurrency=LIMITS["account_concurrency"][0],
    fetch_max_concurrency=1_000,
    table_wru=LIMITS["ddb_table_wru"][0],
)
# Every raisable quota out of the way; the event source mapping's 1 000 and the setting's own maximum remain.
RAISED_QUOTAS = Quotas(account_concurrency=math.inf, fetch_max_concurrency=1_000, table_wru=math.inf)


def ceilings(
    hosts: int, delay: float, seconds: dict[str, float], wru_per_page: float, quotas: Quotas
) -> dict[str, float]:
    """Each limit as the most pages a second it allows."""
    esm = LIMITS["esm_concurrency"][0]
    return {
        "politeness (hosts / delay)": politeness_ceiling(hosts, delay),
        "fetch's event source maximum concurrency": quotas.fetch_max_concurrency / seconds["fetch"],
        "1 000 concurrent batches per event source": min(esm / s for s in seconds.values()),
        "account concurrency": quotas.account_concurrency / sum(seconds.values()),
        # Conservative: as if every write of a page went to one table.
        "DynamoDB table write quota": quotas.table_wru / wru_per_page,
    }


def binding(limits: dict[str, float]) -> tuple[str, float]:
    """The limit that binds, and the pages a second it allows."""
    name = min(limits, key=lambda k: limits[k])
    return name, limits[name]


def usd_per_million(cost: dict[str, Any], fetch_latency_s: float, fetch_memory_gb: float = 0.5) -> float:
    """Measured dollars per million pages plus fetch's billed network time (each page alone in its invocation)."""
    price = float(cost.get("prices", {}).get("lambda_gb_s", 0.0000133334))
    latency_usd = fetch_latency_s * fetch_memory_gb * price * 1_000_000
    return float(cost["usd_per_million_pages"]["total"]) + latency_usd


def per_day(rate: float, usd_per_m: float) -> tuple[float, float]:
    """(pages a day, dollars a day) at ``rate`` pages a second."""
    pages = rate * 86_400
    return pages, pages * usd_per_m / 1_000_000


# --- the report --------------------------------------------------------------------
def load_cost(path: Path) -> tuple[dict[str, Any], bool]:
    """(cost.json's contents, True if measured) or (SAMPLE_COST, False) when the file is absent."""
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8")), True
    return SAMPLE_COST, False


def figure(label: str, value: float | str, unit: str) -> dict[str, Any]:
    if isinstance(value, float):
        value = round(value, 2) if abs(value) < 100 else round(value)
    return {"label": label, "value": value, "unit": unit, "target": None, "meets": None}


def scenario(cost: dict[str, Any], hosts: int, delay: float, fetch_latency_s: float) -> dict[str, Any]:
    seconds = seconds_per_page(cost["handler_ms_per_page"], fetch_latency_s)
    wru = float(cost["units_per_page"]["ddb_wru"])
    ceiling = politeness_ceiling(hosts, delay)
    usd_m = usd_per_million(cost, fetch_latency_s)
    out: dict[str, Any] = {
        "hosts": hosts,
        "delay": delay,
        "ceiling": ceiling,
        "needed": concurrency_needed(ceiling, seconds),
        "usd_per_million": usd_m,
        "budget_ceiling": budget_counter_ceiling(hosts),
        "host_item_wru_per_s": HOST_ITEM_WRITES_PER_PAGE / delay,
        "fetch_queue_messages": 2 * hosts,
    }
    parallel = seconds_per_page(cost["handler_ms_per_page"], fetch_latency_s, FULL_BATCH)
    for key, quotas, secs in (
        ("default", DEFAULT_QUOTAS, seconds),
        ("fetch_raised", FETCH_RAISED, seconds),
        ("raised", RAISED_QUOTAS, seconds),
        ("raised_parallel", RAISED_QUOTAS, parallel),
    ):
        name, rate = binding(ceilings(hosts, delay, secs, wru, quotas))
        pages, usd = per_day(rate, usd_m)
        out[key] = {"binds": name, "rate": rate, "pages_per_day": pages, "usd_per_day": usd}
    return out


def notes(cost: dict[str, Any], measured: bool, rows: list[dict[str, Any]], fetch_latency_s: float) -> str:
    seconds = seconds_per_page(cost["handler_ms_per_page"], fetch_latency_s)
    source = "measured" if measured else "SAMPLE figures (no bench/results/cost.json): not a measurement"
    lines = [
        "## On paper: 1 000 and 100 000 hosts (`bench/paper.py`)",
        "",
        f"From `bench/results/cost.json` ({source}; {cost.get('machine', '?')}): handler time per page "
        f"dispatch {seconds['dispatch'] * 1000:.0f} ms, fetch {cost['handler_ms_per_page']['fetch']:.0f} ms "
        f"+ {fetch_latency_s * 1000:.0f} ms assumed network time, extract {seconds['extract'] * 1000:.0f} ms; "
        f"{cost['units_per_page']['ddb_wru']:.1f} DynamoDB write units and "
        f"${cost['usd_per_million_pages']['total']:.2f} per million pages "
        f"(${rows[0]['usd_per_million']:.2f} with fetch billed for the network time). Nothing was deployed.",
        "",
        "| hosts | delay | politeness ceiling | concurrency needed (dispatch / fetch / extract) "
        "| as deployed: binds at | pages/day | $/day | quotas raised: binds at | pages/day | $/day |",
        "|---:|---:|---:|---|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        need = " / ".join(f"{r['needed'][f]:,.0f}" for f in FUNCTIONS)
        d, q = r["default"], r["raised"]
        lines.append(
            f"| {r['hosts']:,} | {r['delay']:g} s | {r['ceiling']:,.0f} pages/s | {need} "
            f"| {d['binds']}: {d['rate']:,.0f} pages/s | {d['pages_per_day']:,.0f} | ${d['usd_per_day']:,.2f} "
            f"| {q['binds']}: {q['rate']:,.0f} pages/s | {q['pages_per_day']:,.0f} | ${q['usd_per_day']:,.2f} |"
        )
    budget = {r["hosts"]: r["budget_ceiling"] for r in rows}
    parallel = "; ".join(
        f"{r['hosts']:,} hosts at {r['delay']:g} s: {r['raised_parallel']['rate']:,.0f} pages/s "
        f"({r['raised_parallel']['binds']})"
        for r in rows
    )
    fetch_raised = "; ".join(
        f"{r['hosts']:,} hosts at {r['delay']:g} s: {r['fetch_raised']['rate']:,.0f} pages/s "
        f"({r['fetch_raised']['binds']})"
        for r in rows
    )
    lines += [
        "",
        "With only fetch's maximum concurrency raised to 1 000 in `cdk.json` (no quota request to AWS): "
        f"{fetch_raised}.",
        "",
        "How to read it: concurrency needed = pages/s x seconds per page (Little's law), fetch counted as if "
        "each page held an invocation alone for its network time. The fetcher fetches a batch's tasks in "
        f"parallel threads, so with full batches of {FULL_BATCH} the network time per page is a tenth: quotas "
        f"raised, that gives {parallel}. "
        '"As deployed" is the stack with `cdk.json`\'s defaults: '
        f"fetch's event source maximum concurrency {STACK_FETCH_MAX_CONCURRENCY}, the account's 1 000 concurrent "
        "executions, DynamoDB's default table quota; \"quotas raised\" sets fetch's maximum concurrency to "
        "1 000 (the most the setting takes) and lifts the account and table quotas, leaving the event source "
        "mapping's 1 000 concurrent batches per function. Cost per page does not depend on the scale: a host's "
        "backlog costs a constant number of queue operations and DynamoDB writes per URL (ARCHITECTURE.md, "
        '"Frontier at scale"), so $/day is pages/day x $ per million pages.',
        "",
        "Limits and sources:",
        "",
    ]
    lines += [f"- {text} ({value:,.0f}): {url}" for value, text, url in LIMITS.values()]
    lines += [
        f"- The stack: fetch's event source `max_concurrency` from `crawlstack:fetch_concurrency` "
        f"(`cdk.json`: {STACK_FETCH_MAX_CONCURRENCY}; `infra/functions.py`), no maximum on dispatch and extract, "
        "no reserved concurrency; batch size 10 (extract 1).",
        "",
        "What does not bind: a host's politeness item takes about "
        f"{HOST_ITEM_WRITES_PER_PAGE} writes a page, {HOST_ITEM_WRITES_PER_PAGE / DELAYS[0]:.1f} WRU/s at a 5 s "
        "delay, far below a partition's 1 000; the fetch queue holds at most "
        f"{settings.DELAYED_HOST_WINDOW} messages per host ({settings.DELAYED_HOST_WINDOW * 100_000:,} at "
        "100 000 hosts, mostly delayed, and SQS stores any backlog), and at most 10 per invocation are in "
        f"flight, well under 120 000; no message waits more than {settings.DELAYED_HOST_WINDOW} delays, and "
        "never past SQS's 15 minutes (the window shrinks for long delays).",
        "",
        "Past 1 000 concurrent batches per function (100 000 hosts need it): the event source mapping's "
        "provisioned mode (a minimum and maximum of event pollers, "
        "https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html) or several fetch "
        "queues and functions; neither is modelled here.",
        "",
        "What would bind first with a page budget (`--max-pages`): a dispatch container takes up to "
        f"{settings.BUDGET_CHUNK} pages of it at a time with one write of the crawl's `pages_admitted` on the "
        "crawls item, which also holds `seed_hosts`, one string per seeded host "
        f"(assumed {HOST_NAME_BYTES} bytes each). An UpdateItem costs a write unit per KB of the whole item and "
        "the item is one partition: at 1 000 seed hosts (about "
        f"{crawl_item_bytes(1_000) / 1024:.0f} KB) that admits at most {budget[1_000]:,.0f} pages/s, whatever "
        "the concurrency; at 100 000 seed hosts (about "
        f"{crawl_item_bytes(100_000) / 1024 / 1024:.1f} MB) the set cannot be stored at all (400 KB items), so "
        "one crawl cannot be seeded on 100 000 hosts until seed hosts and the budget move out of the crawl item.",
    ]
    return "\n".join(lines)


def report(cost: dict[str, Any], measured: bool, fetch_latency_s: float) -> dict[str, Any]:
    rows = [scenario(cost, h, d, fetch_latency_s) for h in HOSTS for d in DELAYS]
    figures = []
    for r in rows:
        tag = f"{r['hosts']:,} hosts, {r['delay']:g} s"
        figures.append(figure(f"{tag}: politeness ceiling", r["ceiling"], "pages/s"))
        for f in FUNCTIONS:
            figures.append(figure(f"{tag}: {f} concurrency needed", r["needed"][f], "invocations"))
        for key, label in (
            ("default", "as deployed"),
            ("fetch_raised", "fetch maximum concurrency 1 000"),
            ("raised", "quotas raised"),
        ):
            s = r[key]
            figures.append(figure(f"{tag}, {label}: binding limit", s["binds"], ""))
            figures.append(figure(f"{tag}, {label}: throughput", s["rate"], "pages/s"))
            figures.append(figure(f"{tag}, {label}: pages a day", s["pages_per_day"], "pages"))
            figures.append(figure(f"{tag}, {label}: cost a day", s["usd_per_day"], "$"))
        figures.append(figure(f"{tag}: page budget counter ceiling", r["budget_ceiling"], "pages/s"))
    figures.append(figure("cost per million pages, with fetch network time", rows[0]["usd_per_million"], "$"))
    machine = cost.get("machine", "?")
    return {
        "name": "paper",
        "machine": f"on paper (from cost.json measured on {machine})" if measured else f"on paper ({machine})",
        "method": (
            "Arithmetic over bench/results/cost.json's per-page figures (handler ms per page, write units, "
            f"$ per million pages), an assumed {fetch_latency_s:g} s of network time per fetched page, AWS's "
            "documented Lambda, SQS and DynamoDB limits and the stack's settings; see notes for every assumption."
        ),
        "figures": figures,
        "notes": notes(cost, measured, rows, fetch_latency_s),
    }


def main(argv: list[str] | None = None) -> int:
    # Here, not at the top: the arithmetic above is imported by its tests, which need no bench/common.
    from common import RESULTS, write_result  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cost", type=Path, default=RESULTS / "cost.json", help="bench/cost.py's result")
    parser.add_argument(
        "--fetch-latency", type=float, default=DEFAULT_FETCH_LATENCY_S, help="network seconds per fetched page"
    )
    args = parser.parse_args(argv)
    cost, measured = load_cost(args.cost)
    result = report(cost, measured, args.fetch_latency)
    write_result(result)
    print(result["notes"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
