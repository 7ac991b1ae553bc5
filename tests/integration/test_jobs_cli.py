"""``crawlstack crawl stop|resume ID`` against a moto server holding a deployed stack's resources."""

from __future__ import annotations

import json

import pytest
from test_deployed_cli import Deployed, run
from test_deployed_cli import deployed as moto_stack  # noqa: F401 (fixtures are found by the name they are bound to)

from crawlstack import jobs
from crawlstack.messages import FrontierMessage


def state(stack: Deployed, crawl_id: str) -> str:
    item = stack.client("dynamodb").get_item(TableName=stack.table("crawls"), Key={"crawl_id": {"S": crawl_id}})
    return str(item["Item"]["state"]["S"])


def test_crawl_stop_then_resume_sends_the_held_work_back(
    capsys: pytest.CaptureFixture[str],
    moto_stack: Deployed,  # noqa: F811
) -> None:
    ddb = moto_stack.client("dynamodb")
    ddb.put_item(TableName=moto_stack.table("crawls"), Item={"crawl_id": {"S": "c1"}, "state": {"S": "running"}})
    code, out, err = run(capsys, moto_stack, "crawl", "stop", "c1")
    assert (code, err) == (0, "") and out.startswith("stopped c1")
    assert state(moto_stack, "c1") == jobs.STOPPED

    # What dispatch would have held meanwhile.
    msg = FrontierMessage(url="https://a.example/x", depth=1, crawl_id="c1")
    ddb.put_item(
        TableName=moto_stack.table("parked"),
        Item={"host": {"S": jobs.held_host("c1")}, "order": {"S": jobs.message_key(msg)}, "body": {"S": msg.to_json()}},
    )
    code, out, err = run(capsys, moto_stack, "crawl", "resume", "c1")
    assert (code, err) == (0, "") and out == "resumed c1: 1 held message or task sent back\n"
    assert state(moto_stack, "c1") == jobs.RUNNING
    [sent] = moto_stack.receive_all(moto_stack.queue("frontier"))
    assert json.loads(sent["Body"]) == json.loads(msg.to_json())
    assert ddb.scan(TableName=moto_stack.table("parked"))["Items"] == []


def test_crawl_stop_of_an_unknown_crawl_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str],
    moto_stack: Deployed,  # noqa: F811
) -> None:
    code, out, err = run(capsys, moto_stack, "crawl", "stop", "nope")
    assert (code, out) == (2, "")
    assert err == "crawlstack: error: the stack's crawls table has no crawl 'nope'\n"


def test_crawl_without_stop_or_resume_is_still_the_local_crawl(capsys: pytest.CaptureFixture[str]) -> None:
    from crawlstack.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["crawl", "http://example.com/"])  # --out is still required
    assert exc.value.code == 2
    assert "--out" in capsys.readouterr().err
