"""The watch's cost on paper: quantities measured by bench/watch_cost.py, split three ways and priced.

Pure arithmetic (its tests: tests/unit/test_watch_paper.py).  A quantities
dict holds what was counted, by key: ``units:<unit>`` (billable units,
``crawlstack.local.billing``), ``lambda_gb_s:<function>``,
``invocations:<function>``, ``log_bytes:<function>``, and others the prices
ignore (calls, write units by table, Lambda seconds, metrics).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from crawlstack import settings
from crawlstack.local.billing import lambda_requests_usd, lambda_usd, logs_usd
from crawlstack.prices import PRICES

DAY = 86_400.0
TICKS_A_DAY = round(DAY / 60 / settings.SCHEDULE_RATE_MINUTES)
PAPER_SOURCES = 100_000
PAPER_CHECKS_A_DAY = 1.0
# Network seconds a check's fetch holds its invocation that loopback does not (an input, as bench/paper.py's).
DEFAULT_NETWORK_S = 0.5
FETCH_GB = settings.FUNCTIONS["fetch"].memory_mb / 1024
SERVICES = ("dynamodb", "sqs", "s3", "events", "lambda", "lambda_requests", "logs", "scheduler")
Q = dict[str, float]


def added(*qs: Q) -> Q:
    out: Counter[str] = Counter()
    for q in qs:
        out.update(q)
    return dict(out)


def scaled(q: Q, factor: float) -> Q:
    return {k: v * factor for k, v in q.items()}


def minus(a: Q, b: Q) -> Q:
    return added(a, scaled(b, -1.0))


def mean(qs: list[Q]) -> Q:
    return scaled(added(*qs), 1 / len(qs)) if qs else {}


def total(q: Q, prefix: str) -> float:
    return sum(v for k, v in q.items() if k.startswith(prefix))


def usd_of(q: Q) -> dict[str, float]:
    """Dollars by service for quantities, at ``crawlstack.prices.PRICES``."""
    g = q.get
    return {
        "dynamodb": g("units:ddb_wru", 0) * PRICES["ddb_wru"] + g("units:ddb_rru", 0) * PRICES["ddb_rru"],
        "sqs": g("units:sqs_requests", 0) * PRICES["sqs_requests"],
        "s3": g("units:s3_put", 0) * PRICES["s3_put"] + g("units:s3_get", 0) * PRICES["s3_get"],
        "events": g("units:events_put", 0) * PRICES["events_put"],
        "lambda": lambda_usd(total(q, "lambda_gb_s:")),
        "lambda_requests": lambda_requests_usd(total(q, "invocations:")),
        "logs": logs_usd(total(q, "log_bytes:")),
        # Each schedule invocation is one of EventBridge Scheduler's.
        "scheduler": g("invocations:schedule", 0) * PRICES["scheduler_invocations"],
    }


def paper(
    measured: dict[str, Any],
    sources: int = PAPER_SOURCES,
    checks_a_day: float = PAPER_CHECKS_A_DAY,
    network_s: float = DEFAULT_NETWORK_S,
) -> dict[str, Any]:
    """A day of ``sources`` at ``checks_a_day`` each, priced from ``measured``'s three kinds of quantities.

    ``measured``: ``per_check``, ``per_source_day`` and ``fixed_per_tick`` (a
    tick of the 1,440 a day), each a quantities dict.  ``network_s``: fetch's
    Lambda seconds a check that loopback did not measure, added as ``network``.
    """
    checks = sources * checks_a_day
    parts = {
        "per check": usd_of(scaled(measured["per_check"], checks)),
        "per source": usd_of(scaled(measured["per_source_day"], sources)),
        "fixed": usd_of(scaled(measured["fixed_per_tick"], TICKS_A_DAY)),
    }
    day = {s: sum(part[s] for part in parts.values()) for s in SERVICES}
    day["network"] = lambda_usd(checks * network_s * FETCH_GB)
    all_day = sum(day.values())
    return {
        "sources": sources,
        "checks_a_day": checks,
        "network_s": network_s,
        "usd_a_day": day,
        "usd_a_day_parts": parts,
        "usd_a_day_by_kind": {name: sum(part.values()) for name, part in parts.items()} | {"network": day["network"]},
        "usd_a_day_total": all_day,
        "usd_a_day_loopback": all_day - day["network"],
        "usd_per_million_checks": {s: v / checks * 1e6 for s, v in day.items()},
        "usd_per_million_total": all_day / checks * 1e6,
        "usd_per_million_loopback": (all_day - day["network"]) / checks * 1e6,
    }


def split(ticks: list[tuple[dict[str, int], Q]], pipeline: Q, sources: int) -> dict[str, Any]:
    """The three kinds of cost from each tick's quantities (with what it did) and the checks' pipeline.

    Fixed: the mean tick that planned, sent and settled nothing.  Per source
    a day: the planning ticks less that, over sources.  Per check: the
    pipeline over the checks sent, plus the schedule's part, from ticks that
    only sent (less an idle tick, over checks sent) and ticks that only
    settled (over checks settled); a tick that did both is left out of it.
    """
    kinds: dict[str, list[tuple[dict[str, int], Q]]] = {k: [] for k in ("idle", "plan", "send", "settle", "both")}
    for done, q in ticks:
        sent, settled = done["sent"], done["settled"]
        acted = "both" if sent and settled else "send" if sent else "settle" if settled else "idle"
        kind = "plan" if done["planned"] else acted
        kinds[kind].append((done, q))
    idle = mean([q for _, q in kinds["idle"]])

    def beyond_idle(kind: str, per: float) -> Q:
        if not kinds[kind] or not per:
            raise SystemExit(f"watch_cost: no tick that only {kind}s: simulate more sources or days")
        return scaled(added(*(minus(q, idle) for _, q in kinds[kind])), 1 / per)

    checks = sum(done["sent"] for done, _ in ticks)
    send = beyond_idle("send", sum(d["sent"] for d, _ in kinds["send"]))
    settle = beyond_idle("settle", sum(d["settled"] for d, _ in kinds["settle"]))
    return {
        "checks": checks,
        "per_check": added(scaled(pipeline, 1 / checks), send, settle),
        "per_source_day": beyond_idle("plan", sources * len(kinds["plan"])),
        "fixed_per_tick": idle,
        "schedule_per_check": {"send": send, "settle": settle},
        "pipeline_per_check": scaled(pipeline, 1 / checks),
        "ticks": {kind: len(rows) for kind, rows in kinds.items()},
    }
