"""bench/paper.py's arithmetic for host runs, checked by hand on round numbers (tests/fixtures/cost_sample.json).

The fixture: dispatch 200 ms, fetch 300 ms, extract 100 ms of handler time a
page; 12 write units (not split by table) and 3 read units a page; $20 a
million pages, $6 of it S3.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import benches
import pytest

from crawlstack import settings

paper = benches.load("paper")

FIXTURE = Path(__file__).parent.parent / "fixtures" / "cost_sample.json"
# A run: fetch's 300 s timeout less the 70 s stop margin; the next starts a 1 s batching window later.
ROT = 230 / 231


@pytest.fixture
def cost() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_the_model_reads_the_stack_it_models() -> None:
    assert paper.HOSTS_PER_INVOCATION == settings.QUEUES["fetch"].batch_size == 100
    assert settings.FUNCTIONS["fetch"].timeout_seconds - settings.RUN_STOP_MARGIN_SECONDS == paper.RUN_SECONDS
    assert paper.rotation() == pytest.approx(paper.RUN_SECONDS / (paper.RUN_SECONDS + paper.BATCHING_WINDOW_S))
    cdk = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())
    assert cdk["context"]["crawlstack:fetch_concurrency"] == paper.STACK_FETCH_MAX_CONCURRENCY


def test_the_fetch_setting_comes_from_cdk_json(tmp_path: Path) -> None:
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps({"context": {"crawlstack:fetch_concurrency": 250}}))
    assert paper.stack_fetch_concurrency(path) == 250
    path.write_text(json.dumps({"context": {}}))
    assert paper.stack_fetch_concurrency(path) == 10  # infra/config.py's default
    assert paper.stack_fetch_concurrency(tmp_path / "absent.json") == 10


def test_a_busy_host_is_paced_by_its_delay_or_its_request_if_longer() -> None:
    assert paper.request_gap(5.0, 0.3, 0.5) == 5.0
    # A request of 0.5 s network time and 0.3 s of its own holds the next back at a 0.5 s delay.
    assert paper.request_gap(0.5, 0.3, 0.5) == pytest.approx(0.8)
    # Each 230 s run loses the batching window before the next starts: 5 s a page, 230/231 of the time.
    assert paper.rotation(230, 1) == pytest.approx(ROT)
    assert paper.per_host_rate(5.0, ROT) == pytest.approx(0.2 * ROT)
    with pytest.raises(ValueError):
        paper.rotation(0, 1)


def test_fetch_costs_a_share_of_an_invocation_not_a_page_s_network_time(cost: dict) -> None:
    # 100 hosts a page every 5 s each, all the time: 20 pages an invocation-second, 0.05 s a page.
    seconds = paper.seconds_per_page(cost["handler_ms_per_page"], 5.0, 100, 1.0)
    assert seconds == pytest.approx({"dispatch": 0.2, "fetch": 0.05, "extract": 0.1})
    # Ten hosts share it: ten times the invocation time a page.
    assert paper.seconds_per_page(cost["handler_ms_per_page"], 5.0, 10, 1.0)["fetch"] == pytest.approx(0.5)
    assert paper.seconds_per_page(cost["handler_ms_per_page"], 1.0, 100, ROT)["fetch"] == pytest.approx(0.01 / ROT)
    with pytest.raises(KeyError):
        paper.seconds_per_page({"fetch": 1.0, "extract": 1.0}, 5.0, 100, 1.0)


@pytest.mark.parametrize("hosts", [1_000, 100_000])
@pytest.mark.parametrize("delay", [1.0, 5.0])
def test_every_host_busy_needs_hosts_over_batch_fetch_invocations(cost: dict, hosts: int, delay: float) -> None:
    r = paper.scenario(cost, hosts, delay, 0.5)
    assert r["ceiling"] == pytest.approx(hosts * ROT / delay)
    # Little's law over the invocation-seconds a page gives back the hosts a batch: whatever the delay.
    assert r["needed"]["fetch"] == pytest.approx(hosts / 100)
    assert r["needed"]["dispatch"] == pytest.approx(r["ceiling"] * 0.2)
    assert r["needed"]["extract"] == pytest.approx(r["ceiling"] * 0.1)


def test_a_batch_is_never_more_hosts_than_there_are() -> None:
    sample = paper.SAMPLE_COST
    r = paper.scenario(sample, 40, 5.0, 0.5)
    # 40 hosts in one invocation: one invocation at the politeness ceiling, sharing its time 40 ways.
    assert r["needed"]["fetch"] == pytest.approx(1.0)
    assert r["pages_per_flush"] == pytest.approx(40)


def test_as_deployed_the_fetch_setting_is_exactly_enough_for_1000_hosts(cost: dict) -> None:
    rate = ROT / 5
    seconds = {"dispatch": 0.2, "fetch": 5 / (100 * ROT), "extract": 0.1}
    limits = paper.ceilings(1_000, rate, seconds, 100, {"all tables": 12.0}, 3.0, paper.DEFAULT_QUOTAS)
    fetch_setting = paper.STACK_FETCH_MAX_CONCURRENCY
    assert limits == pytest.approx(
        {
            paper.POLITENESS: 1_000 * rate,  # 199.1
            paper.FETCH_SETTING: fetch_setting * 100 * rate,
            "fetch's event source: 1,000 batches x 100 hosts": 100_000 * rate,  # 19 913
            "dispatch's event source: 1,000 batches at once": 1_000 / 0.2,  # 5 000
            "extract's event source: 1,000 batches at once": 1_000 / 0.1,  # 10 000
            "account concurrency": 1_000 / (0.2 + 0.1 + 5 / (100 * ROT)),  # 2 855
            "SQS messages in flight (a host worked, a run message)": 120_000 * rate,  # 23 896
            "DynamoDB write quota, all tables table": 40_000 / 12,
            "DynamoDB read quota (all reads as one table's)": 40_000 / 3,
        }
    )
    if fetch_setting == 10:
        # A tie (10 invocations x 100 hosts = 1 000 hosts) goes to politeness.
        assert paper.binding(limits) == (paper.POLITENESS, pytest.approx(199.134, abs=1e-3))


def test_at_100000_hosts_fetch_then_the_account_then_dispatch_bind(cost: dict) -> None:
    r = paper.scenario(cost, 100_000, 5.0, 0.5)
    assert r["default"]["binds"] == paper.FETCH_SETTING
    assert r["default"]["rate"] == pytest.approx(paper.STACK_FETCH_MAX_CONCURRENCY * 100 * ROT / 5)
    # Fetch raised to 1 000: the account's 1 000 executions at 0.2 + 0.1 + 0.05/ROT invocation-seconds a page.
    assert r["fetch_raised"]["binds"] == "account concurrency"
    assert r["fetch_raised"]["rate"] == pytest.approx(1_000 / (0.3 + 0.05 / ROT))
    # Quotas raised: dispatch's event source, 1 000 batches of 0.2 s a page, far under 19 913 pages/s of hosts.
    assert r["raised"]["binds"] == "dispatch's event source: 1,000 batches at once"
    assert r["raised"]["rate"] == pytest.approx(5_000)
    assert r["raised"]["concurrency"] == pytest.approx({"dispatch": 1_000, "fetch": 5_000 * 0.05 / ROT, "extract": 500})


def test_a_tie_goes_to_the_limit_listed_first() -> None:
    assert paper.binding({"a": 2.0, "b": 1.0, "c": 1.0 - 1e-12}) == ("b", 1.0)
    assert paper.binding({"a": 3.0, "b": math.inf, "c": 2.5}) == ("c", 2.5)


def test_runs_write_their_lease_renewals_and_release_over_their_pages() -> None:
    # A 120 s lease renewed with 90 s left: every 30 s, 7 times in 230 s; with the lease and the release, 9.
    assert paper.renewals_per_run(230) == 7
    assert paper.run_writes_per_page(5.0, 230) == pytest.approx(9 / 46)
    assert paper.run_writes_per_page(1.0, 230) == pytest.approx(9 / 230)


def test_a_flush_holds_each_host_s_pages_of_five_seconds() -> None:
    assert paper.pages_per_flush(5.0, 100) == pytest.approx(100)
    assert paper.pages_per_flush(1.0, 100) == pytest.approx(500)
    assert paper.pages_per_flush(10.0, 1) == 1.0  # never less than the page that is flushed


def test_write_units_by_table_take_the_runs_writes(cost: dict) -> None:
    assert paper.table_wru(cost, 0.2) == pytest.approx({"all tables": 12.2})
    split = {**cost, "write_units_per_page_by_table": {"crawlstack-urls": 2.0, "crawlstack-hosts": 0.1}}
    assert paper.table_wru(split, 0.2) == pytest.approx({"crawlstack-urls": 2.0, "crawlstack-hosts": 0.3})


def test_a_page_costs_the_measured_total_with_fetch_and_s3_worked_out_at_scale(cost: dict) -> None:
    usd = paper.usd_per_million(cost, 5.0, 100, 1.0, run_seconds=230, memory_mb=512)
    # Out: fetch's measured 0.3 s at 0.5 GB ($2.00001) and the measured S3 ($6).
    assert usd["replaced"] == pytest.approx(0.3 * 0.5 * 13.3334 + 6)
    # In: 0.05 s of a 0.5 GB invocation a page.
    assert usd["fetch_lambda"] == pytest.approx(0.05 * 0.5 * 13.3334)
    # A flush of 100 pages: 3 PUTs at $5, a GET at $0.40, a request at $0.20, 3 SQS requests at $0.40 (per million).
    assert usd["flush"] == pytest.approx((3 * 5 + 0.4 + 0.2 + 3 * 0.4) / 100)
    # A run of 46 pages: 9 writes at $0.625, 3 SQS requests a 10 messages, a hundredth of a request.
    assert usd["runs"] == pytest.approx((9 * 0.625 + 0.3 * 0.4 + 0.2 / 100) / 46)
    assert usd["total"] == pytest.approx(20 - usd["replaced"] + usd["fetch_lambda"] + usd["flush"] + usd["runs"])
    assert usd["total"] == pytest.approx(12.6263, abs=1e-4)
    # No admission writes known: the worst case is all three write units a page.
    assert usd["admission_worst_extra"] == pytest.approx(3 * 0.625)
    # A 1 s delay shares the invocation and each flush five times as widely.
    fast = paper.usd_per_million(cost, 1.0, 100, 1.0, run_seconds=230, memory_mb=512)
    assert fast["fetch_lambda"] == pytest.approx(usd["fetch_lambda"] / 5)
    assert fast["flush"] == pytest.approx(usd["flush"] / 5)


def test_per_day_and_the_cpu_a_page_may_take() -> None:
    pages, usd = paper.per_day(12.5, 4.0)
    assert pages == 1_080_000
    assert usd == pytest.approx(4.32)
    # 512 MB is 512/1 769 of a vCPU; 100 pages a second at 1 s leave a hundredth of it each.
    assert paper.cpu_ms_per_page(1.0, 100, 512) == pytest.approx(512 / 1769 / 100 * 1000)


def test_the_budget_counter_pays_for_the_whole_crawl_item() -> None:
    # 1 024 + 1 000 x 20 bytes = 21 024 bytes: 21 write units a take of up to 16 pages, 1 000 / 21 takes a second.
    assert paper.crawl_item_bytes(1_000) == 21_024
    assert paper.budget_counter_ceiling(1_000) == pytest.approx(1_000 / 21 * settings.BUDGET_CHUNK)
    # 2 001 024 bytes: more than an item may hold.
    assert paper.budget_counter_ceiling(100_000) == 0.0


def test_10000_pages_a_second_at_1_s_needs_no_quota_request() -> None:
    c = paper.configuration(paper.SAMPLE_COST, 10_000, 1.0, 0.5)
    assert c["hosts"] == math.ceil(10_000 / ROT)  # 10 044
    assert c["concurrency"] == {"dispatch": 280, "fetch": 101, "extract": 210}
    assert c["account_concurrency"] == 591
    assert c["quota_requests"] == [] and c["over_event_source"] == []
    assert c["binds"] == paper.POLITENESS and c["rate"] >= 10_000
    # urls: 2 write units a page.
    assert c["table"] == "urls" and c["table_wru_per_s"] == pytest.approx(20_000)


def test_10000_pages_a_second_at_5_s_asks_for_the_account_s_concurrency() -> None:
    c = paper.configuration(paper.SAMPLE_COST, 10_000, 5.0, 0.5)
    assert c["hosts"] == math.ceil(10_000 * 5 / ROT)  # 50 218
    assert c["fetch_concurrency"] == 503
    assert c["account_concurrency"] == 280 + 503 + 210
    # 993 of the default 1 000 is past 80% of it: asked for with the headroom, 993 / 0.8.
    assert c["quota_requests"] == ["Lambda concurrent executions to 1,242 (default 1,000, needs 993)"]
    assert c["binds"] == paper.POLITENESS and c["rate"] >= 10_000
    assert c["next_limit"] == "account concurrency"


def test_a_dispatch_too_slow_for_its_event_source_is_named(cost: dict) -> None:
    # 0.2 s of dispatch a page: 2 000 batches at once for 10 000 pages/s, past the 1 000 of standard mode.
    c = paper.configuration(cost, 10_000, 5.0, 0.5)
    assert c["over_event_source"] == ["dispatch"]
    assert (c["binds"], c["rate"]) == ("dispatch's event source: 1,000 batches at once", pytest.approx(5_000))
    assert any(r.startswith("Lambda concurrent executions to 4,379") for r in c["quota_requests"])


def test_the_report_keeps_the_contract(cost: dict) -> None:
    result = paper.report(cost, True, 0.5)
    assert result["name"] == "paper"
    assert result["machine"].startswith("on paper (from cost.json measured on SAMPLE fixture")
    assert {tuple(sorted(f)) for f in result["figures"]} == {("label", "meets", "target", "unit", "value")}
    assert all(f["target"] is None and f["meets"] is None for f in result["figures"])
    by_label = {f["label"]: f["value"] for f in result["figures"]}
    assert by_label["1,000 hosts, 5 s: politeness ceiling"] == 199
    assert by_label["100,000 hosts, 1 s: fetch concurrency needed"] == 1_000
    assert by_label["100,000 hosts, 5 s, quotas raised: throughput"] == 5_000
    assert by_label["100,000 hosts, 5 s, quotas raised: concurrency dispatch / fetch / extract"] == "1,000 / 252 / 500"
    assert by_label["1,000 hosts, 5 s: cost per million pages"] == pytest.approx(12.63)
    assert "| 1,000 | 5 s | 199 pages/s | $12.63 |" in result["notes"]
    assert "10,000 pages/s at 1 s: hosts" in by_label


def test_without_cost_json_the_sample_is_used_and_says_so(tmp_path: Path) -> None:
    cost, measured = paper.load_cost(tmp_path / "absent.json")
    assert not measured and cost is paper.SAMPLE_COST
    result = paper.report(cost, measured, 0.5)
    assert "SAMPLE" in result["machine"] and "SAMPLE" in result["notes"]
