"""On paper: the deployed stack's throughput and cost at 1 000 and 100 000 hosts, crawled as host runs.

Nothing is crawled here.  The per-page figures come from ``bench/cost.py``'s
measured ``bench/results/cost.json`` (handler time per page of each function,
write units per page by table, read units, dollars per million pages); the
limits are AWS's documented quotas (``LIMITS``, each cited) and the stack's
own settings (``cdk.json``'s fetch maximum concurrency, ``crawlstack.settings``).

The design it works out (``crawlstack.runs``): dispatch adds admitted URLs to
their hosts' backlogs and starts one run per host; a fetch invocation takes a
batch of up to ``HOSTS_PER_INVOCATION`` run messages, leases each host and
works them all at once, each host sequential at its delay, the sleeping
shared; every ``RUN_FLUSH_SECONDS`` its hosts flush one WARC and one crawl-log
object together; it stops ``RUN_STOP_MARGIN_SECONDS`` before its timeout and
each host is woken again by a delayed run message.  So, with every host busy
(each with a deep backlog):

* a host fetches a page every max(delay, network time + fetch's own time a
  page), less the moment each next run takes to start (the batching window)
  after a run of timeout - stop margin seconds;
* fetch's concurrency is the hosts worked at once / hosts a batch: an
  invocation-second serves a full batch of hosts, so fetch costs delay /
  hosts-a-batch invocation-seconds a page, not a page's network time;
* dispatch and extract work page by page: their concurrency is pages/s x
  handler seconds a page (Little's law);
* each limit is a ceiling on pages/s and the lowest binds: as deployed, with
  only fetch's maximum concurrency raised in ``cdk.json``, and with every
  quota AWS raises on request raised;
* dollars a page: the measured total with fetch's Lambda seconds and S3
  replaced by this arithmetic (the sleep shared by a batch of hosts, a
  flush's objects shared by its pages) and each run's lease writes and run
  message added;
* and the configuration that reaches ``TARGET_PAGES_PER_S``.

Without a ``cost.json`` it uses ``SAMPLE_COST`` (labelled as a sample in the
output), so the arithmetic can be read before the measurement exists.

    python bench/paper.py [--cost bench/results/cost.json] [--fetch-latency 0.5]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.fetch.pacing import FLUSH_USD, break_even_wait
from crawlstack.prices import PRICES

HOSTS = (1_000, 100_000)
DELAYS = (5.0, 1.0)
FUNCTIONS = ("dispatch", "fetch", "extract")
TARGET_PAGES_PER_S = 10_000
# Network time per page that a loopback measurement does not have (an input, not a measurement).
DEFAULT_FETCH_LATENCY_S = 0.5
SECONDS_A_DAY = 86_400

# --- the stack (crawlstack.settings, cdk.json, infra/config.py) ----------------------
FETCH = settings.FUNCTIONS["fetch"]
HOSTS_PER_INVOCATION = settings.QUEUES["fetch"].batch_size
BATCHING_WINDOW_S = float(settings.QUEUES["fetch"].batching_window_seconds)
# A host's run in one invocation: from its lease until it stops short of the timeout.
RUN_SECONDS = FETCH.timeout_seconds - settings.RUN_STOP_MARGIN_SECONDS
# A lease is renewed once less than RUN_LEASE_RENEW_BEFORE_SECONDS of it is left.
RENEW_EVERY_S = settings.RUN_LEASE_SECONDS - settings.RUN_LEASE_RENEW_BEFORE_SECONDS
FLUSH_SECONDS = settings.RUN_FLUSH_SECONDS
CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"
# infra/config.py: DEFAULT_FETCH_CONCURRENCY and MAX_FETCH_CONCURRENCY (the event source's ScalingConfig range).
DEFAULT_FETCH_CONCURRENCY = 10
FETCH_CONCURRENCY_SETTING_MAX = 1_000


def stack_fetch_concurrency(path: Path = CDK_JSON) -> int:
    """``crawlstack:fetch_concurrency`` as ``cdk.json`` deploys it (infra/config.py's default without one)."""
    try:
        context = json.loads(path.read_text(encoding="utf-8")).get("context", {})
        return int(context.get("crawlstack:fetch_concurrency", DEFAULT_FETCH_CONCURRENCY))
    except (OSError, ValueError):
        return DEFAULT_FETCH_CONCURRENCY


STACK_FETCH_MAX_CONCURRENCY = stack_fetch_concurrency()

# --- assumptions (not measured) --------------------------------------------------------
# One run message as a record of the fetch event: its ~100-byte body, receipt handle, attributes, ARN.
RUN_RECORD_BYTES = 1024
# Bytes a host name takes in the crawl item's seed_hosts set, on average, and the rest of the item.
HOST_NAME_BYTES = 20
CRAWL_ITEM_BASE_BYTES = 1024
# Admission at its worst: every admitted URL alone in its host's dispatch batch costs a bundle put,
# a schedule and the bundle's delete once served (a write unit each), where the measured web shares them.
ADMISSION_WORST_WRU = 3.0
# Per flush of an invocation's hosts: the WARC, its crawl log and extract's records object (PUTs),
# extract's GET of the WARC and its invocation (crawlstack.fetch.pacing.FLUSH_USD), and the WARC's
# message on the extract queue: S3's delivery, the event source's receive and delete.
FLUSH_SQS_REQUESTS = 3
# Per host per run: its lease, its release (the wake-up's new run id) and a renewal every RENEW_EVERY_S,
# each one conditional write of a small item; its wake-up message sent, received and deleted in calls
# of SQS_BATCH_SIZE; a share of the invocation's request.
RUN_FIXED_WRITES = 2
# The share of a default quota a configuration plans to use before asking for more: the account's
# concurrency is shared by every function in the Region, and a table's by every crawl.
HEADROOM = 0.8

# AWS limits, each with where it is documented (checked 2026-11-25).
LIMITS: dict[str, tuple[float, str, str]] = {
    "account_concurrency": (
        1_000,
        "Lambda concurrent executions per Region, default; raisable on request to tens of thousands",
        "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
    ),
    "esm_concurrency": (
        1_000,
        "SQS event source mapping, standard (default) mode: at most 1 000 batches processed at once; it starts "
        "at 5 and adds up to 300 a minute; its MaximumConcurrency setting takes 2 to 1 000. Past that, "
        "provisioned mode (a minimum and maximum of event pollers, each up to 10 concurrent invocations)",
        "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html; "
        "https://docs.aws.amazon.com/lambda/latest/api/API_ScalingConfig.html; "
        "https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html",
    ),
    "lambda_timeout_s": (
        900,
        "Lambda function timeout, at most 900 seconds",
        "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
    ),
    "payload_bytes": (
        6 * 1024 * 1024,
        "Lambda invocation payload, synchronous (an event source mapping's batch): 6 MB",
        "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html",
    ),
    "vcpu_mb": (
        1_769,
        "Lambda CPU is proportional to memory: 1 769 MB is one vCPU",
        "https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html",
    ),
    "visibility_factor": (
        6,
        "An SQS event source's queue: visibility timeout at least six times the function's timeout",
        "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html",
    ),
    "sqs_in_flight": (
        120_000,
        "SQS standard queue: about 120 000 messages in flight (received, not deleted), raisable on request; "
        "backlog unlimited; DelaySeconds at most 15 minutes",
        "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html",
    ),
    "ddb_table_wru": (
        40_000,
        "DynamoDB on-demand: 40 000 write request units a second per table, default table-level quota, "
        "raisable. A new table takes 4 000 WRU/s at once and doubles its previous peak within 30 minutes",
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html; "
        "https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb",
    ),
    "ddb_table_rru": (
        40_000,
        "DynamoDB on-demand: 40 000 read request units a second per table, default table-level quota, raisable",
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode-max-throughput.html",
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
}

# Shaped like bench/cost.py's output (the deep web's figures, rounded); an illustration, not a measurement.
SAMPLE_COST: dict[str, Any] = {
    "name": "cost",
    "machine": "SAMPLE (no bench/results/cost.json)",
    "method": "sample figures for reading the arithmetic; run bench/cost.py for measured ones",
    "pages": 1000,
    "calls_per_page": {"sqs": 0.13, "dynamodb": 4.5, "s3": 0.16},
    "units_per_page": {
        "sqs_requests": 0.15,
        "ddb_wru": 3.3,
        "ddb_rru": 2.1,
        "s3_put": 0.08,
        "s3_get": 0.08,
        "lambda_gb_s": 0.053,
    },
    "write_units_per_page_by_table": {
        "crawlstack-urls": 2.0,
        "crawlstack-results": 1.0,
        "crawlstack-hosts": 0.16,
        "crawlstack-parked": 0.16,
    },
    "usd_per_million_pages": {
        "sqs": 0.06,
        "dynamodb": 2.3,
        "s3": 0.43,
        "lambda": 0.71,
        "lambda_requests": 0.01,
        "logs": 0.22,
        "total": 3.73,
    },
    "handler_ms_per_page": {"frontier": 28.0, "fetch": 36.0, "extract": 21.0},
    "prices": {"lambda_gb_s": 0.0000133334},
    "figures": [],
}


# --- the arithmetic (pure functions) ---------------------------------------------
def request_gap(delay: float, fetch_own_s: float, fetch_latency_s: float) -> float:
    """Seconds between a busy host's request starts: its delay, or its request's own time if longer.

    A host's requests are sequential: one that takes longer than the delay
    (network time plus fetch's own time a page) holds the next one back.
    """
    return max(delay, fetch_latency_s + fetch_own_s)


def rotation(run_seconds: float = RUN_SECONDS, window_s: float = BATCHING_WINDOW_S) -> float:
    """The share of a busy host's time spent in runs: each run of ``run_seconds`` waits ``window_s`` to start.

    A run stops ``RUN_STOP_MARGIN_SECONDS`` before the invocation's timeout;
    its wake-up message is due at the host's next start and waits up to the
    event source's batching window to be delivered (at least: a cold start
    and the lease come on top).
    """
    if run_seconds <= 0:
        raise ValueError(f"fetch's timeout leaves no run: {run_seconds:g} s")
    return run_seconds / (run_seconds + window_s)


def per_host_rate(gap: float, rot: float) -> float:
    """Pages a second one busy host yields."""
    return rot / gap


def dispatch_ms(handler_ms: dict[str, float]) -> float:
    """Dispatch's handler ms a page; cost.json keys it by its queue, "frontier"."""
    ms = handler_ms.get("dispatch", handler_ms.get("frontier"))
    if ms is None:
        raise KeyError("handler_ms_per_page has neither 'dispatch' nor 'frontier'")
    return float(ms)


def seconds_per_page(
    handler_ms: dict[str, float], gap: float, hosts_per_invocation: int, rot: float
) -> dict[str, float]:
    """Invocation-seconds each function spends per page.

    Dispatch and extract: their measured handler time a page.  Fetch: an
    invocation works ``hosts_per_invocation`` busy hosts at once, each a page
    every ``gap`` seconds for ``rot`` of the time, so a page takes gap /
    (hosts x rot) of an invocation, its network time overlapping the
    others' (and its sleep shared).
    """
    return {
        "dispatch": dispatch_ms(handler_ms) / 1000,
        "fetch": gap / (hosts_per_invocation * rot),
        "extract": float(handler_ms["extract"]) / 1000,
    }


def concurrency_needed(rate: float, seconds: dict[str, float]) -> dict[str, float]:
    """Concurrent invocations per function at ``rate`` pages a second (Little's law)."""
    return {name: rate * s for name, s in seconds.items()}


def renewals_per_run(run_seconds: float = RUN_SECONDS) -> int:
    """Lease renewals in one run: one each time the lease has only RUN_LEASE_RENEW_BEFORE_SECONDS left."""
    return math.floor(run_seconds / RENEW_EVERY_S)


def run_writes_per_page(gap: float, run_seconds: float = RUN_SECONDS) -> float:
    """Write units a page spends on its host's item: the run's lease, renewals and release over its pages."""
    return (RUN_FIXED_WRITES + renewals_per_run(run_seconds)) / (run_seconds / gap)


def pages_per_flush(gap: float, hosts_per_invocation: int) -> float:
    """Pages in one flush of an invocation's hosts (one WARC): each host's pages of RUN_FLUSH_SECONDS."""
    return max(1.0, hosts_per_invocation * FLUSH_SECONDS / gap)


def table_wru(cost: dict[str, Any], run_wru: float) -> dict[str, float]:
    """Write units a page per table: measured, with the runs' lease writes added to the hosts table.

    A cost.json without the split counts every write as one table's.
    """
    by_table = {k: float(v) for k, v in (cost.get("write_units_per_page_by_table") or {}).items()}
    if not by_table:
        return {"all tables": float(cost["units_per_page"]["ddb_wru"]) + run_wru}
    hosts = settings.TABLES["hosts"].name
    by_table[hosts] = by_table.get(hosts, 0.0) + run_wru
    return by_table


def short(table: str) -> str:
    """A table's name without the stack's prefix: crawlstack-urls -> urls."""
    return table.removeprefix(settings.APP_NAME + "-")


def admission_wru(cost: dict[str, Any]) -> float:
    """Write units a page the measured web spent admitting: its runs' schedules and its backlog bundles."""
    by_table = cost.get("write_units_per_page_by_table") or {}
    return float(by_table.get(settings.TABLES["hosts"].name, 0.0)) + float(
        by_table.get(settings.TABLES["parked"].name, 0.0)
    )


def usd_per_million(
    cost: dict[str, Any],
    gap: float,
    hosts_per_invocation: int,
    rot: float,
    run_seconds: float = RUN_SECONDS,
    memory_mb: int = FETCH.memory_mb,
) -> dict[str, float]:
    """Dollars a million pages at scale, and its parts.

    The measured total, less fetch's measured Lambda seconds and the measured
    S3 (a small web's), plus:

    * ``fetch_lambda``: the invocation's wall time shared by its hosts, gap /
      (hosts x rot) seconds a page at fetch's memory;
    * ``flush``: a flush's PUTs, GET, extract invocation and extract-queue
      requests over its pages;
    * ``runs``: each run's lease writes, wake-up message (batched) and share
      of an invocation request, over the pages of a run.

    The measured Lambda requests and SQS stay (the small web's own extract
    and run traffic, counted twice: a few cents, conservatively).
    """
    measured = cost["usd_per_million_pages"]
    gb = memory_mb / 1024
    fetch_measured = float(cost["handler_ms_per_page"]["fetch"]) / 1000 * gb * PRICES["lambda_gb_s"] * 1e6
    replaced = fetch_measured + float(measured.get("s3", 0.0))
    fetch_lambda = gap / (hosts_per_invocation * rot) * gb * PRICES["lambda_gb_s"] * 1e6
    flush = (FLUSH_USD + FLUSH_SQS_REQUESTS * PRICES["sqs_requests"]) / pages_per_flush(gap, hosts_per_invocation)
    run = (
        (RUN_FIXED_WRITES + renewals_per_run(run_seconds)) * PRICES["ddb_wru"]
        + 3 / settings.SQS_BATCH_SIZE * PRICES["sqs_requests"]
        + PRICES["lambda_requests"] / hosts_per_invocation
    ) / (run_seconds / gap)
    parts = {
        "measured": float(measured["total"]),
        "replaced": replaced,
        "fetch_lambda": fetch_lambda,
        "flush": flush * 1e6,
        "runs": run * 1e6,
    }
    parts["total"] = parts["measured"] - replaced + fetch_lambda + parts["flush"] + parts["runs"]
    parts["admission_worst_extra"] = max(0.0, ADMISSION_WORST_WRU - admission_wru(cost)) * PRICES["ddb_wru"] * 1e6
    return parts


def cpu_ms_per_page(gap: float, hosts_per_invocation: int, memory_mb: int = FETCH.memory_mb) -> float:
    """CPU ms a page may take before a full invocation's hosts outrun its vCPU share."""
    return memory_mb / LIMITS["vcpu_mb"][0] * gap / hosts_per_invocation * 1000


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
    table_rru: float
    in_flight: float


DEFAULT_QUOTAS = Quotas(
    account_concurrency=LIMITS["account_concurrency"][0],
    fetch_max_concurrency=STACK_FETCH_MAX_CONCURRENCY,
    table_wru=LIMITS["ddb_table_wru"][0],
    table_rru=LIMITS["ddb_table_rru"][0],
    in_flight=LIMITS["sqs_in_flight"][0],
)
# Only the stack's own setting raised (to the most it takes): no quota request to AWS.
FETCH_RAISED = replace(DEFAULT_QUOTAS, fetch_max_concurrency=FETCH_CONCURRENCY_SETTING_MAX)
# Every quota AWS raises on request out of the way; the event source mappings' 1 000 batches
# (standard mode) and the fetch setting's own maximum remain.
RAISED_QUOTAS = Quotas(
    account_concurrency=math.inf,
    fetch_max_concurrency=FETCH_CONCURRENCY_SETTING_MAX,
    table_wru=math.inf,
    table_rru=math.inf,
    in_flight=math.inf,
)

POLITENESS = "politeness (every host at its delay)"
FETCH_SETTING = f"fetch's maximum concurrency (cdk.json) x {HOSTS_PER_INVOCATION} hosts a batch"


def ceilings(
    hosts: int,
    rate_per_host: float,
    seconds: dict[str, float],
    hosts_per_invocation: int,
    wru: dict[str, float],
    rru: float,
    quotas: Quotas,
) -> dict[str, float]:
    """Each limit as the most pages a second it allows."""
    esm = LIMITS["esm_concurrency"][0]
    table = max(wru, key=lambda k: wru[k])
    fetch_esm = f"fetch's event source: 1,000 batches x {hosts_per_invocation} hosts"
    return {
        POLITENESS: hosts * rate_per_host,
        FETCH_SETTING: quotas.fetch_max_concurrency * hosts_per_invocation * rate_per_host,
        fetch_esm: esm * hosts_per_invocation * rate_per_host,
        "dispatch's event source: 1,000 batches at once": esm / seconds["dispatch"],
        "extract's event source: 1,000 batches at once": esm / seconds["extract"],
        "account concurrency": quotas.account_concurrency / sum(seconds.values()),
        "SQS messages in flight (a host worked, a run message)": quotas.in_flight * rate_per_host,
        f"DynamoDB write quota, {short(table)} table": quotas.table_wru / wru[table],
        # Conservative: cost.json does not split reads by table.
        "DynamoDB read quota (all reads as one table's)": quotas.table_rru / rru if rru > 0 else math.inf,
    }


def binding(limits: dict[str, float]) -> tuple[str, float]:
    """The limit that binds, and the pages a second it allows; a tie goes to the limit listed first."""
    low = min(limits.values())
    name = next(k for k, v in limits.items() if v <= low * (1 + 1e-9))
    return name, limits[name]


def per_day(rate: float, usd_per_m: float) -> tuple[float, float]:
    """(pages a day, dollars a day) at ``rate`` pages a second."""
    pages = rate * SECONDS_A_DAY
    return pages, pages * usd_per_m / 1_000_000


# --- a point and the target configuration ----------------------------------------------
@dataclass(frozen=True)
class Pace:
    """A busy host's pace at a delay, and what a page costs each function, from cost.json."""

    gap: float
    rot: float
    rate_per_host: float
    hosts_per_invocation: int
    seconds: dict[str, float]
    usd: dict[str, float]
    wru: dict[str, float]
    rru: float


def pace(cost: dict[str, Any], hosts: int, delay: float, fetch_latency_s: float) -> Pace:
    handler = cost["handler_ms_per_page"]
    gap = request_gap(delay, float(handler["fetch"]) / 1000, fetch_latency_s)
    rot = rotation()
    per_invocation = min(HOSTS_PER_INVOCATION, hosts)
    return Pace(
        gap=gap,
        rot=rot,
        rate_per_host=per_host_rate(gap, rot),
        hosts_per_invocation=per_invocation,
        seconds=seconds_per_page(handler, gap, per_invocation, rot),
        usd=usd_per_million(cost, gap, per_invocation, rot),
        wru=table_wru(cost, run_writes_per_page(gap)),
        rru=float(cost["units_per_page"].get("ddb_rru", 0.0)),
    )


def scenario(cost: dict[str, Any], hosts: int, delay: float, fetch_latency_s: float) -> dict[str, Any]:
    p = pace(cost, hosts, delay, fetch_latency_s)
    ceiling = hosts * p.rate_per_host
    out: dict[str, Any] = {
        "hosts": hosts,
        "delay": delay,
        "gap": p.gap,
        "ceiling": ceiling,
        "needed": concurrency_needed(ceiling, p.seconds),
        "usd": p.usd,
        "usd_per_million": p.usd["total"],
        "pages_per_flush": pages_per_flush(p.gap, p.hosts_per_invocation),
        "cpu_ms_per_page": cpu_ms_per_page(p.gap, p.hosts_per_invocation),
        "budget_ceiling": budget_counter_ceiling(hosts),
    }
    for key, quotas in (("default", DEFAULT_QUOTAS), ("fetch_raised", FETCH_RAISED), ("raised", RAISED_QUOTAS)):
        name, rate = binding(ceilings(hosts, p.rate_per_host, p.seconds, p.hosts_per_invocation, p.wru, p.rru, quotas))
        pages, usd = per_day(rate, p.usd["total"])
        out[key] = {
            "binds": name,
            "rate": rate,
            "concurrency": concurrency_needed(rate, p.seconds),
            "pages_per_day": pages,
            "usd_per_day": usd,
        }
    return out


def configuration(cost: dict[str, Any], target: float, delay: float, fetch_latency_s: float) -> dict[str, Any]:
    """The least that reaches ``target`` pages/s at ``delay``: hosts, settings, and the quota requests it needs.

    A quota is asked for once the configuration would use more than
    ``HEADROOM`` of its default (the account's concurrency, a table's
    throughput, the queue's messages in flight); the event source mappings'
    1 000 batches are not a quota (``over_event_source`` names a function
    that would need provisioned mode).
    """
    gap = request_gap(delay, float(cost["handler_ms_per_page"]["fetch"]) / 1000, fetch_latency_s)
    hosts = math.ceil(target / per_host_rate(gap, rotation()))
    p = pace(cost, hosts, delay, fetch_latency_s)
    needed = concurrency_needed(target, p.seconds)
    functions = {
        "dispatch": math.ceil(needed["dispatch"]),
        "fetch": math.ceil(hosts / p.hosts_per_invocation),
        "extract": math.ceil(needed["extract"]),
    }
    account = sum(functions.values())
    table = max(p.wru, key=lambda k: p.wru[k])
    table_wru_s = target * p.wru[table]
    rru_s = target * p.rru
    asks = {
        "account_concurrency": ("Lambda concurrent executions", account, ""),
        "ddb_table_wru": (f"DynamoDB write quota of the {short(table)} table", table_wru_s, " WRU/s"),
        "ddb_table_rru": ("DynamoDB read quota", rru_s, " RRU/s"),
        "sqs_in_flight": ("SQS messages in flight on the fetch queue", hosts, ""),
    }
    requests: list[str] = []
    raised: dict[str, float] = {}
    for key, (what, need, unit) in asks.items():
        default = LIMITS[key][0]
        raised[key] = default
        if need > HEADROOM * default:
            raised[key] = max(default, math.ceil(need / HEADROOM))
            requests.append(f"{what} to {raised[key]:,.0f}{unit} (default {default:,.0f}, needs {need:,.0f})")
    over = [f for f, n in functions.items() if n > LIMITS["esm_concurrency"][0]]
    quotas = Quotas(
        account_concurrency=raised["account_concurrency"],
        fetch_max_concurrency=functions["fetch"],
        table_wru=raised["ddb_table_wru"],
        table_rru=raised["ddb_table_rru"],
        in_flight=raised["sqs_in_flight"],
    )
    limits = ceilings(hosts, p.rate_per_host, p.seconds, p.hosts_per_invocation, p.wru, p.rru, quotas)
    name, rate = binding(limits)
    # What is sized to the target (the hosts, fetch's setting) aside, the limit nearest to binding.
    others = {k: v for k, v in limits.items() if k not in (POLITENESS, FETCH_SETTING)}
    next_name, next_rate = binding(others)
    pages, usd = per_day(target, p.usd["total"])
    return {
        "target": target,
        "delay": delay,
        "hosts": hosts,
        "fetch_concurrency": functions["fetch"],
        "concurrency": functions,
        "account_concurrency": account,
        "table": short(table),
        "table_wru_per_s": table_wru_s,
        "rru_per_s": rru_s,
        "quota_requests": requests,
        "over_event_source": over,
        "rate": rate,
        "binds": name,
        "next_limit": next_name,
        "next_rate": next_rate,
        "usd_per_million": p.usd["total"],
        "pages_per_day": pages,
        "usd_per_day": usd,
        "usd_per_day_admission_worst": per_day(target, p.usd["total"] + p.usd["admission_worst_extra"])[1],
        "budget_ceiling": budget_counter_ceiling(hosts),
    }


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


def trio(concurrency: dict[str, float]) -> str:
    """Dispatch / fetch / extract concurrency, whole invocations."""
    return " / ".join(f"{math.ceil(concurrency[f] - 1e-9):,}" for f in FUNCTIONS)


def notes(
    cost: dict[str, Any], measured: bool, rows: list[dict[str, Any]], configs: list[dict[str, Any]], latency: float
) -> str:
    handler = cost["handler_ms_per_page"]
    usd = cost["usd_per_million_pages"]
    source = "measured" if measured else "SAMPLE figures (no bench/results/cost.json): not a measurement"
    first = rows[0]["usd"]
    wru = ", ".join(f"{short(k)} {v:.2f}" for k, v in table_wru(cost, 0.0).items())
    lines = [
        "## On paper: 1 000 and 100 000 hosts as host runs (`bench/paper.py`)",
        "",
        f"From `bench/results/cost.json` ({source}; {cost.get('machine', '?')}): handler time a page dispatch "
        f"{dispatch_ms(handler):.0f} ms, extract {float(handler['extract']):.0f} ms, fetch "
        f"{float(handler['fetch']):.0f} ms (taken as a request's own time, beside an assumed "
        f"{latency * 1000:.0f} ms of network time); {float(cost['units_per_page']['ddb_wru']):.2f} write units "
        f"({wru}) and {float(cost['units_per_page'].get('ddb_rru', 0)):.2f} read units a page; "
        f"${float(usd['total']):.2f} a million pages on the measured web. Nothing was deployed.",
        "",
        "| hosts | delay | politeness ceiling | $ per M pages | as deployed: binds at "
        "| concurrency dispatch / fetch / extract | $/day | quotas raised: binds at "
        "| concurrency dispatch / fetch / extract | $/day |",
        "|---:|---:|---:|---:|---|---|---:|---|---|---:|",
    ]
    for r in rows:
        d, q = r["default"], r["raised"]
        lines.append(
            f"| {r['hosts']:,} | {r['delay']:g} s | {r['ceiling']:,.0f} pages/s | ${r['usd_per_million']:.2f} "
            f"| {d['binds']}: {d['rate']:,.0f} pages/s | {trio(d['concurrency'])} | ${d['usd_per_day']:,.2f} "
            f"| {q['binds']}: {q['rate']:,.0f} pages/s | {trio(q['concurrency'])} | ${q['usd_per_day']:,.2f} |"
        )
    fetch_raised = "; ".join(
        f"{r['hosts']:,} hosts at {r['delay']:g} s: {r['fetch_raised']['rate']:,.0f} pages/s "
        f"({r['fetch_raised']['binds']}, ${r['fetch_raised']['usd_per_day']:,.0f}/day)"
        for r in rows
    )
    short_of = [r for r in rows if r["raised"]["binds"] != POLITENESS]
    beyond = "".join(
        f" At {r['hosts']:,} hosts and {r['delay']:g} s the hosts alone would give {r['ceiling']:,.0f} pages/s, "
        f"which needs {trio(r['needed'])} concurrent invocations: past 1 000 batches an event source needs "
        "provisioned mode (not modelled)."
        for r in short_of
    )
    terms = "; ".join(
        f"at {r['delay']:g} s fetch ${r['usd']['fetch_lambda']:.3f}, flushes ${r['usd']['flush']:.3f} "
        f"({r['pages_per_flush']:,.0f} pages a flush), runs ${r['usd']['runs']:.3f}"
        for r in rows
        if r["hosts"] == HOSTS[-1]
    )
    lines += [
        "",
        "With only fetch's maximum concurrency raised to 1 000 in `cdk.json` (no quota request to AWS): "
        f"{fetch_raised}.",
        "",
        "How to read it. A busy host fetches a page every max(delay, network time + fetch's own time a page); "
        f"its run in one invocation lasts fetch's timeout ({FETCH.timeout_seconds} s) less the stop margin "
        f"({settings.RUN_STOP_MARGIN_SECONDS:g} s), {RUN_SECONDS:g} s, and its next run starts at least the event "
        f"source's batching window ({BATCHING_WINDOW_S:g} s) later, so a host yields {rotation():.4f} / delay "
        f"pages a second. One fetch invocation works a batch of {HOSTS_PER_INVOCATION} hosts at once, so fetch's "
        f"concurrency is hosts worked / {HOSTS_PER_INVOCATION} ({math.ceil(HOSTS[0] / HOSTS_PER_INVOCATION):,} "
        f"invocations for {HOSTS[0]:,} hosts, {math.ceil(HOSTS[-1] / HOSTS_PER_INVOCATION):,} for {HOSTS[-1]:,}) "
        "whatever the network time, which overlaps within the invocation; dispatch and extract work page by page "
        "(pages/s x handler seconds a page). \"As deployed\" is `cdk.json`'s stack: fetch's event source maximum "
        f"concurrency {STACK_FETCH_MAX_CONCURRENCY} (so {STACK_FETCH_MAX_CONCURRENCY * HOSTS_PER_INVOCATION:,} "
        "hosts worked at once), the account's 1 000 concurrent executions, DynamoDB's default table quotas, SQS's "
        '120 000 messages in flight; "quotas raised" sets fetch\'s maximum concurrency to 1 000 (the most the '
        "setting takes) and lifts every quota AWS raises on request, leaving each event source mapping's 1 000 "
        "concurrent batches. A tie goes to politeness: fetch's setting is then exactly enough. The rate is one a "
        "day can sustain: fetching outruns a slower dispatch only until the backlogs it cannot refill run out. "
        "The read quota counts every read as one table's (cost.json does not split reads by table), so where it "
        "binds it is a conservative bound: the reads are spread over the urls, hosts, parked and crawls tables."
        + beyond,
        "",
        "Dollars a page depend on the delay, not on the number of hosts, once batches are full: the measured "
        f"total (${first['measured']:.2f}) less fetch's measured Lambda seconds and S3 (${first['replaced']:.2f}, "
        "a small web's at delay 0), plus fetch's invocation time shared by its hosts (delay / "
        f"{HOSTS_PER_INVOCATION} seconds a page at {FETCH.memory_mb} MB), a flush's objects over its pages "
        f"({HOSTS_PER_INVOCATION} hosts x {FLUSH_SECONDS:g} s / delay: a WARC, its crawl log and records, "
        "extract's GET and invocation, three extract-queue requests), and each run's lease, "
        f"{renewals_per_run()} renewals and release (a write unit each), its wake-up message and its share of an "
        f"invocation over the run's pages ({RUN_SECONDS:g} s / delay); a million pages: {terms}. The measured "
        f"web has 4 hosts, so its admissions share bundles and schedules ({admission_wru(cost):.2f} write units a "
        "page on the hosts and parked tables); with each admitted URL alone in its host's dispatch batch (a "
        f"bundle put, a schedule, the bundle's delete: {ADMISSION_WORST_WRU:g} write units) a page costs up to "
        f"${first['admission_worst_extra']:.2f} a million more. $/day is the sustained rate x 86 400 x $ a page.",
        "",
        f"Configuration for {TARGET_PAGES_PER_S:,} pages/s, every host busy; a quota is asked for where the "
        f"configuration would use more than {HEADROOM:.0%} of its default:",
        "",
        "| delay | hosts | `crawlstack:fetch_concurrency` | concurrency dispatch / fetch / extract (account) "
        "| heaviest table | reads (as one table) | quota requests | next limit | $ per M pages | $/day |",
        "|---:|---:|---:|---|---|---:|---|---|---:|---:|",
    ]
    for c in configs:
        asks = "; ".join(c["quota_requests"]) or "none"
        if c["over_event_source"]:
            asks += "; provisioned mode on " + ", ".join(c["over_event_source"]) + "'s event source"
        lines.append(
            f"| {c['delay']:g} s | {c['hosts']:,} | {c['fetch_concurrency']:,} "
            f"| {trio(c['concurrency'])} ({c['account_concurrency']:,}) "
            f"| {c['table']}: {c['table_wru_per_s']:,.0f} WRU/s | {c['rru_per_s']:,.0f} RRU/s | {asks} "
            f"| {c['next_limit']}: {c['next_rate']:,.0f} pages/s "
            f"| ${c['usd_per_million']:.2f} | ${c['usd_per_day']:,.0f} |"
        )
    worst = ", ".join(f"${c['usd_per_day_admission_worst']:,.0f} at {c['delay']:g} s" for c in configs)
    biggest = max(c["table_wru_per_s"] for c in configs)
    ramp = math.ceil(math.log2(biggest / 4_000)) * 30 if biggest > 4_000 else 0
    lines += [
        "",
        "The hosts bind each (politeness) and fetch's setting is sized to them; the next limit is the nearest "
        f"of the rest. With the admission upper bound a day costs up to {worst}. A new on-demand table serves "
        "4 000 WRU/s at once and doubles its previous peak within 30 minutes, so the heaviest table reaches "
        f"{biggest:,.0f} WRU/s after about {ramp} minutes of ramp, or at once with warm throughput (paid). An "
        "event source mapping adds up to 300 concurrent batches a minute, so fetch's invocations take a few "
        "minutes to start.",
        "",
        "Checks:",
        "",
        f"- Fetch's timeout: {FETCH.timeout_seconds} s of Lambda's {LIMITS['lambda_timeout_s'][0]:g} s; a run of "
        f"{RUN_SECONDS:g} s. At {LIMITS['lambda_timeout_s'][0]:g} s a run would last "
        f"{LIMITS['lambda_timeout_s'][0] - settings.RUN_STOP_MARGIN_SECONDS:g} s: fewer lease writes, run "
        "messages and invocations a page (the runs term above) and a slightly higher rotation.",
        f"- Visibility timeout {settings.QUEUES['fetch'].visibility_timeout_seconds:,} s = "
        f"{LIMITS['visibility_factor'][0]:g} x fetch's timeout: a run message is in flight for its whole "
        "invocation, well inside it; a host whose invocation dies waits for it (its lease ends after "
        f"{settings.RUN_LEASE_SECONDS:g} s, its message comes back after "
        f"{settings.QUEUES['fetch'].visibility_timeout_seconds / 60:.0f} minutes).",
        f"- Payload: a batch of {HOSTS_PER_INVOCATION} run messages is about "
        f"{HOSTS_PER_INVOCATION * RUN_RECORD_BYTES / 1024:,.0f} KB of the 6 MB an invocation takes (about "
        f"{RUN_RECORD_BYTES} bytes a record, assumed); the payload alone would allow "
        f"{int(LIMITS['payload_bytes'][0] // RUN_RECORD_BYTES):,} hosts a batch.",
        f"- Sleeping: a host of a full batch sleeps any wait under {break_even_wait(HOSTS_PER_INVOCATION):.0f} s "
        f"({break_even_wait(HOSTS_PER_INVOCATION, unflushed=True):.0f} s with work unflushed; "
        "`crawlstack.fetch.pacing.break_even_wait`), so "
        + (
            "at these delays every host stays in its invocation"
            if all(r["gap"] <= break_even_wait(HOSTS_PER_INVOCATION) for r in rows)
            else "**at some of these delays hosts are released between pages, which this model does not price**"
        )
        + f"; a host alone in an invocation sleeps only under {break_even_wait(1):.1f} s "
        f"({break_even_wait(1, unflushed=True):.1f} s) and is woken by a message between pages past that.",
        "- SQS: a wake-up waits about one delay, far under the 15-minute maximum; the fetch queue's messages in "
        "flight are the hosts worked at once (at most "
        f"{max(r['raised']['rate'] / (rotation() / r['gap']) for r in rows):,.0f} above, of about 120 000).",
        "- Extract: a WARC holds "
        + ", ".join(f"{r['pages_per_flush']:,.0f} pages at {r['delay']:g} s" for r in rows if r["hosts"] == HOSTS[-1])
        + f", at most {float(handler['extract']) / 1000 * max(r['pages_per_flush'] for r in rows):.1f} s of "
        f"extract's {settings.FUNCTIONS['extract'].timeout_seconds} s.",
        "",
        f"Not checked: CPU. A {FETCH.memory_mb} MB function has about "
        f"{FETCH.memory_mb / LIMITS['vcpu_mb'][0]:.2f} vCPU; a full invocation may spend "
        + ", ".join(
            f"{r['cpu_ms_per_page']:.1f} ms of CPU a page at {r['delay']:g} s" for r in rows if r["hosts"] == HOSTS[-1]
        )
        + " (TLS, the WARC's gzip, the flush's JSON) before its hosts outrun it. The loopback measurement's fetch "
        "time a page is wall time, mostly round trips to moto and the loopback server, and bounds nothing. If "
        "CPU binds, memory buys it (1 769 MB is a vCPU; fetch's Lambda term above grows with memory) or fewer "
        "hosts a batch (fetch's concurrency grows as hosts / batch).",
        "",
        "A host's cap: at the default `max_pages_per_host` of "
        f"{settings.DEFAULT_MAX_PAGES_PER_HOST:,} a busy host is done after "
        + ", ".join(f"{settings.DEFAULT_MAX_PAGES_PER_HOST / (rotation() / d) / 3600:.1f} h at {d:g} s" for d in DELAYS)
        + ", so a day at these rates needs new hosts to take over (or the cap raised); the rates assume they do.",
        "",
        "Limits and sources:",
        "",
    ]
    lines += [f"- {text} ({value:,.0f}): {url}" for value, text, url in LIMITS.values()]
    budget = {r["hosts"]: r["budget_ceiling"] for r in rows}
    lines += [
        f"- The stack: fetch's event source `max_concurrency` from `crawlstack:fetch_concurrency` "
        f"(`cdk.json`: {STACK_FETCH_MAX_CONCURRENCY}; `infra/functions.py`), no maximum on dispatch and extract, "
        f"no reserved concurrency; batches of {settings.QUEUES['frontier'].batch_size} frontier messages for "
        f"dispatch, {HOSTS_PER_INVOCATION} run messages with a {BATCHING_WINDOW_S:g} s window for fetch, one WARC "
        "for extract (`crawlstack.settings.QUEUES`).",
        "",
        "What would bind first with a page budget (`--max-pages`): a dispatch container takes up to "
        f"{settings.BUDGET_CHUNK} pages of it at a time with one write of the crawl's `pages_admitted` on the "
        "crawls item, which also holds `seed_hosts`, one string per seeded host "
        f"(assumed {HOST_NAME_BYTES} bytes each). An UpdateItem costs a write unit per KB of the whole item and "
        "the item is one partition: at 1 000 seed hosts (about "
        f"{crawl_item_bytes(1_000) / 1024:.0f} KB) that admits at most {budget.get(1_000, 0.0):,.0f} pages/s, "
        "whatever the concurrency; at 100 000 seed hosts (about "
        f"{crawl_item_bytes(100_000) / 1024 / 1024:.1f} MB) the set cannot be stored at all (400 KB items), so "
        "one crawl cannot be seeded on 100 000 hosts until seed hosts and the budget move out of the crawl item. "
        "A crawl seeded on a few hosts that finds the rest, or one without a budget, is not limited by this.",
    ]
    return "\n".join(lines)


def report(cost: dict[str, Any], measured: bool, fetch_latency_s: float) -> dict[str, Any]:
    rows = [scenario(cost, h, d, fetch_latency_s) for h in HOSTS for d in DELAYS]
    configs = [configuration(cost, TARGET_PAGES_PER_S, d, fetch_latency_s) for d in DELAYS]
    figures = []
    for r in rows:
        tag = f"{r['hosts']:,} hosts, {r['delay']:g} s"
        figures.append(figure(f"{tag}: politeness ceiling", r["ceiling"], "pages/s"))
        for f in FUNCTIONS:
            figures.append(figure(f"{tag}: {f} concurrency needed", r["needed"][f], "invocations"))
        figures.append(figure(f"{tag}: cost per million pages", r["usd_per_million"], "$"))
        for key, label in (
            ("default", "as deployed"),
            ("fetch_raised", "fetch maximum concurrency 1 000"),
            ("raised", "quotas raised"),
        ):
            s = r[key]
            figures.append(figure(f"{tag}, {label}: binding limit", s["binds"], ""))
            figures.append(figure(f"{tag}, {label}: throughput", s["rate"], "pages/s"))
            figures.append(
                figure(f"{tag}, {label}: concurrency dispatch / fetch / extract", trio(s["concurrency"]), "")
            )
            figures.append(figure(f"{tag}, {label}: cost a day", s["usd_per_day"], "$"))
    for c in configs:
        tag = f"{c['target']:,} pages/s at {c['delay']:g} s"
        figures.append(figure(f"{tag}: hosts", c["hosts"], "hosts"))
        figures.append(figure(f"{tag}: crawlstack:fetch_concurrency", c["fetch_concurrency"], ""))
        figures.append(
            figure(
                f"{tag}: concurrency dispatch / fetch / extract",
                f"{trio(c['concurrency'])} ({c['account_concurrency']:,} of the account's)",
                "",
            )
        )
        figures.append(figure(f"{tag}: quota requests", "; ".join(c["quota_requests"]) or "none", ""))
        figures.append(figure(f"{tag}: cost a day", c["usd_per_day"], "$"))
    for hosts in HOSTS:
        figures.append(
            figure(f"{hosts:,} seed hosts: page budget counter ceiling", budget_counter_ceiling(hosts), "pages/s")
        )
    machine = cost.get("machine", "?")
    return {
        "name": "paper",
        "machine": f"on paper (from cost.json measured on {machine})" if measured else f"on paper ({machine})",
        "method": (
            "Arithmetic over bench/results/cost.json's per-page figures (handler ms per page, write and read units, "
            f"$ per million pages) for host runs ({HOSTS_PER_INVOCATION} hosts a fetch invocation, each at its "
            f"delay), an assumed {fetch_latency_s:g} s of network time per fetched page, AWS's documented Lambda, "
            "SQS and DynamoDB limits and the stack's settings; see notes for every assumption."
        ),
        "figures": figures,
        "notes": notes(cost, measured, rows, configs, fetch_latency_s),
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
