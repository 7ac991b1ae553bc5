"""Dollars per million checks of watched sources: a simulated day, every AWS call counted; 100,000 sources on paper.

Issue 19's cost item.  The deployed watch's handlers (functions/schedule,
dispatch, fetch, extract) run in this process against a fresh moto server
behind ``crawlstack.local.faulty.FaultyEndpoint`` (failing nothing), whose
every call ``crawlstack.local.billing.Bill`` turns into billable units
(bench/watch_sim.py, where the web's assumptions are):

* ``--sources`` listings (300) on ``--hosts`` loopback hosts (10:
  127.0.0.2 ...), read with a mapping with ``items``.  Each source's items
  arrive as a Poisson process in simulated time, at a rate log-uniform over
  ``RATES`` items a day; a page shows the newest ``PER_PAGE`` and is padded
  to about ``PAGE_BYTES``; its ETag moves only when an item arrives, so a
  conditional GET of an unchanged page is answered 304.
* Each source is checked once first, unbilled, so the day's checks find what
  arrived since (its items seen, its ETag kept), as after a first day.
* The schedule handler is invoked once per simulated minute (its ``clock``
  patched), 1,440 times a day; after each, the checks it sent go through
  dispatch, fetch and extract, each invoked with the batches its event
  source mapping would give it (received and deleted through the endpoint).
  New items go to the stack's bus, whose rule targets an SQS queue.

The endpoint's count is read between steps, so the bill splits three ways
(``split``): fixed a day (a tick that did nothing, 1,440 times, each a
Scheduler invocation); per source a day (the tick that planned the day,
less an idle tick); per check (dispatch, fetch, extract and their queues,
plus the schedule's sends and settles: ticks that only sent, or only
settled, less an idle tick, per check).  Lambda: each handler call's wall
time at its function's memory, arm64, and a request per invocation;
CloudWatch Logs: the bytes the functions log at INFO (logger and EMF lines).

``paper`` prices ``PAPER_SOURCES`` sources at a check a day from those
figures, with ``--network`` seconds a check of fetch's Lambda time that a
loopback server does not cost (an input, not a measurement).

    python bench/watch_cost.py [--sources 300] [--hosts 10] [--days 1] [--network 0.5]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from common import figure, load_average, write_result
from watch_paper import DEFAULT_NETWORK_S, PAPER_SOURCES, SERVICES, TICKS_A_DAY, Q, paper, split

from crawlstack import settings
from crawlstack.local.billing import lambda_usd
from crawlstack.prices import PRICES


def costliest(per_check: Q, count: int = 8) -> list[tuple[str, float]]:
    """A check's dollars by call (its units at list prices) and by function's Lambda seconds, largest first."""
    lines: Counter[str] = Counter()
    for key, n in per_check.items():
        kind, _, rest = key.partition(":")
        if kind == "op":
            call, _, unit = rest.rpartition(":")
            lines[call] += n * PRICES[unit]
        elif kind == "lambda_gb_s":
            lines[f"{rest} Lambda time"] += lambda_usd(n)
    return lines.most_common(count)


def web_figures(web: dict[str, int], checks: int, events: int) -> dict[str, float]:
    pages = web.get("ok", 0) + web.get("not_modified", 0)
    return {
        "pages_per_check": pages / checks,
        "share_304": web.get("not_modified", 0) / max(1, pages),
        "new_items_per_check": web.get("new_items", 0) / checks,
        "events_delivered_per_check": events / checks,
        "bytes_per_200": web.get("ok_bytes", 0) / max(1, web.get("ok", 0)),
    }


def figures(m: dict[str, Any], p: dict[str, Any]) -> list[dict[str, Any]]:
    pc, web = m["per_check"], m["web"]
    where = f"{p['sources']:,} sources at {p['checks_a_day'] / p['sources']:g} check a day, on paper"
    out = [
        figure(f"$ per million checks, {where}, {p['network_s']:g} s network a check", p["usd_per_million_total"], "$"),
        figure(f"$ per million checks, {where}, loopback (no network time)", p["usd_per_million_loopback"], "$"),
        figure(f"$ a day, {where}, {p['network_s']:g} s network a check", p["usd_a_day_total"], "$"),
    ]
    out += [
        figure(f"{service} share", p["usd_per_million_checks"][service], "$ per M checks")
        for service in (*SERVICES, "network")
    ]
    out += [
        figure(f"$ a day: {kind}", p["usd_a_day_by_kind"][kind], "$") for kind in ("per check", "per source", "fixed")
    ]
    measured = (
        ("DynamoDB write units a check", "units:ddb_wru", "WRU"),
        ("DynamoDB read units a check", "units:ddb_rru", "RRU"),
        ("SQS requests a check", "units:sqs_requests", ""),
        ("S3 PUTs a check", "units:s3_put", ""),
        ("S3 GETs a check", "units:s3_get", ""),
        ("PutEvents events a check", "units:events_put", ""),
    )
    out += [figure(f"{label} (measured)", pc.get(key, 0.0), unit) for label, key, unit in measured]
    out += [
        figure(f"{f} Lambda time a check (measured)", pc.get(f"lambda_s:{f}", 0.0) * 1000, "ms")
        for f in settings.FUNCTIONS
    ]
    invoked = " / ".join(f"{pc.get(f'invocations:{f}', 0.0):.2f}" for f in ("dispatch", "fetch", "extract"))
    out.append(figure("invocations a check, dispatch / fetch / extract (measured)", invoked))
    slept = pc.get("metric:fetch:RunSecondsSlept", 0.0) * 1000
    out.append(figure("fetch's wait for links a check's host slept (measured: RunSecondsSlept)", slept, "ms"))
    planning = m["per_source_day"].get("units:ddb_wru", 0.0)
    out.append(figure("planning: write units a source a day (measured)", planning, "WRU"))
    out += [
        figure("new items a check (generated)", web["new_items_per_check"]),
        figure("checks answered 304 (measured)", web["share_304"] * 100, "%"),
        figure("listing page size, 200s (generated)", web["bytes_per_200"] / 1000, "KB"),
    ]
    return [{**f, "value": round(f["value"], 4)} if isinstance(f["value"], float) else f for f in out]


def notes(m: dict[str, Any], p: dict[str, Any]) -> str:
    from watch_sim import PER_PAGE, PRIORITY, RATES

    pc, web, ticks, parts = m["per_check"], m["web"], m["ticks"], p["usd_a_day_parts"]
    checks, per_tick = p["checks_a_day"], m["checks"] / max(1, ticks["send"] + ticks["both"])
    kinds, pipe = p["usd_a_day_by_kind"], m["pipeline_per_check"]
    per_fetch = 1 / max(1e-9, pc.get("invocations:fetch", 0.0))
    fetch_s, slept_each = pc.get("lambda_s:fetch", 0.0) * per_fetch, pc.get("metric:fetch:RunSecondsSlept", 0.0)
    lines = [
        f"On paper, {p['sources']:,} sources checked {checks / p['sources']:g} time a day ({checks:,.0f} checks a "
        f"day) cost ${p['usd_a_day_total']:.2f} a day, ${p['usd_per_million_total']:.2f} a million checks, with "
        f"{p['network_s']:g} s of network time a check billed to fetch (${p['usd_per_million_loopback']:.2f} a "
        f"million as measured on loopback). Of that, the checks' own calls ${kinds['per check']:.2f} a day, the "
        f"network time ${kinds['network']:.2f}, planning (per source) ${kinds['per source']:.2f}, fixed "
        f"${kinds['fixed']:.4f} ({TICKS_A_DAY:,} schedule invocations a day that find nothing to do, each an "
        "EventBridge Scheduler invocation).",
        "",
        "| service | per check | planning | fixed | network | $ a day | $ per M checks |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in (*SERVICES, "network"):
        cells = [parts[k].get(s, 0.0) for k in ("per check", "per source", "fixed")]
        cells.append(p["usd_a_day"]["network"] if s == "network" else 0.0)
        lines.append(
            f"| {s} | " + " | ".join(f"${c:.4f}" for c in cells)
            + f" | ${p['usd_a_day'][s]:.4f} | ${p['usd_per_million_checks'][s]:.3f} |"
        )  # fmt: skip
    dear = ", ".join(f"{name} ${usd * 1e6:.2f}" for name, usd in costliest(pc))
    tables = ", ".join(
        f"{k.removeprefix('wru:').removeprefix('crawlstack-')} {v:.2f}"
        for k, v in sorted(pc.items(), key=lambda kv: -kv[1])
        if k.startswith("wru:") and v >= 0.05
    )
    send, settle = m["schedule_per_check"]["send"], m["schedule_per_check"]["settle"]
    invoked = ", ".join(f"{f} {pc.get(f'invocations:{f}', 0.0):.2f}" for f in ("dispatch", "fetch", "extract"))
    lines += [
        "",
        f"Where a check's dollars go (measured, $ a million checks, largest first): {dear}. Its "
        f"{pc.get('units:ddb_wru', 0):.1f} write units by table: {tables} ((transactions): a check's end, "
        f"two items at twice the price). The schedule's part: sending {send.get('units:ddb_wru', 0):.2f} write "
        f"and {send.get('units:ddb_rru', 0):.2f} read units a check (claim, mark, validators, cursors), settling "
        f"{settle.get('units:ddb_wru', 0):.2f} and {settle.get('units:ddb_rru', 0):.2f} (an hour on, each check "
        "is settled and its end tried again, though extract ended it). Planning: "
        f"{m['per_source_day'].get('units:ddb_wru', 0):.2f} write units a source a day (its tokens, its plan "
        "item); an idle tick: "
        f"{m['fixed_per_tick'].get('units:ddb_rru', 0):.1f} read and {m['fixed_per_tick'].get('units:ddb_wru', 0):.1f}"
        f" write units, {m['fixed_per_tick'].get('lambda_s:schedule', 0) * 1000:.0f} ms.",
        "",
        f"Measured: {m['sources']} sources on {m['hosts']} loopback hosts, {m['days']} simulated day(s) of "
        f"{TICKS_A_DAY:,} ticks: {m['checks']} checks; {ticks['plan']} tick(s) planned, {ticks['send']} only "
        f"sent checks ({per_tick:.1f} a tick: each host's checks are spread evenly from the day's start, so a "
        f"host's turn comes with the others'), {ticks['settle']} only settled them, {ticks['both']} did both "
        f"(left out of the schedule's per-check part), {ticks['idle']} did nothing. Invocations a check: "
        f"{invoked}; each got the batches its event source mapping would (dispatch up to "
        f"{settings.QUEUES['frontier'].batch_size} messages, fetch up to {settings.QUEUES['fetch'].batch_size} "
        "hosts, extract a WARC). The web, generated: items arrive at a rate log-uniform over "
        f"{RATES[0]:g}-{RATES[1]:g} a day a source, {web['new_items_per_check']:.2f} new a check on average "
        f"(events delivered to the rule's queue: {web['events_delivered_per_check']:.2f} a check), "
        f"{web['share_304']:.0%} of checks answered 304, a 200 {web['bytes_per_200'] / 1000:.0f} KB with "
        f"{PER_PAGE} items; {web['pages_per_check']:.2f} listing requests a check. A source's priority_max is "
        f"{PRIORITY:g}, so it is checked once on the day, as the paper assumes (planning writes a plan item a "
        "planned check: more checks a source, more planning).",
        "",
        f"Fetch: {fetch_s:.2f} s an invocation of {per_fetch:.1f} checks, its hosts asleep {slept_each:.2f} s "
        f"each, side by side ({slept_each / max(1e-9, fetch_s):.0%} of the invocation; its RunSecondsSlept "
        "metric, summed over hosts, a check): a run waits for its pages' links only above the crawl's depth "
        "limit, and a watch check, at depth 0 of a crawl of depth 0, has none (crawlstack.fetch.host_loop); the "
        f"checks' Query calls read {pipe.get('op:dynamodb:Query:ddb_rru', 0):.1f} units a check. "
        f"At {p['sources']:,} sources a tick would send about {checks / TICKS_A_DAY:.0f} checks, not {per_tick:.1f}: "
        "dispatch, fetch and extract would share invocations, queue requests and objects (a WARC a flush) "
        "among more checks, so those per-check figures are an upper bound. "
        "robots.txt is fetched once a host here; deployed, once a host a day (settings.ROBOTS_TTL_SECONDS): "
        "a hosts-table write and a request more per host a day. Network time: fetch holds its invocation "
        f"{p['network_s']:g} s a check ({settings.FUNCTIONS['fetch'].memory_mb} MB), an input as in "
        "bench/paper.py; loopback has none. Lambda is each handler call's wall time on this host's CPU (not "
        "Graviton), one process, every AWS call a loopback round trip to moto through the counting endpoint.",
        "",
        "Not included: data transfer; storage (the WARCs and plan objects in S3, the watch table's items, per "
        "GB-month); CloudWatch metrics, alarms and dashboard (per metric-month); X-Ray; the bus rule's targets "
        "(the consumer's); the event source mappings' empty polls (a few cents a day, whatever the load); "
        "Lambda's init time; every free tier (EventBridge Scheduler's 14 million invocations a month among them).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--sources", type=int, default=300)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--network", type=float, default=DEFAULT_NETWORK_S, help="network seconds a check (input)")
    args = parser.parse_args(argv)
    from watch_sim import RATES, simulate

    load_before = load_average()
    started = time.monotonic()
    run = simulate(args.sources, args.hosts, args.days, args.seed)
    if run["transactions_failed"]:  # nothing rolled them back (watch_sim.table_sized_moto_work_skipped)
        raise SystemExit(f"watch_cost: transactions failed: {run['transactions_failed'][:3]}")
    measured = split(run["ticks"], run["pipeline"], args.sources)
    measured["web"] = web_figures(run["web"], measured["checks"], run["events_delivered"])
    measured |= {"sources": args.sources, "hosts": args.hosts, "days": args.days}
    on_paper = paper(measured, network_s=args.network)
    result = {
        "name": "watch_cost",
        "method": (
            f"The deployed watch's four handlers in one process on a fresh moto server behind a counting endpoint: "
            f"{args.sources} listings on {args.hosts} loopback hosts (items arriving at {RATES[0]:g}-{RATES[1]:g} "
            f"a day), {args.days} simulated day(s) of {TICKS_A_DAY:,} schedule ticks (clock patched), each tick's "
            "checks pushed through dispatch, fetch and extract in their event source mappings' batches; every AWS call "
            "priced at crawlstack.prices' us-east-1 list prices, Lambda from each handler call's wall time at its "
            "memory (arm64) plus a request per invocation, logs from the bytes logged at INFO; split into per "
            f"check, per source a day and fixed a day by what each tick did; {PAPER_SOURCES:,} sources at a check "
            f"a day on paper, with {args.network:g} s of network time a check (an input)."
        ),
        "load": {"before": load_before},
        "bench_seconds": round(time.monotonic() - started, 1),
        "measured": measured,
        "paper": on_paper,
        "prices": PRICES,
        "figures": figures(measured, on_paper),
        "notes": notes(measured, on_paper),
    }
    write_result(result)
    print(result["notes"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
