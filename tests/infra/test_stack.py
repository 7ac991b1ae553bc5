"""Assertions on the synthesized CloudFormation template of CrawlstackStack.

The stack is synthesized in-process from a tiny stand-in code directory, so
these tests need neither the vendored Lambda build nor Docker nor AWS.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Match, Template  # noqa: E402

from crawlstack import settings  # noqa: E402
from crawlstack.records import tables as schema  # noqa: E402
from infra.config import (  # noqa: E402
    CTX_ALARM_EMAIL,
    CTX_DELAY,
    CTX_FETCH_CONCURRENCY,
    CTX_LOG_RETENTION_DAYS,
    CTX_MAX_DEPTH,
    CTX_MEMORY_MB,
    CTX_PAGE_RETENTION_DAYS,
    CTX_RETAIN_DATA,
    CTX_USER_AGENT,
    CTX_WATCH_CHECKS_PER_DAY,
    ConfigError,
    LambdaAssets,
    StackConfig,
)
from infra.functions import BUCKET_ACCESS, SENDS, TABLE_ACCESS, TABLE_READS, TRIGGERS  # noqa: E402
from infra.stack import CrawlstackStack  # noqa: E402

CDK_JSON = json.loads((ROOT / "cdk.json").read_text())


def synth(assets: LambdaAssets, **context: Any) -> tuple[CrawlstackStack, Template]:
    app = cdk.App(context={**CDK_JSON["context"], **context})
    stack = CrawlstackStack(app, settings.STACK_NAME, assets=assets)
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="module")
def synthed(assets: LambdaAssets) -> tuple[CrawlstackStack, Template]:
    return synth(assets)


@pytest.fixture(scope="module")
def stack(synthed: tuple[CrawlstackStack, Template]) -> CrawlstackStack:
    return synthed[0]


@pytest.fixture(scope="module")
def template(synthed: tuple[CrawlstackStack, Template]) -> Template:
    return synthed[1]


@pytest.fixture(scope="module")
def resources(template: Template) -> dict[str, dict[str, Any]]:
    return template.to_json()["Resources"]


def of_type(resources: dict[str, dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in resources.items() if r["Type"] == kind}


def lid(stack: CrawlstackStack, construct: Any) -> str:
    """Logical ID of an L2 construct's main resource."""
    return stack.get_logical_id(construct.node.default_child)


def arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def function_ids(stack: CrawlstackStack) -> dict[str, str]:
    return {key: lid(stack, fn) for key, fn in stack.functions.functions.items()}


# --- functions ---------------------------------------------------------------


def test_arm64_python312_functions_allowing_recursive_loops(stack, resources):
    ids = function_ids(stack)
    assert set(ids) == set(settings.FUNCTIONS)
    layer_id = lid(stack, stack.functions.layer)
    for key, spec in settings.FUNCTIONS.items():
        props = resources[ids[key]]["Properties"]
        assert props["Handler"] == spec.handler
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["RecursiveLoop"] == "Allow"
        assert props["Timeout"] == spec.timeout_seconds
        assert props["MemorySize"] == spec.memory_mb
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        assert props["Layers"] == [{"Ref": layer_id}]
    # Anything else is CDK's own helper (the bucket notifications handler).
    others = set(of_type(resources, "AWS::Lambda::Function")) - set(ids.values())
    assert all("BucketNotificationsHandler" in other for other in others)


