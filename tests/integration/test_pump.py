"""The local event pump on the embedded emulator: Lambda-like delivery, redelivery and backpressure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from crawlstack import aws
from crawlstack.local import pump as pump_module
from crawlstack.local.emulator import EmbeddedAws
from crawlstack.local.pump import EndpointUnavailable, EventPump, Source


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # The adapters' default connection (the environment's) finds moto through these; EmbeddedAws writes none.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with EmbeddedAws():
        aws.reset_clients()
        yield aws.client("sqs")
        aws.reset_clients()


def queue(sqs: Any, name: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def send(sqs: Any, url: str, bodies: list[str]) -> None:
    for i in range(0, len(bodies), 10):
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(j), "MessageBody": b} for j, b in enumerate(bodies[i : i + 10])]
        )


def test_batches_partial_failures_and_redelivery(sqs: Any) -> None:
    url, arn = queue(sqs, "work")
    send(sqs, url, [json.dumps({"n": n}) for n in range(5)])
    seen: list[tuple[int, int]] = []  # (n, receive count)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        failures = []
        for record in event["Records"]:
            n = json.loads(record["body"])["n"]
            count = int(record["attributes"]["ApproximateReceiveCount"])
            seen.append((n, count))
            if n == 3 and count == 1:  # fails once, then succeeds on redelivery
                failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}

    EventPump([Source("work", url, arn, handler, 1, visibility_timeout=1)]).run()
    assert sorted(seen) == [(0, 1), (1, 1), (2, 1), (3, 1), (3, 2), (4, 1)]


def test_a_source_waits_while_its_backpressure_queue_is_deep(sqs: Any) -> None:
    front_url, front_arn = queue(sqs, "front")
    back_url, back_arn = queue(sqs, "back")
    send(sqs, back_url, ["b"])
    order: list[str] = []

    def front(event: dict[str, Any], context: Any) -> dict[str, Any]:
        order.extend("front" for _ in event["Records"])
        return {"batchItemFailures": []}

    def back(event: dict[str, Any], context: Any) -> dict[str, Any]:
        order.append(f"back with {frontier_depth()} waiting in front")
        return {"batchItemFailures": []}

    def frontier_depth() -> int:
        attrs = sqs.get_queue_attributes(QueueUrl=front_url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attrs["Attributes"]["ApproximateNumberOfMessages"])

    send(sqs, front_url, ["f"] * 30)
    pump = EventPump(
        [
            Source("front", front_url, front_arn, front, 1, batch_size=1),
            Source("back", back_url, back_arn, back, 1, backpressure_from="front", high_water=5),
        ]
    )
    pump.run()
    back_runs = [o for o in order if o.startswith("back")]
    assert len(back_runs) == 1 and order.count("front") == 30
    assert int(back_runs[0].split()[2]) < 5


def test_a_message_that_always_fails_comes_back_after_retry_after_and_ends_in_the_dlq(sqs: Any) -> None:
    dlq_url, dlq_arn = queue(sqs, "work-dlq")
    url = sqs.create_queue(
        QueueName="work",
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})},
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    send(sqs, url, ["poison", "fine"])
    seen: list[tuple[str, int]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.extend((r["body"], int(r["attributes"]["ApproximateReceiveCount"])) for r in event["Records"])
        return {
            "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] == "poison"]
        }

    # A visibility timeout far longer than the test: only retry_after can bring the message back in time.
    source = Source("work", url, arn, handler, 1, visibility_timeout=600, retry_after=0)
    EventPump([source]).run()
    assert sorted(seen) == [("fine", 1), ("poison", 1), ("poison", 2), ("poison", 3)]
    dead = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in dead] == ["poison"]
    assert (source.stats.failed, source.stats.deleted) == (3, 1)


def test_the_pump_carries_on_when_its_own_sqs_calls_fail(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url, arn = queue(sqs, "work")
    send(sqs, url, ["a", "b"])
    error = ClientError({"Error": {"Code": "InternalError", "Message": "retries spent"}}, "ReceiveMessage")
    failing = {"receive_message": 2, "delete_message_batch": 1, "get_queue_attributes": 1}
    for name in failing:
        real = getattr(sqs, name)

        def flaky(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            if failing[_name]:
                failing[_name] -= 1
                raise error
            return _real(*args, **kwargs)

        monkeypatch.setattr(sqs, name, flaky)
    seen: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    source = Source("work", url, arn, handler, 1, visibility_timeout=1)
    EventPump([source]).run()
    # The batch whose delete failed came back after its visibility timeout and was delivered again.
    assert sorted(seen) == ["a", "a", "b", "b"]
    assert source.stats.aws_errors == 4 and failing == dict.fromkeys(failing, 0)


def test_the_pump_gives_up_when_every_receive_fails(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url, arn = queue(sqs, "work")
    send(sqs, url, ["waiting"])  # the queue is not empty, so only giving up ends the pump
    error = ClientError({"Error": {"Code": "InternalError", "Message": "endpoint gone"}}, "ReceiveMessage")

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(sqs, "receive_message", gone)
    monkeypatch.setattr(pump_module, "MAX_FAILED_RECEIVES", 3)
    source = Source("work", url, arn, lambda event, context: {"batchItemFailures": []}, 1)
    with pytest.raises(EndpointUnavailable, match=r"3 receives in a row failed.*endpoint gone"):
        EventPump([source]).run()
    assert source.stats.aws_errors == 3 and source.stats.invocations == 0
