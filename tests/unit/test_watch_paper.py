"""bench/watch_paper.py's arithmetic: a watch's measured quantities split three ways and priced, by hand."""

from __future__ import annotations

from typing import Any

import benches
import pytest

from crawlstack import settings
from crawlstack.prices import PRICES

watch = benches.load("watch_paper")

MEASURED: dict[str, Any] = {
    # A check: 10 write and 8 read units, an SQS request, half a PUT, a tenth of a GET, 2 events,
    # 0.1 GB-s of fetch in a quarter of an invocation, 1,000 bytes of logs; calls are not priced.
    "per_check": {
        "units:ddb_wru": 10.0,
        "units:ddb_rru": 8.0,
        "units:sqs_requests": 1.0,
        "units:s3_put": 0.5,
        "units:s3_get": 0.1,
        "units:events_put": 2.0,
        "lambda_gb_s:fetch": 0.1,
        "invocations:fetch": 0.25,
        "log_bytes:extract": 1000.0,
        "calls:dynamodb:PutItem": 3.0,
    },
    "per_source_day": {"units:ddb_wru": 2.0},
    # A tick: 10 read units, 0.05 GB-s, one invocation of the function and of EventBridge Scheduler.
    "fixed_per_tick": {"units:ddb_rru": 10.0, "lambda_gb_s:schedule": 0.05, "invocations:schedule": 1.0},
}


def test_a_million_sources_at_a_check_a_day_priced_by_hand() -> None:
    assert watch.TICKS_A_DAY == 1440 and settings.SCHEDULE_RATE_MINUTES == 1
    p = watch.paper(MEASURED, sources=1_000_000, checks_a_day=1.0, network_s=0.0)
    per_m = p["usd_per_million_checks"]
    # A million checks: 10 M WRU at $0.625/M and 8 M RRU at $0.125/M; a million sources' planning, 2 M WRU;
    # 1,440 ticks of 10 RRU.
    assert per_m["dynamodb"] == pytest.approx(6.25 + 1.0 + 1.25 + 1440 * 10 * 0.125e-6)
    assert per_m["sqs"] == pytest.approx(0.40)
    assert per_m["s3"] == pytest.approx(0.5 * 5.0 + 0.1 * 0.4)
    assert per_m["events"] == pytest.approx(2.0)
    assert per_m["lambda"] == pytest.approx((0.1 * 1e6 + 1440 * 0.05) * PRICES["lambda_gb_s"])
    assert per_m["lambda_requests"] == pytest.approx((0.25 * 1e6 + 1440) * 0.20e-6)
    assert per_m["logs"] == pytest.approx(0.50)  # 10^9 bytes
    assert per_m["scheduler"] == pytest.approx(1440 * 1e-6)
    assert per_m["network"] == 0
    assert p["usd_per_million_total"] == pytest.approx(sum(per_m.values()))
    assert p["usd_a_day_total"] == pytest.approx(p["usd_per_million_total"])  # a million checks a day
    kinds = p["usd_a_day_by_kind"]
    assert kinds["per source"] == pytest.approx(1.25)
    assert kinds["fixed"] == pytest.approx(1440 * (10 * 0.125e-6 + 0.05 * PRICES["lambda_gb_s"] + 0.2e-6 + 1e-6))


def test_network_time_is_fetch_seconds_at_its_memory_and_checks_scale_only_the_per_check_part() -> None:
    one = watch.paper(MEASURED, sources=100_000, checks_a_day=1.0, network_s=0.5)
    # 100,000 checks x 0.5 s x 512 MB.
    network = 100_000 * 0.5 * settings.FUNCTIONS["fetch"].memory_mb / 1024 * PRICES["lambda_gb_s"]
    assert one["usd_a_day"]["network"] == pytest.approx(network) == pytest.approx(0.333335)
    assert one["usd_a_day_total"] - one["usd_a_day_loopback"] == pytest.approx(network)
    assert one["usd_per_million_total"] == pytest.approx(one["usd_a_day_total"] * 10)
    two = watch.paper(MEASURED, sources=100_000, checks_a_day=2.0, network_s=0.5)
    for kind in ("per source", "fixed"):
        assert two["usd_a_day_by_kind"][kind] == pytest.approx(one["usd_a_day_by_kind"][kind])
    for kind in ("per check", "network"):
        assert two["usd_a_day_by_kind"][kind] == pytest.approx(2 * one["usd_a_day_by_kind"][kind])


def tick(planned: int = 0, sent: int = 0, settled: int = 0) -> dict[str, int]:
    return {"planned": planned, "sent": sent, "settled": settled}


def test_each_tick_is_split_by_what_it_did_less_an_idle_tick() -> None:
    idle = {"units:ddb_rru": 9.0, "invocations:schedule": 1.0}
    ticks = [
        (tick(), idle),
        (tick(), {"units:ddb_rru": 11.0, "invocations:schedule": 1.0}),  # idle ticks are averaged: 10 RRU
        (tick(planned=100), {"units:ddb_rru": 40.0, "units:ddb_wru": 200.0, "invocations:schedule": 1.0}),
        (tick(sent=10), {"units:ddb_rru": 30.0, "units:ddb_wru": 20.0, "invocations:schedule": 1.0}),
        (tick(settled=5), {"units:ddb_rru": 25.0, "units:ddb_wru": 5.0, "invocations:schedule": 1.0}),
        (tick(sent=10, settled=5), {"units:ddb_rru": 999.0, "invocations:schedule": 1.0}),  # both: left out
    ]
    split = watch.split(ticks, {"units:ddb_wru": 150.0, "invocations:fetch": 2.0}, sources=100)
    assert split["checks"] == 20
    assert split["fixed_per_tick"] == {"units:ddb_rru": 10.0, "invocations:schedule": 1.0}
    planning = {"units:ddb_rru": 0.3, "units:ddb_wru": 2.0, "invocations:schedule": 0}  # less an idle tick
    assert split["per_source_day"] == pytest.approx(planning)
    assert split["schedule_per_check"]["send"]["units:ddb_wru"] == pytest.approx(2.0)
    assert split["schedule_per_check"]["settle"]["units:ddb_rru"] == pytest.approx(3.0)
    # The pipeline over the 20 checks sent, plus a send's and a settle's part.
    assert split["per_check"]["units:ddb_wru"] == pytest.approx(150 / 20 + 2.0 + 1.0)
    assert split["per_check"]["units:ddb_rru"] == pytest.approx(2.0 + 3.0)
    assert split["per_check"]["invocations:fetch"] == pytest.approx(0.1)
    assert split["per_check"]["invocations:schedule"] == pytest.approx(0)
    assert split["ticks"] == {"idle": 2, "plan": 1, "send": 1, "settle": 1, "both": 1}


def test_a_day_with_no_tick_that_only_settled_cannot_be_split() -> None:
    ticks = [(tick(), {}), (tick(planned=1), {}), (tick(sent=1), {})]
    with pytest.raises(SystemExit, match="only settles"):
        watch.split(ticks, {}, sources=1)