def test_layer_is_arm64_python312(resources):
    (layer,) = of_type(resources, "AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_log_groups_have_retention(stack, resources):
    for fn_id in function_ids(stack).values():
        log_ref = resources[fn_id]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[log_ref]["Type"] == "AWS::Logs::LogGroup"
        assert resources[log_ref]["Properties"]["RetentionInDays"] == 30


def test_environment_names_every_resource(stack, resources):
    for key, fn_id in function_ids(stack).items():
        env = resources[fn_id]["Properties"]["Environment"]["Variables"]
        for qkey, queue in stack.queues.queues.items():
            assert env[settings.ENV_QUEUE_URL[qkey]] == {"Ref": lid(stack, queue)}
        for tkey, table in stack.storage.tables.items():
            assert env[settings.ENV_TABLE[tkey]] == {"Ref": lid(stack, table)}
        assert env[settings.ENV_BUCKET] == {"Ref": lid(stack, stack.storage.bucket)}
        assert env[settings.ENV_EVENT_BUS] == {"Ref": lid(stack, stack.watch.bus)}
        assert env[settings.ENV_RULES_DIR] == "rules"
        assert env["POWERTOOLS_SERVICE_NAME"] == key
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "crawlstack"
        assert env[settings.ENV_DEFAULT_DELAY] == "5"
        assert env[settings.ENV_DEFAULT_MAX_DEPTH] == str(settings.DEFAULT_MAX_DEPTH)
        assert env[settings.ENV_USER_AGENT] == settings.DEFAULT_USER_AGENT
        # Private addresses stay blocked in the cloud.
        assert settings.ENV_ALLOW_PRIVATE not in env


# --- SQS -----------------------------------------------------------------------


def test_event_sources_report_batch_item_failures(stack, resources):
    mappings = of_type(resources, "AWS::Lambda::EventSourceMapping")
    assert len(mappings) == len(settings.QUEUES)
    ids = function_ids(stack)
    by_function = {m["Properties"]["FunctionName"]["Ref"]: m["Properties"] for m in mappings.values()}
    for fn_key, queue_key in TRIGGERS.items():
        props = by_function[ids[fn_key]]
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["EventSourceArn"] == arn(lid(stack, stack.queues[queue_key]))
        assert props["BatchSize"] == settings.QUEUES[queue_key].batch_size
        if fn_key == "fetch":
            assert props["ScalingConfig"] == {"MaximumConcurrency": 10}
        else:
            assert "ScalingConfig" not in props


def test_queues_have_dlq_and_visibility_timeout(stack, resources):
    for key, spec in settings.QUEUES.items():
        props = resources[lid(stack, stack.queues[key])]["Properties"]
        assert props["RedrivePolicy"] == {
            "deadLetterTargetArn": arn(lid(stack, stack.queues.dlqs[key])),
            "maxReceiveCount": spec.max_receive_count,
        }
        consumer_timeout = settings.FUNCTIONS[spec.consumer].timeout_seconds
        assert props["VisibilityTimeout"] >= 6 * consumer_timeout


def test_all_queues_encrypted_and_tls_only(resources):
    queues = of_type(resources, "AWS::SQS::Queue")
    assert len(queues) == 2 * len(settings.QUEUES)
    assert all(q["Properties"]["SqsManagedSseEnabled"] is True for q in queues.values())
    tls_only: set[str] = set()
    for policy in of_type(resources, "AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                tls_only.update(q["Ref"] for q in policy["Properties"]["Queues"])
    assert tls_only == set(queues)


# --- S3 ------------------------------------------------------------------------


def test_bucket_private_encrypted_tls_only_and_expiring(stack, template, resources):
    bucket_id = lid(stack, stack.storage.bucket)
    props = resources[bucket_id]["Properties"]
    assert "BucketName" not in props
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-pages"] == {
        "Id": "expire-pages",
        "Prefix": settings.PAGES_PREFIX,
        "ExpirationInDays": 30,
        "Status": "Enabled",
    }
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": bucket_id},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_new_warcs_are_announced_to_the_extract_queue(stack, template, resources):
    extract_queue = lid(stack, stack.queues["extract"])
    (notifications,) = of_type(resources, "Custom::S3BucketNotifications").values()
    props = notifications["Properties"]
    assert props["BucketName"] == {"Ref": lid(stack, stack.storage.bucket)}
    config = props["NotificationConfiguration"]
    assert set(config) == {"QueueConfigurations"}
    (queue_config,) = config["QueueConfigurations"]
    assert queue_config["Events"] == ["s3:ObjectCreated:*"]
    assert queue_config["QueueArn"] == arn(extract_queue)
    rules = {r["Name"]: r["Value"] for r in queue_config["Filter"]["Key"]["FilterRules"]}
    assert rules == {"prefix": settings.PAGES_PREFIX, "suffix": ".warc.gz"}
    # S3 may send to the extract queue.
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": extract_queue}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "s3.amazonaws.com"},
                                "Action": Match.array_with(["sqs:SendMessage"]),
                            }
                        )
                    ]
                )
            },
        },
    )


