"""bench/paper.py's arithmetic, checked by hand on round numbers (tests/fixtures/cost_sample.json)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import benches
import pytest

from crawlstack import settings

paper = benches.load("paper")

FIXTURE = Path(__file__).parent.parent / "fixtures" / "cost_sample.json"


@pytest.fixture
def cost() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_politeness_ceiling_is_hosts_over_delay() -> None:
    assert paper.politeness_ceiling(1_000, 5.0) == 200
    assert paper.politeness_ceiling(100_000, 1.0) == 100_000


def test_seconds_per_page_adds_the_network_time_to_fetch(cost: dict) -> None:
    # dispatch is keyed by its queue ("frontier") in cost.json; 200 ms, 300 ms + 500 ms, 100 ms.
    seconds = paper.seconds_per_page(cost["handler_ms_per_page"], 0.5)
    assert seconds == pytest.approx({"dispatch": 0.2, "fetch": 0.8, "extract": 0.1})
    # A full batch waits on the network for ten pages at once: 0.3 + 0.05.
    assert paper.seconds_per_page(cost["handler_ms_per_page"], 0.5, 10)["fetch"] == pytest.approx(0.35)
    with pytest.raises(KeyError):
        paper.seconds_per_page({"fetch": 1.0, "extract": 1.0}, 0.5)


def test_concurrency_needed_is_rate_times_seconds() -> None:
    needed = paper.concurrency_needed(200, {"dispatch": 0.2, "fetch": 0.8, "extract": 0.1})
    assert needed == pytest.approx({"dispatch": 40, "fetch": 160, "extract": 20})


def test_as_deployed_the_fetch_event_source_binds(cost: dict) -> None:
    seconds = paper.seconds_per_page(cost["handler_ms_per_page"], 0.5)
    limits = paper.ceilings(1_000, 5.0, seconds, 12.0, paper.DEFAULT_QUOTAS)
    assert limits == pytest.approx(
        {
            "politeness (hosts / delay)": 200,
            "fetch's event source maximum concurrency": 10 / 0.8,  # 12.5
            "1 000 concurrent batches per event source": 1_000 / 0.8,  # fetch is the slowest: 1 250
            "account concurrency": 1_000 / 1.1,  # 909.1
            "DynamoDB table write quota": 40_000 / 12,  # 3 333.3
        }
    )
    assert paper.binding(limits) == ("fetch's event source maximum concurrency", 12.5)


def test_with_quotas_raised_politeness_binds_at_1000_hosts_and_the_event_source_at_100000(cost: dict) -> None:
    seconds = paper.seconds_per_page(cost["handler_ms_per_page"], 0.5)
    small = paper.ceilings(1_000, 5.0, seconds, 12.0, paper.RAISED_QUOTAS)
    assert paper.binding(small) == ("politeness (hosts / delay)", 200)
    large = paper.ceilings(100_000, 5.0, seconds, 12.0, paper.RAISED_QUOTAS)
    assert large["account concurrency"] == math.inf and large["DynamoDB table write quota"] == math.inf
    name, rate = paper.binding(large)
    # 1 000 invocations / 0.8 s a page, far below 20 000 (fetch's setting at its maximum, the event source's cap)
    assert name == "fetch's event source maximum concurrency" and rate == pytest.approx(1_250)
    assert large["1 000 concurrent batches per event source"] == pytest.approx(1_250)


def test_with_only_fetch_raised_the_account_concurrency_binds(cost: dict) -> None:
    seconds = paper.seconds_per_page(cost["handler_ms_per_page"], 0.5)
    limits = paper.ceilings(1_000, 1.0, seconds, 12.0, paper.FETCH_RAISED)
    # 1 000 executions / (0.2 + 0.8 + 0.1) s a page = 909.1, below the ceiling of 1 000.
    assert paper.binding(limits) == ("account concurrency", pytest.approx(1_000 / 1.1))


def test_the_budget_counter_pays_for_the_whole_crawl_item() -> None:
    # 1 024 + 1 000 x 20 bytes = 21 024 bytes: 21 write units a take of up to 16 pages, 1 000 / 21 takes a second.
    assert paper.crawl_item_bytes(1_000) == 21_024
    assert paper.budget_counter_ceiling(1_000) == pytest.approx(1_000 / 21 * settings.BUDGET_CHUNK)
    # 2 001 024 bytes: more than an item may hold.
    assert paper.budget_counter_ceiling(100_000) == 0.0


def test_cost_adds_fetch_billed_for_the_network_time(cost: dict) -> None:
    # 0.5 s x 0.5 GB x $0.0000133334 per GB-s x 10^6 pages = $3.33335.
    assert paper.usd_per_million(cost, 0.5) == pytest.approx(23.33335)
    pages, usd = paper.per_day(12.5, 23.33335)
    assert pages == 1_080_000
    assert usd == pytest.approx(25.200018)


def test_the_report_keeps_the_contract(cost: dict) -> None:
    result = paper.report(cost, True, 0.5)
    assert result["name"] == "paper"
    assert result["machine"].startswith("on paper (from cost.json measured on SAMPLE fixture")
    assert {tuple(sorted(f)) for f in result["figures"]} == {("label", "meets", "target", "unit", "value")}
    assert all(f["target"] is None and f["meets"] is None for f in result["figures"])
    by_label = {f["label"]: f["value"] for f in result["figures"]}
    assert by_label["1,000 hosts, 5 s: politeness ceiling"] == 200
    assert by_label["1,000 hosts, 5 s, as deployed: throughput"] == 12.5
    assert by_label["100,000 hosts, 1 s: fetch concurrency needed"] == 80_000
    assert "| 1,000 | 5 s | 200 pages/s | 40 / 160 / 20 |" in result["notes"]


def test_without_cost_json_the_sample_is_used_and_says_so(tmp_path: Path) -> None:
    cost, measured = paper.load_cost(tmp_path / "absent.json")
    assert not measured and cost is paper.SAMPLE_COST
    result = paper.report(cost, measured, 0.5)
    assert "SAMPLE" in result["machine"] and "SAMPLE" in result["notes"]
