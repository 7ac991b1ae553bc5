"""The cost model behind bench/cost.py: billable units per call, and the bill they add up to."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import benches
import pytest

from crawlstack import settings
from crawlstack.local.billing import (
    PRICES,
    Bill,
    LogMeter,
    dynamodb_units,
    event_entry_size,
    events_units,
    item_size,
    lambda_requests_usd,
    lambda_usd,
    logs_usd,
    s3_units,
    sqs_units,
)
from crawlstack.local.faulty import Call


def call(
    service: str, operation: str, request: Any = None, reply: Any = None, status: int = 200, path: str = ""
) -> Call:
    req = json.dumps(request or {}).encode()
    rep = json.dumps(reply or {}).encode()
    return Call(service, operation, None, status, len(req), len(rep), path=path, request=req, reply=rep)


def test_a_put_is_billed_a_write_unit_per_started_kib() -> None:
    small = {"pk": {"S": "a"}}
    big = {"pk": {"S": "a"}, "body": {"S": "x" * 1500}}
    assert dynamodb_units("PutItem", json.dumps({"Item": small}).encode(), b"") == {"ddb_wru": 1}
    assert item_size(big) > 1024
    assert dynamodb_units("PutItem", json.dumps({"Item": big}).encode(), b"") == {"ddb_wru": 2}


def test_reads_are_halved_when_eventually_consistent() -> None:
    reply = json.dumps({"Item": {"pk": {"S": "a"}}}).encode()
    assert dynamodb_units("GetItem", b"{}", reply) == {"ddb_rru": 0.5}
    assert dynamodb_units("GetItem", json.dumps({"ConsistentRead": True}).encode(), reply) == {"ddb_rru": 1.0}


def test_a_batch_get_bills_each_key_asked_found_or_not() -> None:
    request = {"RequestItems": {"t": {"Keys": [{"pk": {"S": "a"}}, {"pk": {"S": "b"}}, {"pk": {"S": "c"}}]}}}
    reply = {"Responses": {"t": [{"pk": {"S": "a"}}]}}
    assert dynamodb_units("BatchGetItem", json.dumps(request).encode(), json.dumps(reply).encode()) == {"ddb_rru": 1.5}


def test_sqs_bills_per_64_kib_chunk_and_not_the_empty_polls() -> None:
    assert sqs_units("SendMessageBatch", b"x" * (64 * 1024 + 1), b"") == {"sqs_requests": 2}
    assert sqs_units("ReceiveMessage", b"{}", b"{}") == {}
    assert sqs_units("GetQueueAttributes", b"{}", b"{}") == {}


def test_a_warc_put_also_pays_the_extract_queue_message_s3_sends() -> None:
    assert s3_units("PutObject", f"/bucket/{settings.PAGES_PREFIX}dt=2026-01-01/a.warc.gz") == {
        "s3_put": 1,
        "sqs_requests": 1,
    }
    assert s3_units("PutObject", "/bucket/records/crawl_id=c/dt=2026-01-01/a.jsonl.gz") == {"s3_put": 1}
    assert s3_units("GetObject", "/bucket/pages/a") == {"s3_get": 1}
    assert s3_units("DeleteObject", "/bucket/pages/a") == {}


def test_put_events_bills_each_entry_per_started_64_kb_chunk() -> None:
    small = {"Source": "crawlstack", "DetailType": "crawlstack.item", "Detail": '{"a": 1}', "EventBusName": "b"}
    # Source, DetailType and Detail in UTF-8; the bus's name is not counted, a Time is 14 bytes.
    assert event_entry_size(small) == len("crawlstack") + len("crawlstack.item") + len('{"a": 1}')
    assert event_entry_size({**small, "Time": "2026-01-01T00:00:00Z", "Resources": ["é"]}) == (
        event_entry_size(small) + 14 + 2
    )
    exact = {"Source": "s", "DetailType": "t", "Detail": "x" * (64 * 1024 - 2)}  # 64 KB exactly: one chunk
    over = {**exact, "Detail": exact["Detail"] + "x"}  # a byte more: two
    request = json.dumps({"Entries": [small, exact, over]}).encode()
    assert events_units("PutEvents", request) == {"events_put": 1 + 1 + 2}
    assert events_units("PutEvents", b'{"Entries": []}') == {}
    assert events_units("DescribeEventBus", b"{}") == {}
    bill = Bill()
    bill.observe(call("events", "PutEvents", {"Entries": [small, small]}, {"FailedEntryCount": 0}))
    bill.observe(call("events", "PutRule", {"Name": "r"}))
    assert bill.units["events_put"] == 2
    assert bill.usd()["events"] == pytest.approx(2 * PRICES["events_put"]) == pytest.approx(2 / 1_000_000)
    assert bill.unbilled_calls == {("events", "PutRule"): 1}


def test_a_failed_condition_costs_a_write_unit_and_other_failures_nothing() -> None:
    bill = Bill()
    update = {"TableName": "hosts", "Key": {"host": {"S": "a"}}, "ExpressionAttributeValues": {":n": {"N": "1"}}}
    bill.observe(call("dynamodb", "UpdateItem", update, status=400))
    bill.observe(call("dynamodb", "UpdateItem", update, status=500))
    bill.observe(call("dynamodb", "GetItem", {"TableName": "hosts"}, status=400))
    assert bill.units["ddb_wru"] == 1
    assert bill.write_units_by_table == {"hosts": 1}
    assert sum(bill.billed_calls.values()) == 1


def test_write_units_are_told_apart_by_table_batches_included() -> None:
    bill = Bill()
    bill.observe(call("dynamodb", "PutItem", {"TableName": "urls", "Item": {"pk": {"S": "a"}}}))
    bill.observe(call("dynamodb", "DeleteItem", {"TableName": "parked", "Key": {"host": {"S": "a"}}}))
    batch = {
        "RequestItems": {
            "results": [{"PutRequest": {"Item": {"pk": {"S": "a"}}}}, {"PutRequest": {"Item": {"pk": {"S": "b"}}}}],
            "urls": [{"DeleteRequest": {"Key": {"pk": {"S": "c"}}}}],
        }
    }
    bill.observe(call("dynamodb", "BatchWriteItem", batch))
    bill.observe(call("dynamodb", "GetItem", {"TableName": "urls"}, {"Item": {"pk": {"S": "a"}}}))
    assert bill.write_units_by_table == {"urls": 2, "parked": 1, "results": 2}
    assert bill.units["ddb_wru"] == 5 and bill.units["ddb_rru"] == 0.5
    assert bill.units_by_operation == {
        ("dynamodb", "PutItem", "ddb_wru"): 1,
        ("dynamodb", "DeleteItem", "ddb_wru"): 1,
        ("dynamodb", "BatchWriteItem", "ddb_wru"): 3,
        ("dynamodb", "GetItem", "ddb_rru"): 0.5,
    }


def test_the_bill_prices_each_service_at_list_prices() -> None:
    bill = Bill()
    bill.observe(call("dynamodb", "PutItem", {"TableName": "urls", "Item": {"pk": {"S": "a"}}}))
    bill.observe(call("sqs", "SendMessageBatch", {"Entries": []}))
    bill.observe(call("s3", "PutObject", path="/bucket/records/a.jsonl.gz"))
    bill.observe(call("sqs", "GetQueueAttributes", {}))
    usd = bill.usd()
    assert usd["dynamodb"] == pytest.approx(PRICES["ddb_wru"])
    assert usd["sqs"] == pytest.approx(PRICES["sqs_requests"])
    assert usd["s3"] == pytest.approx(PRICES["s3_put"])
    assert bill.calls_by_service() == {"dynamodb": 1, "sqs": 1, "s3": 1}
    assert bill.unbilled_calls == {("sqs", "GetQueueAttributes"): 1}


def test_the_design_floor_is_its_contracts_writes_and_puts_at_list_prices() -> None:
    design_floor = benches.load("cost").design_floor

    # Per page: dedupe claim and record (a WRU each; a first try's outcome is the crawl log's);
    # at 5 s a flush holds 100 hosts x 5 s / 5 s = 100 pages.
    assert design_floor(5.0) == {"dynamodb": 1.25, "s3": 0.154, "sqs": 0.135}
    fast = design_floor(1.0)  # 500 pages a flush; the writes per page stay
    assert fast["dynamodb"] == 1.25 and fast["s3"] == pytest.approx(0.031) and fast["sqs"] == pytest.approx(0.123)
    with pytest.raises(ValueError):
        design_floor(0.0)


def test_lambda_requests_and_log_ingestion_at_list_prices() -> None:
    # $0.20 a million requests; $0.50 a GB of logs ingested (10^9 bytes); the rest as committed.
    assert lambda_requests_usd(1_000_000) == pytest.approx(0.20)
    assert lambda_requests_usd(0) == 0
    assert logs_usd(10**9) == pytest.approx(0.50)
    assert logs_usd(2_000) == pytest.approx(1e-6)
    assert lambda_usd(1.0) == pytest.approx(0.0000133334)
    assert PRICES["sqs_requests"] == pytest.approx(0.40 / 1_000_000)


def test_the_log_meter_counts_each_function_s_logger_and_emf_lines(tmp_path: Path) -> None:
    sink = io.StringIO()
    logger = logging.getLogger("billing-test-fn")
    handler = logging.StreamHandler(sink)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        meter = LogMeter()
        with meter.counting(["billing-test-fn", "billing-test-silent"]):
            logger.warning("héllo")  # 6 bytes in UTF-8, plus the line feed
        logger.warning("after: not counted")
    finally:
        logger.removeHandler(handler)
    assert handler.stream is sink  # the handler's own stream is back
    assert sink.getvalue() == "héllo\nafter: not counted\n"  # the lines still reach it
    metrics = tmp_path / "metrics.jsonl"
    emf = '{"_aws": {}, "service": "billing-test-fn", "N": [1.0]}\n'
    metrics.write_text(emf * 2 + "not json\n", encoding="utf-8")
    assert meter.by_function(metrics) == {
        "billing-test-fn": {"logger": 7, "emf": 2 * len(emf)},
        # A function whose logger was not found is reported as not counted, not as zero.
        "billing-test-silent": {"logger": None, "emf": 0},
        "(other)": {"logger": None, "emf": len("not json\n")},
    }
    assert meter.by_function()["billing-test-fn"] == {"logger": 7, "emf": 0}


def test_the_cost_bench_reads_what_each_wait_became_from_the_fetch_functions_metrics(tmp_path: Path) -> None:
    cost = benches.load("cost")
    lines = [
        {"service": "fetch", "RunWaitsSlept": [3.0], "RunSecondsSlept": [2.5], "RunsDone": [1.0]},
        {"service": "fetch", "RunsRescheduled": [2.0], "RunWaitsSlept": [1.0], "RunSecondsSlept": [0.5]},
        {"service": "dispatch", "RunsDone": [9.0]},  # not fetch's
    ]
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    decided = cost.fetch_decisions(metrics)
    assert decided == {
        "waits slept": 4.0,
        "seconds slept": 3.0,
        "runs rescheduled": 2.0,
        "runs at the deadline": 0.0,
        "runs done": 1.0,
    }
    note = cost.sleep_or_wake_note(decided)
    assert "4 waits slept" in note and "2 runs rescheduled" in note