# --- DynamoDB --------------------------------------------------------------------


def test_tables_on_demand_with_pitr_and_key_schema(stack, resources):
    assert len(of_type(resources, "AWS::DynamoDB::Table")) == len(settings.TABLES)
    for key, spec in settings.TABLES.items():
        resource = resources[lid(stack, stack.storage.tables[key])]
        props = resource["Properties"]
        assert "TableName" not in props
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        expected_keys = [{"AttributeName": spec.partition_key, "KeyType": "HASH"}]
        if spec.sort_key:
            expected_keys.append({"AttributeName": spec.sort_key, "KeyType": "RANGE"})
        assert props["KeySchema"] == expected_keys
        assert all(a["AttributeType"] == "S" for a in props["AttributeDefinitions"])
        if spec.ttl_attribute:
            assert props["TimeToLiveSpecification"] == {"AttributeName": spec.ttl_attribute, "Enabled": True}
        else:
            assert "TimeToLiveSpecification" not in props
        assert resource["DeletionPolicy"] == "Retain"
    assert settings.TABLES["hosts"].ttl_attribute


def test_the_parked_table_keeps_the_construct_id_and_output_it_was_deployed_with(stack, template):
    # Named "frontier" in the code once: a new logical id would replace the table and lose its backlog.
    assert lid(stack, stack.storage.tables["parked"]).startswith("StorageFrontierTable")
    assert settings.OUTPUT_TABLE["parked"] == "FrontierTableName"
    assert "FrontierTableName" in template.to_json()["Outputs"]


