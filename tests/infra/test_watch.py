"""Watching sources, deployed (infra.watch): the schedule, the items bus, the watch's grants, alarms and widgets.

Synthesized in-process like test_stack.py, whose helpers it shares.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_stack import ROOT, arn, function_ids, lid, of_type, role_grants, synth

from crawlstack import settings
from infra.config import LambdaAssets
from infra.functions import BUCKET_ACCESS, SENDS, TABLE_ACCESS, TABLE_READS, TRIGGERS
from infra.monitoring import (
    CHECKS_TITLE,
    NEW_ITEMS_TITLE,
    NOT_MODIFIED_TITLE,
    WATCH_ALARM_PERIOD,
    WATCH_METRICS,
)
from infra.stack import CrawlstackStack
from infra.watch import MAX_EVENT_AGE, rate_expression


@pytest.fixture(scope="module")
def synthed(assets: LambdaAssets) -> tuple[CrawlstackStack, dict[str, Any]]:
    stack, template = synth(assets)
    return stack, template.to_json()


@pytest.fixture(scope="module")
def stack(synthed: tuple[CrawlstackStack, dict[str, Any]]) -> CrawlstackStack:
    return synthed[0]


@pytest.fixture(scope="module")
def resources(synthed: tuple[CrawlstackStack, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return synthed[1]["Resources"]


def key_of(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def objects(stack: CrawlstackStack, prefix: str) -> str:
    return key_of({"Fn::Join": ["", [arn(lid(stack, stack.storage.bucket)), f"/{prefix}*"]]})


# --- the schedule ----------------------------------------------------------------------------


def test_schedule_invokes_the_schedule_function_each_minute_without_retries(stack, resources):
    (schedule,) = of_type(resources, "AWS::Scheduler::Schedule").values()
    props = schedule["Properties"]
    assert props["ScheduleExpression"] == rate_expression(settings.SCHEDULE_RATE_MINUTES) == "rate(1 minute)"
    assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert props["State"] == "ENABLED"
    target = props["Target"]
    assert target["Arn"] == arn(function_ids(stack)["schedule"])
    assert target["RoleArn"] == arn(lid(stack, stack.watch.role))
    # The next tick does a missed one's work: a retry would only overlap it.
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}
    assert set(target) == {"Arn", "RoleArn", "RetryPolicy"}


def test_rate_expression_names_its_unit_in_the_right_number():
    assert rate_expression(1) == "rate(1 minute)"
    assert rate_expression(5) == "rate(5 minutes)"


def test_schedule_name_is_an_output_for_status(stack, synthed, resources):
    (schedule_id,) = of_type(resources, "AWS::Scheduler::Schedule")
    assert synthed[1]["Outputs"][settings.OUTPUT_SCHEDULE]["Value"] == {"Ref": schedule_id}


def test_scheduler_role_may_only_invoke_the_schedule_function(stack, resources):
    role_id = lid(stack, stack.watch.role)
    props = resources[role_id]["Properties"]
    (trust,) = props["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert "ManagedPolicyArns" not in props
    statements = [s for policy in props["Policies"] for s in policy["PolicyDocument"]["Statement"]]
    # Exactly the function: not its versions or aliases (function:*), nor any other function.
    assert statements == [
        {"Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": arn(function_ids(stack)["schedule"])}
    ]
    attached = [
        p for p in of_type(resources, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert attached == []


def test_schedule_function_has_no_event_source_and_runs_one_at_a_time(stack, resources):
    ids = function_ids(stack)
    assert "schedule" not in TRIGGERS
    fed = {
        m["Properties"]["FunctionName"]["Ref"] for m in of_type(resources, "AWS::Lambda::EventSourceMapping").values()
    }
    assert fed == {ids[key] for key in TRIGGERS}
    assert ids["schedule"] not in fed
    for key, fn_id in ids.items():
        reserved = resources[fn_id]["Properties"].get("ReservedConcurrentExecutions")
        assert reserved == (1 if key == "schedule" else None), key
    # Scheduler invokes asynchronously: a throttled tick is dropped, not retried for hours.
    (invoke_config,) = of_type(resources, "AWS::Lambda::EventInvokeConfig").values()
    assert invoke_config["Properties"]["FunctionName"] == {"Ref": ids["schedule"]}
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == 0
    assert invoke_config["Properties"]["MaximumEventAgeInSeconds"] == MAX_EVENT_AGE.to_seconds() == 60
    # Scheduler invokes with its role, so no resource policy opens the function.
    permissions = of_type(resources, "AWS::Lambda::Permission").values()
    assert not [
        p for p in permissions if p["Properties"]["FunctionName"] in (arn(ids["schedule"]), {"Ref": ids["schedule"]})
    ]


# --- the items bus ------------------------------------------------------------------------------


def test_event_bus_and_its_output(stack, synthed, resources):
    (bus_id,) = of_type(resources, "AWS::Events::EventBus")
    assert bus_id == lid(stack, stack.watch.bus)
    assert synthed[1]["Outputs"][settings.OUTPUT_EVENT_BUS]["Value"] == {"Ref": bus_id}
    # No resource policy: only this account's principals with PutEvents (extract) may publish.
    assert of_type(resources, "AWS::Events::EventBusPolicy") == {}


def test_only_extract_may_put_events_and_only_on_the_bus(stack, resources):
    bus_arn = key_of(arn(lid(stack, stack.watch.bus)))
    for key in settings.FUNCTIONS:
        grants = role_grants(stack, resources, key)
        events = {(a, r) for a, r in grants if a.startswith("events:")}
        assert events == ({("events:PutEvents", bus_arn)} if key == "extract" else set()), key
        assert not {a for a, r in grants if r == bus_arn} - {"events:PutEvents"}, key
    # An event too large for EventBridge goes to the bucket whole, under events/.
    assert settings.EVENTS_PREFIX in BUCKET_ACCESS["extract"][1]
    assert objects(stack, settings.EVENTS_PREFIX) in {
        r for a, r in role_grants(stack, resources, "extract") if a == "s3:PutObject"
    }


# --- the watch table and the schedule function's grants ------------------------------------------


def test_watch_table_keys_and_ttl(stack, resources):
    spec = settings.TABLES["watch"]
    props = resources[lid(stack, stack.storage.tables["watch"])]["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert (spec.partition_key, spec.sort_key) == ("pk", "sk")
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"


def test_only_schedule_and_extract_touch_the_watch_table(stack, resources):
    watch_arn = key_of(arn(lid(stack, stack.storage.tables["watch"])))
    for key in settings.FUNCTIONS:
        actions = {a for a, r in role_grants(stack, resources, key) if r == watch_arn}
        if key in ("schedule", "extract"):
            assert {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"} <= actions
        else:
            assert actions == set(), key
    assert "watch" not in TABLE_READS["dispatch"] + TABLE_READS["fetch"]


def test_schedule_function_least_privilege(stack, resources):
    assert SENDS["schedule"] == ("frontier",)
    assert set(TABLE_ACCESS["schedule"]) == {"watch", "crawls"} and TABLE_READS["schedule"] == ()
    assert BUCKET_ACCESS["schedule"] == ((settings.WATCH_PLANS_PREFIX,), (settings.WATCH_PLANS_PREFIX,))
    grants = role_grants(stack, resources, "schedule")
    sqs = {r for a, r in grants if a.startswith("sqs:")}
    assert sqs == {key_of(arn(lid(stack, stack.queues["frontier"])))}
    assert "sqs:ReceiveMessage" not in {a for a, _ in grants}
    tables = {r for a, r in grants if a.startswith("dynamodb:")}
    assert tables == {key_of(arn(lid(stack, stack.storage.tables[t]))) for t in ("watch", "crawls")}
    s3 = {(a, r) for a, r in grants if a.startswith("s3:")}
    plans = objects(stack, settings.WATCH_PLANS_PREFIX)
    assert s3 == {("s3:GetObject", plans), ("s3:PutObject", plans)}
    # Nothing else but X-Ray (whose actions take no resource); logs come from the managed basic role.
    assert {a.split(":")[0] for a, _ in grants} == {"sqs", "dynamodb", "s3", "xray"}
    assert {r for a, r in grants if a.startswith("xray:")} == {key_of("*")}


# --- monitoring --------------------------------------------------------------------------------


def alarms(resources: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [a["Properties"] for a in of_type(resources, "AWS::CloudWatch::Alarm").values()]


def test_schedule_errors_alarm_sums_five_minutes(stack, resources):
    topic = {"Ref": stack.get_logical_id(stack.monitoring.topic.node.default_child)}
    (errors,) = [
        a
        for a in alarms(resources)
        if a.get("MetricName") == "Errors" and a["Dimensions"][0]["Value"] == {"Ref": function_ids(stack)["schedule"]}
    ]
    assert errors["Namespace"] == "AWS/Lambda" and errors["Statistic"] == "Sum"
    assert errors["Period"] == WATCH_ALARM_PERIOD.to_seconds() == 300
    # One error or more (a count above 0).
    assert (errors["ComparisonOperator"], errors["Threshold"]) == ("GreaterThanThreshold", 0)
    assert errors["EvaluationPeriods"] == 1 and errors["AlarmActions"] == [topic]


def test_due_checks_alarm_breaches_on_a_late_check_or_no_data(stack, resources):
    topic = {"Ref": stack.get_logical_id(stack.monitoring.topic.node.default_child)}
    (due,) = [a for a in alarms(resources) if "Metrics" in a]
    (query,) = due["Metrics"]
    assert query["MetricStat"] == {
        "Metric": {
            "Namespace": settings.METRICS_NAMESPACE,
            "MetricName": "OldestDueCheckAgeSeconds",
            "Dimensions": [{"Name": "service", "Value": "schedule"}],
        },
        "Period": 300,
        "Stat": "Maximum",
    }
    assert due["Threshold"] == settings.WATCH_DUE_ALARM_SECONDS == 900
    assert due["ComparisonOperator"] == "GreaterThanThreshold"
    assert due["EvaluationPeriods"] == 1
    # No data means the scheduler is not running.
    assert due["TreatMissingData"] == "breaching"
    assert due["AlarmActions"] == [topic]


def dashboard_widgets(resources: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The dashboard's widgets by title, its body's tokens (region, names) replaced by a placeholder."""
    (dashboard,) = of_type(resources, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    return {
        w["properties"]["title"]: w["properties"] for w in json.loads(text)["widgets"] if "title" in w["properties"]
    }


def emf(widget: dict[str, Any], service: str, name: str) -> dict[str, Any]:
    """The options (label, period, stat) of one EMF metric of the widget."""
    (options,) = [m[4] for m in widget["metrics"] if m[:4] == [settings.METRICS_NAMESPACE, name, "service", service]]
    return options


def test_dashboard_shows_checks_new_items_and_the_share_of_304s(resources):
    widgets = dashboard_widgets(resources)
    checks = widgets[CHECKS_TITLE]
    sent = emf(checks, "schedule", "ChecksSent")
    assert (sent["period"], sent["stat"]) == (60, "Sum")
    assert emf(checks, "schedule", "OldestDueCheckAgeSeconds")["stat"] == "Maximum"
    new_items = widgets[NEW_ITEMS_TITLE]
    new = emf(new_items, "extract", "NewItems")
    assert (new["period"], new["stat"]) == (60, "Sum")
    assert {"EventsPublished", "EventsOversize"} <= {m[1] for m in new_items["metrics"]}
    share = widgets[NOT_MODIFIED_TITLE]
    (expression,) = [m[0] for m in share["metrics"] if "expression" in m[0]]
    assert expression["expression"] == "100 * notmod / pages"
    # Sums over five minutes (the widget's period; its metrics state no other).
    assert share["period"] == 300
    assert emf(share, "extract", "CheckPagesNotModified") == {
        "label": "checked pages not modified (304)",
        "id": "notmod",
        "visible": False,
        "stat": "Sum",
    }
    assert emf(share, "extract", "CheckPages")["id"] == "pages"
    assert emf(share, "extract", "CheckPages")["stat"] == "Sum"
    # The per-function panels take the schedule function in too.
    errors = widgets["Function errors and throttles"]
    assert any(m[-1].get("label") == "schedule errors" for m in errors["metrics"])
    assert any(m[-1].get("label") == "schedule" for m in widgets["Duration p95 (ms)"]["metrics"])


def test_every_watch_metric_is_emitted_by_code_its_handler_ships():
    """Each watch metric's name is in a module its service's handler ships (scripts/build_lambda.py's closure),
    and the handler's metrics carry that service's dimension (crawlstack.lambdas.observability.for_service)."""
    spec = importlib.util.spec_from_file_location("build_lambda_for_watch", ROOT / "scripts" / "build_lambda.py")
    assert spec and spec.loader
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    for service, name, _ in WATCH_METRICS:
        handler = settings.FUNCTIONS[service].handler.rsplit(".", 1)[0].replace("/", ".")
        assert f'for_service("{service}")' in build.module_file(handler).read_text(), handler
        sources = [build.module_file(m) for m in build.code_closure([handler])]
        assert any(re.search(rf"[\"']{name}[\"']", Path(s).read_text()) for s in sources if s), (service, name)
