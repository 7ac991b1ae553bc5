"""The CLI for a deployed stack, against a moto server holding the stack's resources.

The resources come from ``crawlstack.local.resources.create_all`` (the same
settings the CDK constructs are built from) and a CloudFormation stack whose
outputs name them, as the deployed stack's do; the CLI finds everything
through ``--stack`` and ``--endpoint-url`` only.

What moto cannot check: Athena runs no SQL (it answers every query with the
result set the test gives it, or none), so the Athena test covers the
calls, the polling and the printing, not the SQL or the Glue tables.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer
from webs import Crawl, host_pattern, mapping, star_site, write_rules

from crawlstack import aws, settings
from crawlstack.cli import main
from crawlstack.config import CrawlConfig
from crawlstack.demo.server import LoopbackWeb
from crawlstack.local import resources
from crawlstack.local.pump import LambdaContext
from functions import container
from functions.schedule import handler as schedule

STACK = "CrawlstackTest"
WORKGROUP = "crawlstack-wg"
DATABASE = "crawlstack_db"
SCHEDULE = "crawlstack-tick"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployed:
    endpoint: str
    names: dict[str, str]

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1")

    def queue(self, key: str) -> str:
        return self.names[settings.ENV_QUEUE_URL[key]]

    def dlq(self, key: str) -> str:
        return self.names[f"CRAWLSTACK_{key.upper()}_DLQ_URL"]

    def table(self, key: str) -> str:
        return self.names[settings.ENV_TABLE[key]]

    def receive_all(self, url: str) -> list[dict[str, Any]]:
        sqs, out = self.client("sqs"), []
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300).get("Messages", [])
            if not got:
                return out
            out += got


def _outputs(names: dict[str, str]) -> dict[str, str]:
    outputs = {settings.OUTPUT_BUCKET: names[settings.ENV_BUCKET]}
    for key in settings.QUEUES:
        outputs[settings.OUTPUT_QUEUE_URL[key]] = names[settings.ENV_QUEUE_URL[key]]
        outputs[settings.OUTPUT_DLQ_URL[key]] = names[f"CRAWLSTACK_{key.upper()}_DLQ_URL"]
    for key in settings.TABLES:
        outputs[settings.OUTPUT_TABLE[key]] = names[settings.ENV_TABLE[key]]
    outputs[settings.OUTPUT_WORKGROUP] = WORKGROUP
    outputs[settings.OUTPUT_SCHEDULE] = SCHEDULE
    outputs[settings.OUTPUT_GLUE_DATABASE] = DATABASE
    return outputs


def _create_stack(cfn: Any, name: str, outputs: dict[str, str]) -> None:
    # moto's CloudFormation keeps a template's literal outputs; the one
    # resource is there because a template needs one (moto warns it cannot build it).
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    with pytest.warns(UserWarning, match="WaitConditionHandle"):
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    # The server's request log would land in the CLI's captured stderr.
    monkeypatch.setattr(logging.getLogger("werkzeug"), "disabled", True)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    # A threaded moto server keeps its state in the process's backends: start empty.
    requests.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        aws.reset_clients()
        names = resources.create_all()
        aws.reset_clients()
        for key in settings.QUEUES:  # S3 announced its bucket notification with a test event
            boto3.client("sqs", endpoint_url=endpoint).purge_queue(QueueUrl=names[settings.ENV_QUEUE_URL[key]])
        # The CLI must find the endpoint through --endpoint-url alone.
        monkeypatch.delenv("AWS_ENDPOINT_URL")
        stack = Deployed(endpoint, names)
        stack.client("athena").create_work_group(
            Name=WORKGROUP, Configuration={"ResultConfiguration": {"OutputLocation": "s3://results/athena/"}}
        )
        stack.client("scheduler").create_schedule(
            Name=SCHEDULE,
            ScheduleExpression=f"rate({settings.SCHEDULE_RATE_MINUTES} minute)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={
                "Arn": "arn:aws:lambda:us-east-1:123456789012:function:crawlstack-schedule",
                "RoleArn": "arn:aws:iam::123456789012:role/crawlstack-scheduler",
            },
        )
        _create_stack(stack.client("cloudformation"), STACK, _outputs(names))
        yield stack
    finally:
        aws.reset_clients()
        # Leave the process's moto backends empty for later tests (test_endpoint's server shares them).
        requests.post(f"{endpoint}/moto-api/reset", timeout=10)
        server.stop()


def run(capsys: pytest.CaptureFixture[str], deployed: Deployed, *argv: str, stack: str = STACK) -> tuple[int, str, str]:
    code = main([*argv, "--stack", stack, "--endpoint-url", deployed.endpoint])
    out, err = capsys.readouterr()
    return code, out, err


# --- stack discovery ------------------------------------------------------------------


def test_no_such_stack_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    code, out, err = run(capsys, deployed, "status", stack="Nope")
    assert code == 2
    assert err.strip() == (
        "crawlstack: error: no stack named 'Nope' in this account and region (deploy it, or pass --stack NAME)"
    )
    assert "Traceback" not in out + err


def test_a_missing_output_is_named(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    outputs = _outputs(deployed.names)
    del outputs[settings.OUTPUT_WORKGROUP]
    _create_stack(deployed.client("cloudformation"), "Older", outputs)
    code, _, err = run(capsys, deployed, "query", "SELECT 1", stack="Older")
    assert code == 2
    assert err.count("\n") == 1
    assert f"stack 'Older' has no output '{settings.OUTPUT_WORKGROUP}'" in err


def test_an_unreachable_endpoint_is_one_line_and_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code = main(["status", "--endpoint-url", f"http://127.0.0.1:{_free_port()}", "--region", "us-east-1"])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("crawlstack: error: stack Crawlstack: ")


def test_no_credentials_is_a_usage_error(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code = main(["status", "--endpoint-url", f"http://127.0.0.1:{_free_port()}", "--region", "us-east-1"])
    assert (code, capsys.readouterr().err) == (
        2,
        "crawlstack: error: no AWS credentials: configure them as for the aws CLI\n",
    )


# --- seed ---------------------------------------------------------------------------------


def test_seed_sends_frontier_messages_in_batches(
    capsys: pytest.CaptureFixture[str], deployed: Deployed, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds.jsonl"
    lines = [{"url": f"https://example.com/{i}", "record_id": f"r{i}", "want": ["title"]} for i in range(11)]
    seeds.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = run(capsys, deployed, "seed", "https://a.example/", "--seeds-file", str(seeds), "--crawl-id", "c1")
    assert (code, err) == (0, "")
    assert out == "seeded 12 of 12 URLs into c1\n"
    bodies = [json.loads(m["Body"]) for m in deployed.receive_all(deployed.queue("frontier"))]
    assert len(bodies) == 12
    assert {"url": "https://a.example/", "depth": 0, "crawl_id": "c1"} in bodies
    assert {
        "url": "https://example.com/3",
        "depth": 0,
        "crawl_id": "c1",
        "record_id": "r3",
        "want": ["title"],
    } in bodies


def test_seed_without_crawl_id_joins_the_stacks_default_crawl(
    capsys: pytest.CaptureFixture[str], deployed: Deployed
) -> None:
    code, out, _ = run(capsys, deployed, "seed", "https://a.example/")
    assert code == 0 and "the stack's default crawl" in out
    (message,) = deployed.receive_all(deployed.queue("frontier"))
    assert json.loads(message["Body"]) == {"url": "https://a.example/", "depth": 0}


def test_seed_checks_every_seed_before_sending_any(
    capsys: pytest.CaptureFixture[str], deployed: Deployed, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"url": "https://ok.example/"}\n{"url": "https://ok.example/", "wnat": ["x"]}\n')
    code, _, err = run(capsys, deployed, "seed", "https://a.example/", "--seeds-file", str(seeds))
    assert code == 2
    assert err == f"crawlstack: error: {seeds}:2: unknown key 'wnat' (allowed: record_id, url, want)\n"
    code, _, err = run(capsys, deployed, "seed", "ftp://nope")
    assert code == 2 and err.startswith("crawlstack: error: seed: invalid URL 'ftp://nope'")
    assert deployed.receive_all(deployed.queue("frontier")) == []


def test_seed_creates_a_new_crawls_config_once(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    argv = ["seed", "https://a.example/", "--crawl-id", "jobs", "--max-pages", "50", "--delay", "2.5"]
    traps = ["--max-pages-per-host", "40", "--allow-port", "8081", "--allow-port", "8081", "--allow-port", "9000"]
    code, _, err = run(
        capsys, deployed, *argv, "--deny", "/private/", "--rules-set", "book", "--max-depth", "1", *traps
    )
    assert (code, err) == (0, "")
    item = deployed.client("dynamodb").get_item(
        TableName=deployed.names[settings.ENV_TABLE["crawls"]], Key={"crawl_id": {"S": "jobs"}}
    )["Item"]
    config = CrawlConfig.from_item(aws.unmarshal(item), CrawlConfig())
    assert (config.max_pages, config.delay, config.max_depth) == (50, 2.5, 1)
    assert (config.deny, config.rules, config.state) == (("/private/",), ("book",), "running")
    assert (config.max_pages_per_host, config.allow_ports) == (40, (8081, 9000))
    assert config.user_agent == CrawlConfig().user_agent  # not given: the defaults apply
    # A crawl's config is fixed once stored; seeding it again without settings is fine.
    code, _, err = run(capsys, deployed, "seed", "https://b.example/", "--crawl-id", "jobs", "--max-pages", "9")
    assert code == 2 and err.count("\n") == 1 and "already exists" in err
    assert run(capsys, deployed, "seed", "https://b.example/", "--crawl-id", "jobs")[0] == 0
    code, _, err = run(capsys, deployed, "seed", "https://b.example/", "--max-pages", "9")
    assert code == 2 and "need --crawl-id" in err


def test_seed_reports_what_sqs_refused() -> None:
    # moto accepts every body, so a stand-in client refuses one entry, as SQS does per entry.
    from crawlstack.aws import Connection, Queue

    class RefusingSqs:
        def __init__(self) -> None:
            self.batches: list[int] = []

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.batches.append(len(Entries))
            return {"Failed": [{"Id": "1", "Code": "InvalidMessageContents", "SenderFault": True}]}

    fake = RefusingSqs()
    connection = Connection("us-east-1")
    connection._clients["sqs"] = fake
    failed = Queue("https://q", "frontier", connection=connection).try_send([f"body{i}" for i in range(23)])
    assert fake.batches == [10, 10, 3]
    assert failed == [(f"body{i}", "InvalidMessageContents") for i in (1, 11, 21)]


# --- status -------------------------------------------------------------------------------


def _put_urls(deployed: Deployed, crawl_id: str, states: dict[str, int]) -> None:
    ddb = deployed.client("dynamodb")
    n = 0
    for state, count in states.items():
        for _ in range(count):
            n += 1
            ddb.put_item(
                TableName=deployed.table("urls"),
                Item={
                    "pk": {"S": f"{crawl_id}#{n}"},
                    "crawl_id": {"S": crawl_id},
                    "url": {"S": f"https://x/{n}"},
                    "state": {"S": state},
                },
            )


def _put_records(deployed: Deployed, crawl_id: str, records: list[dict[str, Any]]) -> None:
    # Written the way the extract handler writes them.
    table = deployed.table("results")
    ddb = deployed.client("dynamodb")
    for i, record in enumerate(records):
        item = {"pk": f"{crawl_id}#fp{i}", "fp": f"fp{i}", "crawl_id": crawl_id, "depth": 1, **record}
        ddb.put_item(TableName=table, Item=aws.marshal_exact(item))


def test_status_gives_queue_depths_and_counts_per_crawl(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    sqs = deployed.client("sqs")
    for i in range(3):
        sqs.send_message(QueueUrl=deployed.queue("frontier"), MessageBody=f"m{i}")
    sqs.receive_message(QueueUrl=deployed.queue("frontier"), MaxNumberOfMessages=1, VisibilityTimeout=300)
    sqs.send_message(QueueUrl=deployed.queue("fetch"), MessageBody="later", DelaySeconds=600)
    sqs.send_message(QueueUrl=deployed.dlq("extract"), MessageBody="dead")
    _put_urls(deployed, "a", {"fetched": 4, "failed": 1, "skipped": 2, "queued": 1, "retrying": 2})
    _put_urls(deployed, "b", {"fetched": 1})
    _put_records(deployed, "a", [{"mapping": "m", "url": "https://x/1", "fields": {}}] * 3)
    deployed.client("dynamodb").put_item(
        TableName=deployed.table("crawls"),
        Item={"crawl_id": {"S": "a"}, "max_pages": {"N": "10"}, "pages_admitted": {"N": "6"}},
    )
    deployed.client("dynamodb").put_item(
        TableName=deployed.table("crawls"), Item={"crawl_id": {"S": "c"}, "state": {"S": "stopped"}}
    )

    code, out, err = run(capsys, deployed, "status")
    assert (code, err) == (0, "")
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["queue", "visible", "in", "flight", "delayed", "dead-lettered"]
    assert lines[2] == ["frontier", "2", "1", "0", "0"]
    assert lines[3] == ["fetch", "0", "0", "1", "0"]
    assert lines[4] == ["extract", "0", "0", "0", "1"]
    assert lines[6] == [
        "crawl",
        "state",
        "queued",
        "fetching",
        "fetched",
        "skipped",
        "failed",
        "retrying",
        "extracted",
        "budget",
    ]
    assert lines[8] == ["a", "running", "1", "0", "4", "2", "1", "2", "3", "6/10"]
    assert lines[9] == ["b", "running", "0", "0", "1", "0", "0", "0", "0"]
    assert lines[10] == ["c", "stopped", "0", "0", "0", "0", "0", "0", "0"]  # a crawl with a config and no URL yet

    code, out, _ = run(capsys, deployed, "status", "a")
    assert code == 0
    assert out.splitlines()[-1].split() == ["a", "running", "1", "0", "4", "2", "1", "2", "3", "6/10"]
    code, out, _ = run(capsys, deployed, "status", "c")
    assert out.splitlines()[-1].split() == ["c", "stopped", "0", "0", "0", "0", "0", "0", "0"]

    code, out, _ = run(capsys, deployed, "status", "--no-counts")
    assert code == 0 and "crawl" not in out and len(out.splitlines()) == 5


# --- records ------------------------------------------------------------------------------

RECORDS = [
    {"mapping": "book", "url": "https://b/1", "fields": {"title": "Emma", "price": 8.5}, "fetched_at": 1.0},
    {"mapping": "book", "url": "https://b/2", "fields": {"title": "Middlemarch", "tags": ["a", "b"]}},
    {"mapping": "author", "url": "https://a/1", "fields": {"name": "Jane Austen"}, "record_id": "emma"},
]


def test_records_as_json_lines_filtered_and_limited(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    _put_records(deployed, "a", RECORDS)
    _put_records(deployed, "b", RECORDS[:1])

    code, out, _ = run(capsys, deployed, "records", "--crawl-id", "a")
    assert code == 0
    got = sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["url"])
    assert [r["url"] for r in got] == ["https://a/1", "https://b/1", "https://b/2"]
    assert got[1] == {**RECORDS[0], "crawl_id": "a", "depth": 1}
    assert got[2]["fields"]["tags"] == ["a", "b"]

    code, out, _ = run(capsys, deployed, "records", "--crawl-id", "a", "--mapping", "book")
    assert sorted(json.loads(line)["url"] for line in out.splitlines()) == ["https://b/1", "https://b/2"]
    code, out, _ = run(capsys, deployed, "records", "--limit", "2")
    assert len(out.splitlines()) == 2
    code, out, _ = run(capsys, deployed, "records")
    assert len(out.splitlines()) == 4


def test_records_as_csv_have_a_column_per_field(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    _put_records(deployed, "a", RECORDS)
    code, out, _ = run(capsys, deployed, "records", "--format", "csv", "--mapping", "book")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert sorted(rows[0]) == sorted(
        [
            "mapping",
            "url",
            "crawl_id",
            "depth",
            "fetched_at",
            "record_id",
            "fields.title",
            "fields.price",
            "fields.tags",
        ]
    )
    by_url = {r["url"]: r for r in rows}
    assert by_url["https://b/1"]["fields.title"] == "Emma"
    assert by_url["https://b/1"]["fields.price"] == "8.5"
    assert by_url["https://b/2"]["fields.tags"] == '["a", "b"]'
    assert by_url["https://b/2"]["fields.price"] == ""


def test_resolved_records(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    ddb = deployed.client("dynamodb")
    for crawl_id, record_id, fields in [("a", "emma", {"title": "Emma", "price": "8.50"}), ("b", "x", {})]:
        item = {
            "pk": f"{crawl_id}#{record_id}",
            "crawl_id": crawl_id,
            "record_id": record_id,
            "want": ["title", "price"],
        }
        # Flat field./source. attributes, as aws.ResolvedStore writes them.
        item |= {f"field.{k}": v for k, v in fields.items()} | {f"source.{k}": "https://b/1" for k in fields}
        ddb.put_item(TableName=deployed.table("resolved"), Item=aws.marshal(item))

    code, out, _ = run(capsys, deployed, "records", "--resolved", "--crawl-id", "a")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "crawl_id": "a",
            "record_id": "emma",
            "fields": {"price": "8.50", "title": "Emma"},
            "sources": {"price": "https://b/1", "title": "https://b/1"},
            "complete": True,
        }
    ]
    code, out, _ = run(capsys, deployed, "records", "--resolved", "--format", "csv")
    rows = sorted(csv.DictReader(io.StringIO(out)), key=lambda r: r["record_id"])
    assert [(r["record_id"], r["complete"], r["fields.title"]) for r in rows] == [
        ("emma", "True", "Emma"),
        ("x", "False", ""),
    ]
    code, _, err = run(capsys, deployed, "records", "--resolved", "--mapping", "book")
    assert code == 2 and err.startswith("crawlstack: error: --mapping: ")


# --- query --------------------------------------------------------------------------------


def _out_dir(tmp_path: Path, crawl_id: str = "local") -> Path:
    out = tmp_path / "out"
    out.mkdir()
    (out / "records.jsonl").write_text(
        "".join(json.dumps({"crawl_id": crawl_id, "depth": 0, "fetched_at": 1.7e9, **r}) + "\n" for r in RECORDS)
    )
    (out / "summary.json").write_text(json.dumps({"crawl_id": crawl_id}))
    log = [
        {"url": "https://b/1", "outcome": "fetched", "status": 200, "depth": 0},
        {"url": "https://b/3", "outcome": "failed", "reason": "timeout", "depth": 1},
        {"url": "https://b/4", "outcome": "skipped", "reason": "robots.txt", "depth": 1},
    ]
    (out / "crawl-log.jsonl").write_text("".join(json.dumps(line) + "\n" for line in log))
    return out


def test_query_local_runs_sql_on_duckdb_over_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _out_dir(tmp_path)
    sql = "SELECT fields['title'] AS title, fields['tags'] AS tags FROM records WHERE mapping = 'book' ORDER BY url"
    code = main(["query", sql, "--local", str(out)])
    printed, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert printed.splitlines() == [
        "title        tags",
        "-----------  ---------",
        "Emma",
        'Middlemarch  ["a","b"]',
        "(2 rows)",
    ]

    code = main(["query", "SELECT outcome, count(*) AS n FROM crawl_log GROUP BY 1 ORDER BY 1", "--local", str(out)])
    assert code == 0
    assert capsys.readouterr().out.splitlines()[2:5] == ["failed   1", "fetched  1", "skipped  1"]

    # No resolved.jsonl: the table is there, empty.
    code = main(["query", "SELECT count(*) AS n FROM resolved", "--local", str(out), "--format", "jsonl"])
    assert code == 0 and capsys.readouterr().out == '{"n": 0}\n'


def test_the_stacks_named_queries_run_locally_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # infra imports aws_cdk, whose node process must not warn about the node version (as make/infra.mk says).
    monkeypatch.setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from infra.analytics import NAMED_QUERIES

    out = _out_dir(tmp_path, settings.DEFAULT_CRAWL_ID)
    results = {}
    for name, (_, sql) in NAMED_QUERIES.items():
        assert main(["query", sql, "--local", str(out), "--format", "jsonl"]) == 0, capsys.readouterr().err
        results[name] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["mapping"], r["records"]) for r in results["records-by-mapping"]] == [("book", 2), ("author", 1)]
    assert results["top-failing-hosts"] == [{"host": "b", "failures": 1, "urls": 3, "failed_pct": 33.3}]
    assert len(results["fetch-outcomes-by-host-and-status"]) == 3


def test_query_local_mistakes_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _out_dir(tmp_path)
    assert main(["query", "SELEC 1", "--local", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("crawlstack: error: query: Parser Error: syntax error")
    assert main(["query", "SELECT * FROM nope", "--local", str(out)]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["query", "SELECT 1", "--local", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_query_on_athena_waits_and_prints_a_table(capsys: pytest.CaptureFixture[str], deployed: Deployed) -> None:
    columns = [{"Name": "mapping", "Type": "varchar"}, {"Name": "n", "Type": "bigint"}]
    rows = [
        {"Data": [{"VarCharValue": "mapping"}, {"VarCharValue": "n"}]},
        {"Data": [{"VarCharValue": "book"}, {"VarCharValue": "2"}]},
        {"Data": [{"VarCharValue": "author"}, {"VarCharValue": "1"}]},
    ]
    requests.post(
        f"{deployed.endpoint}/moto-api/static/athena/query-results",
        json={"region": "us-east-1", "results": [{"rows": rows, "column_info": columns}]},
        timeout=10,
    ).raise_for_status()
    code, out, err = run(capsys, deployed, "query", "SELECT mapping, count(*) AS n FROM records GROUP BY 1")
    assert (code, err) == (0, "")
    assert out.splitlines() == ["mapping  n", "-------  -", "book     2", "author   1", "(2 rows)"]
    (execution,) = deployed.client("athena").list_query_executions(WorkGroup=WORKGROUP)["QueryExecutionIds"]
    details = deployed.client("athena").get_query_execution(QueryExecutionId=execution)["QueryExecution"]
    assert details["QueryExecutionContext"] == {"Database": DATABASE}
    assert details["Query"] == "SELECT mapping, count(*) AS n FROM records GROUP BY 1"


# moto's queries succeed at once; failure and timeout are checked on a stand-in client.


class _FakeAthena:
    def __init__(self, states: list[dict[str, Any]]) -> None:
        self.states = states
        self.stopped: list[str] = []

    def start_query_execution(self, **kwargs: Any) -> dict[str, Any]:
        return {"QueryExecutionId": "q1"}

    def get_query_execution(self, QueryExecutionId: str) -> dict[str, Any]:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return {"QueryExecution": {"Status": state}}

    def stop_query_execution(self, QueryExecutionId: str) -> None:
        self.stopped.append(QueryExecutionId)


def _athena(fake: _FakeAthena, sleeps: list[float]) -> Any:
    from crawlstack.aws import Connection
    from crawlstack.aws.athena import Athena

    connection = Connection("us-east-1")
    connection._clients["athena"] = fake
    return Athena(connection, sleep=sleeps.append)


def test_athena_failures_say_why() -> None:
    from crawlstack.aws.errors import DeployedError

    sleeps: list[float] = []
    failed = {
        "State": "FAILED",
        "StateChangeReason": "line 1:8: Column 'x' cannot be resolved",
        "AthenaError": {"ErrorCategory": 2},
    }
    athena = _athena(_FakeAthena([{"State": "QUEUED"}, {"State": "RUNNING"}, failed]), sleeps)
    with pytest.raises(DeployedError) as caught:
        athena.run("SELECT x", "wg", "db", timeout=60)
    assert str(caught.value) == "query failed: line 1:8: Column 'x' cannot be resolved"
    assert caught.value.status == 2
    assert sleeps == [0.25, 0.5]  # backing off between polls


def test_athena_timeout_cancels_the_query() -> None:
    from crawlstack.aws.errors import DeployedError

    fake = _FakeAthena([{"State": "RUNNING"}])
    athena = _athena(fake, [])
    with pytest.raises(DeployedError, match=r"still RUNNING after 0s: cancelled"):
        athena.run("SELECT 1", "wg", "db", timeout=0)
    assert fake.stopped == ["q1"]


# --- dlq ----------------------------------------------------------------------------------


def test_dlq_show_leaves_messages_and_redrive_moves_them_back(
    capsys: pytest.CaptureFixture[str], deployed: Deployed
) -> None:
    sqs = deployed.client("sqs")
    bodies = [json.dumps({"url": f"https://x/{i}", "depth": 1}) for i in range(13)]
    for body in bodies:
        sqs.send_message(QueueUrl=deployed.dlq("frontier"), MessageBody=body)

    code, out, _ = run(capsys, deployed, "dlq", "show", "frontier", "--limit", "12")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "frontier dead-letter queue: 13 messages:"
    assert len(lines) == 13
    assert all(line.startswith("  received 1x, sent ") for line in lines[1:])
    assert {line.split(": ", 1)[1] for line in lines[1:]} <= set(bodies)
    # Still there, and visible at once.
    attrs = sqs.get_queue_attributes(QueueUrl=deployed.dlq("frontier"), AttributeNames=["All"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == ("13", "0")

    code, out, _ = run(capsys, deployed, "dlq", "show")
    assert code == 0
    assert "fetch dead-letter queue: 0 messages\n" in out and "extract dead-letter queue: 0 messages\n" in out

    code, out, _ = run(capsys, deployed, "dlq", "redrive", "frontier", "--limit", "4")
    assert (code, out) == (0, "frontier: moved 4 messages back from its dead-letter queue\n")
    code, out, _ = run(capsys, deployed, "dlq", "redrive")
    assert code == 0
    assert "frontier: moved 9 messages back from its dead-letter queue" in out
    assert deployed.receive_all(deployed.dlq("frontier")) == []
    assert sorted(m["Body"] for m in deployed.receive_all(deployed.queue("frontier"))) == sorted(bodies)


def test_a_bad_queue_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["dlq", "show", "frontierr"])
    assert caught.value.code == 2


def test_query_local_reads_a_real_crawls_out(
    capsys: pytest.CaptureFixture[str], web: LoopbackWeb, crawl: Crawl
) -> None:
    address = "127.0.0.2"
    web.add_host(address, star_site(3))
    rules = [mapping("page", host_pattern(address, r"/p\d\.html"), {"title": "//h1/text()"})]
    result = crawl(web.url(address, "/"), rules=rules)
    capsys.readouterr()
    sql = (
        "SELECT r.fields['title'] AS title, l.outcome, l.host, r.crawl_id = l.crawl_id AS same_crawl "
        "FROM records r JOIN crawl_log l USING (url) ORDER BY title"
    )
    assert main(["query", sql, "--local", str(result.out), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "title,outcome,host,same_crawl",
        *(f"page {i},fetched,{address},True" for i in (1, 2, 3)),
    ]


def test_the_installed_command_as_an_operator_runs_it(deployed: Deployed, tmp_path: Path) -> None:
    """Through the console script, in its own process: the region from the environment, nothing else shared."""
    import os
    import subprocess
    import sys

    script = Path(sys.executable).with_name("crawlstack")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSTACK_")}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *argv, "--stack", STACK, "--endpoint-url", deployed.endpoint],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    seeded = cli("seed", "https://a.example/", "https://b.example/", "--crawl-id", "ops")
    assert (seeded.returncode, seeded.stdout, seeded.stderr) == (0, "seeded 2 of 2 URLs into ops\n", "")
    status = cli("status", "ops")
    assert status.returncode == 0 and status.stdout.splitlines()[2].split() == ["frontier", "2", "0", "0", "0"]
    bad = cli("query", "SELECT 1", "--local", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def _athena_result(columns: list[str], *rows: list[str | None]) -> dict[str, Any]:
    header = {"Data": [{"VarCharValue": c} for c in columns]}
    data = [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows]
    return {"rows": [header, *data], "column_info": [{"Name": c, "Type": "varchar"} for c in columns]}


def test_report_of_a_deployed_crawl_from_athena(
    capsys: pytest.CaptureFixture[str], deployed: Deployed, tmp_path: Path
) -> None:
    """moto's Athena answers the report's three queries, in order, with canned rows."""
    from crawlstack.report.athena import queries

    log = ["url", "outcome", "reason", "status", "depth", "started_at", "fetched_at", "attempt"]
    results = [
        _athena_result(
            log,
            ["http://a.test/", "fetched", None, "200", "0", "2026-01-01T00:00:00.000000+00:00", "1767225600.3", "1"],
            ["http://a.test/x", "failed", "timeout", None, "1", "2026-01-01T00:00:02.000000+00:00", "1767225612", "1"],
        ),
        _athena_result(["mapping", "records"], ["page", "1"]),
        _athena_result(["mapping", "name", "filled"], ["page", "title", "1"]),
    ]
    requests.post(
        f"{deployed.endpoint}/moto-api/static/athena/query-results",
        json={"region": "us-east-1", "results": results},
        timeout=10,
    ).raise_for_status()
    target = tmp_path / "c1.html"
    code, out, err = run(capsys, deployed, "report", "--crawl-id", "c1", "--out", str(target))
    assert (code, err) == (0, ""), err
    assert out.strip() == f"wrote {target}"
    page = target.read_text(encoding="utf-8")
    assert "Crawl c1" in page and f"Athena ({DATABASE})" in page
    assert "2 URLs (fetched 1, failed 1)" in page and "1 records" in page
    athena = deployed.client("athena")
    asked = [
        athena.get_query_execution(QueryExecutionId=q)["QueryExecution"]["Query"]
        for q in athena.list_query_executions(WorkGroup=WORKGROUP)["QueryExecutionIds"]
    ]
    assert sorted(asked) == sorted(queries("c1").values())
    code, _, err = run(capsys, deployed, "report", "--crawl-id", "c1")
    assert code == 2 and "--out" in err


# --- a watch's sources ------------------------------------------------------------------

LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "domain", "pattern": "127.0.0.2"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [{"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]}],
}


def test_sources_on_the_stack_are_planned_by_its_schedule_and_shown_by_status(
    capsys: pytest.CaptureFixture[str], deployed: Deployed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = str(write_rules(tmp_path / "rules", [LISTING]))
    url = "http://127.0.0.2/latest"
    code, out, err = run(capsys, deployed, "sources", "add", url, "--mapping", "listing")
    assert code == 2 and err.count("\n") == 1 and "--rules DIR" in err
    code, out, err = run(capsys, deployed, "sources", "add", url, "--mapping", "nope", "--rules", rules)
    assert code == 2 and err.count("\n") == 1 and "no mapping named 'nope'" in err
    add = ["sources", "add", url, "--mapping", "listing", "--id", "news", "--priority-max", "24", "--rules", rules]
    assert run(capsys, deployed, *add) == (0, "added 1 source: news\n", "")
    code, out, err = run(capsys, deployed, *add)
    assert code == 2 and err.strip() == "crawlstack: error: a source with id 'news' already exists"
    code, out, _ = run(capsys, deployed, "sources", "list")
    assert code == 0 and "news" in out and url in out
    code, out, _ = run(capsys, deployed, "sources", "show", "news")
    assert json.loads(out)["priority_max"] == 24.0

    # The stack's schedule function plans the day: a check an hour (its ceiling), the first half an hour from now.
    for key, value in deployed.names.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", deployed.endpoint)
    aws.reset_clients()
    container.reset()
    try:
        spec = settings.FUNCTIONS["schedule"]
        assert schedule.handler({}, LambdaContext("schedule", spec.memory_mb, spec.timeout_seconds))["planned"] == 24
    finally:
        container.reset()
        monkeypatch.delenv("AWS_ENDPOINT_URL")
    code, out, _ = run(capsys, deployed, "status", "--no-counts")
    assert code == 0 and "news" not in out  # --no-counts: queue depths only
    code, out, _ = run(capsys, deployed, "status")
    assert f"watch: schedule {SCHEDULE} enabled, rate(1 minute)" in out.splitlines()
    row = next(line.split() for line in out.splitlines() if line.startswith("news"))
    # Checks a day; tokens: none to start and 24 earned, 24 checks planned, none banked (issue 28: the first
    # grant is not banked on top of the ceiling).
    assert row[1:3] == ["24", "0"]
    first_check = datetime.fromisoformat(row[3].replace("Z", "+00:00")).timestamp()
    assert 0 < first_check - time.time() <= 30 * 60  # the first of 24 evenly spaced: half a step from now
    assert row[4:] == ["0", "0"]  # no check ended yet

    assert run(capsys, deployed, "sources", "remove", "news") == (0, "removed news\n", "")
    code, _, err = run(capsys, deployed, "sources", "remove", "news")
    assert code == 2 and "no source with id 'news'" in err
    # The operator pauses the watch with Scheduler; status says so (here with a source again).
    deployed.client("scheduler").update_schedule(
        Name=SCHEDULE,
        ScheduleExpression="rate(1 minute)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::1:role/r"},
        State="DISABLED",
    )
    code, out, _ = run(capsys, deployed, "status")
    assert "news" not in out and "watch:" not in out  # no source, no watch to report
    assert run(capsys, deployed, *add)[0] == 0
    code, out, _ = run(capsys, deployed, "status")
    assert f"watch: schedule {SCHEDULE} disabled, rate(1 minute)" in out.splitlines()