def test_resolved_table(stack, resources):
    props = resources[lid(stack, stack.storage.tables["resolved"])]["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


# --- IAM -----------------------------------------------------------------------------


def statements(resources: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            found += props["PolicyDocument"]["Statement"]
        if resource["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                found += policy["PolicyDocument"]["Statement"]
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_wildcard_actions(resources):
    assert len(statements(resources)) >= len(settings.FUNCTIONS)  # every IAM policy of the template is walked
    for statement in statements(resources):
        if statement["Effect"] != "Allow":
            continue
        for action in as_list(statement["Action"]):
            # Not even a partial one (s3:GetObject*): each action is named.
            assert "*" not in action and "?" not in action, statement


def role_grants(stack: CrawlstackStack, resources: dict[str, dict[str, Any]], key: str) -> list[tuple[str, str]]:
    """(action, resource as JSON) pairs allowed to one function's role."""
    role_id = lid(stack, stack.functions.functions[key].role)
    pairs = []
    for policy in of_type(resources, "AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                for resource in as_list(statement["Resource"]):
                    pairs.append((action, json.dumps(resource, sort_keys=True)))
    return pairs


def test_least_privilege_per_function(stack, resources):
    bucket_arn = arn(lid(stack, stack.storage.bucket))
    table_arns = {t: json.dumps(arn(lid(stack, stack.storage.tables[t])), sort_keys=True) for t in settings.TABLES}

    def objects(prefix: str) -> str:
        return json.dumps({"Fn::Join": ["", [bucket_arn, f"/{prefix}*"]]}, sort_keys=True)

    for key in settings.FUNCTIONS:
        grants = role_grants(stack, resources, key)
        sent_to = {r for a, r in grants if a == "sqs:SendMessage"}
        assert sent_to == {json.dumps(arn(lid(stack, stack.queues[q])), sort_keys=True) for q in SENDS[key]}
        consumed = {r for a, r in grants if a == "sqs:DeleteMessage"}
        fed_by = [TRIGGERS[key]] if key in TRIGGERS else []  # schedule: by EventBridge Scheduler
        assert consumed == {json.dumps(arn(lid(stack, stack.queues[q])), sort_keys=True) for q in fed_by}
        written = {r for a, r in grants if a == "dynamodb:PutItem"}
        assert written == {
            json.dumps(arn(lid(stack, stack.storage.tables[t])), sort_keys=True) for t in TABLE_ACCESS[key]
        }
        reads, writes = BUCKET_ACCESS[key]
        assert {r for a, r in grants if a == "s3:PutObject"} == {objects(p) for p in writes}
        object_reads = {r for a, r in grants if a == "s3:GetObject" and "Fn::Join" in r}
        assert object_reads == {objects(p) for p in reads}
        read = {r for a, r in grants if a == "dynamodb:BatchGetItem"}
        assert read == {table_arns[t] for t in (*TABLE_ACCESS[key], *TABLE_READS[key])}
        write_actions = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
        for table in TABLE_READS[key]:
            assert not {a for a, r in grants if r == table_arns[table]} & write_actions, (key, table)
    # Extract merges into resolved records; dispatch and fetch only read them.
    assert "resolved" in TABLE_ACCESS["extract"]
    assert TABLE_READS["dispatch"] == TABLE_READS["fetch"] == ("resolved",)
    assert "resolved" not in TABLE_ACCESS["dispatch"] + TABLE_ACCESS["fetch"]
    assert BUCKET_ACCESS["fetch"][1] == (settings.PAGES_PREFIX, settings.CRAWL_LOG_PREFIX)
    # Extract writes a failed page's outcome to urls and its crawl-log line (crawlstack.extract.outcomes),
    # and an event too large for EventBridge under events/ (the watch's grants: test_watch.py).
    assert BUCKET_ACCESS["extract"] == (
        (settings.PAGES_PREFIX,),
        (settings.RECORDS_PREFIX, settings.CRAWL_LOG_PREFIX, settings.EVENTS_PREFIX),
    )
    assert "urls" in TABLE_ACCESS["extract"]


# --- outputs, context ---------------------------------------------------------------


def test_outputs_for_the_cli(template):
    outputs = template.to_json()["Outputs"]
    expected = {
        settings.OUTPUT_BUCKET,
        *settings.OUTPUT_QUEUE_URL.values(),
        *settings.OUTPUT_DLQ_URL.values(),
        *settings.OUTPUT_TABLE.values(),
        *settings.OUTPUT_FUNCTION.values(),
        settings.OUTPUT_EVENT_BUS,
        settings.OUTPUT_SCHEDULE,
    }
    assert expected <= set(outputs)
    assert {"FrontierQueueUrl", "BucketName", "ResultsTableName", "WatchTableName"} <= set(outputs)


def test_cdk_json_defaults_match_settings():
    context = CDK_JSON["context"]
    assert CDK_JSON["app"] == ".venv/bin/python app.py"
    assert context[CTX_DELAY] == settings.DEFAULT_DELAY_SECONDS
    assert context[CTX_USER_AGENT] == settings.DEFAULT_USER_AGENT
    assert context[CTX_MAX_DEPTH] == settings.DEFAULT_MAX_DEPTH
    assert context[CTX_FETCH_CONCURRENCY] == 10
    assert context[CTX_PAGE_RETENTION_DAYS] == 30
    assert context[CTX_LOG_RETENTION_DAYS] == 30
    assert context[CTX_WATCH_CHECKS_PER_DAY] == StackConfig().watch_checks_per_day == 0
    for key, spec in settings.FUNCTIONS.items():
        assert context[CTX_MEMORY_MB[key]] == spec.memory_mb


def test_context_overrides(assets):
    # Values given with `cdk -c key=value` arrive as strings.
    stack, template = synth(
        assets,
        **{
            CTX_DELAY: "1.5",
            CTX_MAX_DEPTH: "4",
            CTX_USER_AGENT: "examplebot/1.0",
            CTX_FETCH_CONCURRENCY: "3",
            CTX_PAGE_RETENTION_DAYS: "7",
            CTX_RETAIN_DATA: "false",
            CTX_WATCH_CHECKS_PER_DAY: "250",
        },
    )
    resources = template.to_json()["Resources"]
    env = resources[function_ids(stack)["fetch"]]["Properties"]["Environment"]["Variables"]
    assert env[settings.ENV_DEFAULT_DELAY] == "1.5"
    assert env[settings.ENV_DEFAULT_MAX_DEPTH] == "4"
    assert env[settings.ENV_USER_AGENT] == "examplebot/1.0"
    # The day's budget of checks goes to the schedule function alone.
    assert settings.ENV_WATCH_CHECKS_PER_DAY not in env
    schedule_env = resources[function_ids(stack)["schedule"]]["Properties"]["Environment"]["Variables"]
    assert schedule_env[settings.ENV_WATCH_CHECKS_PER_DAY] == "250"
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {"ScalingConfig": {"MaximumConcurrency": 3}})
    rules = resources[lid(stack, stack.storage.bucket)]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert {"Id": "expire-pages", "Prefix": "pages/", "ExpirationInDays": 7, "Status": "Enabled"} in rules
    for table in stack.storage.tables.values():
        assert resources[lid(stack, table)]["DeletionPolicy"] == "Delete"


@pytest.mark.parametrize(
    "context",
    [
        {CTX_FETCH_CONCURRENCY: 1},
        {CTX_FETCH_CONCURRENCY: "many"},
        {CTX_DELAY: -1},
        {CTX_DELAY: settings.MAX_CRAWL_DELAY_SECONDS + 1},
        {CTX_PAGE_RETENTION_DAYS: 0},
        {CTX_RETAIN_DATA: "maybe"},
        {CTX_USER_AGENT: "   "},
        {CTX_WATCH_CHECKS_PER_DAY: -1},
        {CTX_WATCH_CHECKS_PER_DAY: "1.5"},
        {CTX_WATCH_CHECKS_PER_DAY: "lots"},
    ],
)
def test_invalid_context_is_rejected(context):
    app = cdk.App(context=context)
    with pytest.raises(ConfigError):
        StackConfig.from_context(app.node)


def test_a_crawl_setting_the_stack_defaults_reaches_every_functions_environment(assets, throwaway_setting):
    # A setting registered at run time (tests/conftest.py): its context key, checked as its flag, to its variable.
    assert StackConfig().crawl_defaults[throwaway_setting.name] == 7
    stack, template = synth(assets, **{throwaway_setting.context_key: "12"})
    resources = template.to_json()["Resources"]
    for fn_id in function_ids(stack).values():
        assert resources[fn_id]["Properties"]["Environment"]["Variables"]["CRAWLSTACK_THROWAWAY_BUDGET"] == "12"
    with pytest.raises(ConfigError, match="must be at most 99"):
        StackConfig.from_context(cdk.App(context={throwaway_setting.context_key: "100"}).node)


def test_missing_build_output_is_explained(tmp_path):
    with pytest.raises(ConfigError, match="make build-lambda"):
        LambdaAssets.from_build_dir(tmp_path)


# --- context: memory and log retention ------------------------------------------


def test_memory_and_log_retention_from_context(assets):
    stack, template = synth(
        assets, **{CTX_MEMORY_MB["fetch"]: "256", CTX_MEMORY_MB["extract"]: 2048, CTX_LOG_RETENTION_DAYS: "7"}
    )
    resources = template.to_json()["Resources"]
    ids = function_ids(stack)
    assert resources[ids["fetch"]]["Properties"]["MemorySize"] == 256
    assert resources[ids["extract"]]["Properties"]["MemorySize"] == 2048
    assert resources[ids["dispatch"]]["Properties"]["MemorySize"] == settings.FUNCTIONS["dispatch"].memory_mb
    for fn_id in ids.values():
        log_ref = resources[fn_id]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[log_ref]["Properties"]["RetentionInDays"] == 7


@pytest.mark.parametrize(
    "context",
    [
        {CTX_LOG_RETENTION_DAYS: 8},
        {CTX_LOG_RETENTION_DAYS: "x"},
        {CTX_MEMORY_MB["fetch"]: 64},
        {"crawlstack:extract_memory_mb": 20000},
    ],
)
def test_invalid_memory_or_retention_is_rejected(context):
    with pytest.raises(ConfigError):
        StackConfig.from_context(cdk.App(context=context).node)


# --- CloudWatch -------------------------------------------------------------------


def test_alarms_on_every_dlq_and_function(stack, resources):
    from infra.monitoring import ERRORS_PERIOD, NO_THROTTLES_ALARM

    # The watch's alarm on its own metric is tested in test_watch.py.
    alarms = [a for a in of_type(resources, "AWS::CloudWatch::Alarm").values() if a["Properties"].get("Namespace")]
    dlq_alarms = {
        a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for a in alarms
        if a["Properties"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    }
    assert dlq_alarms == {lid(stack, q) for q in stack.queues.dlqs.values()}
    for name in ("Errors", "Throttles"):
        watched = {
            a["Properties"]["Dimensions"][0]["Value"]["Ref"]
            for a in alarms
            if a["Properties"]["MetricName"] == name and a["Properties"]["Namespace"] == "AWS/Lambda"
        }
        alarmed = set(settings.FUNCTIONS) - (NO_THROTTLES_ALARM if name == "Throttles" else set())
        assert watched == {function_ids(stack)[key] for key in alarmed}
    assert {"schedule"} == NO_THROTTLES_ALARM  # its ticks are throttled by design (reserved concurrency 1)
    periods = {
        a["Properties"]["Dimensions"][0]["Value"]["Ref"]: a["Properties"]["Period"]
        for a in alarms
        if a["Properties"]["MetricName"] == "Errors"
    }
    for key, fn_id in function_ids(stack).items():
        assert periods[fn_id] == (ERRORS_PERIOD[key].to_seconds() if key in ERRORS_PERIOD else 60)
    topic = {"Ref": stack.get_logical_id(stack.monitoring.topic.node.default_child)}
    for a in alarms:
        assert a["Properties"]["Threshold"] == 0
        assert a["Properties"]["ComparisonOperator"] == "GreaterThanThreshold"
        assert a["Properties"]["AlarmActions"] == [topic]
    # No address unless one is given in context.
    assert of_type(resources, "AWS::SNS::Subscription") == {}


def test_alarm_email_from_context(assets):
    _, template = synth(assets, **{CTX_ALARM_EMAIL: "ops@example.com"})
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"})
    with pytest.raises(ConfigError):
        StackConfig.from_context(cdk.App(context={CTX_ALARM_EMAIL: "not an address"}).node)


def test_dashboard_shows_queues_pipeline_metrics_and_errors(template):
    (dashboard,) = of_type(template.to_json()["Resources"], "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "PagesFetched",
        "FetchFailures",
        "RecordsExtracted",
        "Errors",
        "Throttles",
    ):
        assert metric in body, metric
    assert f'\\"{settings.METRICS_NAMESPACE}\\"' in body
    from crawlstack.lambdas.observability import for_service
    from infra.monitoring import PIPELINE_METRICS

    # Each metric is emitted by its service's handler (its entry point and the body it calls), whose
    # metrics (crawlstack.lambdas.observability) carry the service dimension and the namespace the dashboard reads.
    for service, name, _ in PIPELINE_METRICS:
        handler = (ROOT / "functions" / service / "handler.py").read_text()
        handler += (ROOT / "crawlstack" / "lambdas" / f"{service}.py").read_text()
        assert f'"{name}"' in handler and f'for_service("{service}")' in handler, name
        metrics = for_service(service).metrics
        assert metrics.namespace == settings.METRICS_NAMESPACE and metrics.service == service, name


# --- Athena ------------------------------------------------------------------------


def test_glue_tables_project_partitions_from_the_key_layout(stack, resources):
    from crawlstack.extract import records_key
    from crawlstack.fetch.crawllog import partition_path

    bucket_ref = {"Ref": lid(stack, stack.storage.bucket)}
    (database,) = of_type(resources, "AWS::Glue::Database").values()
    assert database["Properties"]["DatabaseInput"]["Name"] == stack.analytics.database_name
    tables = {
        t["Properties"]["TableInput"]["Name"]: t["Properties"] for t in of_type(resources, "AWS::Glue::Table").values()
    }
    assert set(tables) == {settings.QUERY_TABLES["records"], settings.QUERY_TABLES["crawl_log"]}
    # The keys the pipeline writes, in the layout the tables project.
    written = {
        settings.QUERY_TABLES["records"]: records_key("pages/dt=2024-05-06/abc.warc.gz", "c1"),
        settings.QUERY_TABLES["crawl_log"]: partition_path(settings.CRAWL_LOG_PREFIX, "c1", 1714953600.0)
        + "x.jsonl.gz",
    }
    for name, props in tables.items():
        assert props["DatabaseName"] == {"Ref": stack.get_logical_id(stack.analytics.database)}
        table = props["TableInput"]
        params = table["Parameters"]
        assert params["projection.enabled"] == "true"
        assert params["projection.crawl_id.type"] == "injected"
        assert params["projection.dt.type"] == "date" and params["projection.dt.format"] == "yyyy-MM-dd"
        template = params["storage.location.template"]["Fn::Join"][1]
        assert template[0] == "s3://" and template[1] == bucket_ref
        path = template[2].lstrip("/")  # e.g. records/crawl_id=${crawl_id}/dt=${dt}/
        expected = path.replace("${crawl_id}", "c1").replace("${dt}", "2024-05-06")
        assert written[name].startswith(expected), (name, written[name], expected)
        assert [k["Name"] for k in table["PartitionKeys"]] == ["crawl_id", "dt"]
        columns = {c["Name"] for c in table["StorageDescriptor"]["Columns"]}
        assert "crawl_id" not in columns and {"url", "fetched_at"} <= columns
        assert table["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"] == "org.openx.data.jsonserde.JsonSerDe"
    log_columns = {c["Name"] for c in tables["crawl_log"]["TableInput"]["StorageDescriptor"]["Columns"]}
    assert {"outcome", "reason", "status", "depth", "host"} <= log_columns


def test_glue_tables_have_the_one_schema_query_local_uses_too(resources):
    """The columns and types of crawlstack.records.tables, which local mode's DuckDB views also take."""
    glue_tables = {t["Properties"]["TableInput"]["Name"]: t for t in of_type(resources, "AWS::Glue::Table").values()}
    for name, columns in schema.COLUMNS.items():
        table = glue_tables[name]["Properties"]["TableInput"]
        declared = [(c["Name"], c["Type"]) for c in table["StorageDescriptor"]["Columns"]]
        assert declared == [(c.name, c.type) for c in columns]
    assert dict(declared)["started_at"] == "string"
    records = dict(
        (c["Name"], c["Type"])
        for c in glue_tables["records"]["Properties"]["TableInput"]["StorageDescriptor"]["Columns"]
    )
    assert records["fields"] == "map<string,string>" and records["numbers"] == "map<string,double>"


def test_athena_workgroup_enforces_its_own_result_location(stack, resources):
    (workgroup,) = of_type(resources, "AWS::Athena::WorkGroup").values()
    config = workgroup["Properties"]["WorkGroupConfiguration"]
    assert config["EnforceWorkGroupConfiguration"] is True
    assert config["BytesScannedCutoffPerQuery"] > 0
    location = config["ResultConfiguration"]["OutputLocation"]["Fn::Join"][1]
    assert location[1] == {"Ref": lid(stack, stack.storage.bucket)}
    assert location[2] == "/" + settings.ATHENA_RESULTS_PREFIX
    assert config["ResultConfiguration"]["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}
    rules = resources[lid(stack, stack.storage.bucket)]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert any(r.get("Prefix") == settings.ATHENA_RESULTS_PREFIX and r.get("ExpirationInDays") for r in rules)


def test_named_queries(stack, resources):
    queries = {q["Properties"]["Name"]: q["Properties"] for q in of_type(resources, "AWS::Athena::NamedQuery").values()}
    assert set(queries) == {"records-by-mapping", "fetch-outcomes-by-host-and-status", "top-failing-hosts"}
    workgroup_id = stack.get_logical_id(stack.analytics.workgroup)
    for q in queries.values():
        assert q["WorkGroup"] == {"Ref": workgroup_id}
        # Partition projection injects crawl_id: a query without it would fail.
        assert "WHERE crawl_id = " in q["QueryString"]
    assert "GROUP BY mapping" in queries["records-by-mapping"]["QueryString"]
    assert "GROUP BY host, outcome, status" in queries["fetch-outcomes-by-host-and-status"]["QueryString"]


def test_athena_outputs_for_the_cli(template):
    outputs = template.to_json()["Outputs"]
    expected = {
        settings.OUTPUT_WORKGROUP,
        settings.OUTPUT_GLUE_DATABASE,
        settings.OUTPUT_DASHBOARD,
        settings.OUTPUT_ALARM_TOPIC,
    }
    assert expected <= set(outputs)
