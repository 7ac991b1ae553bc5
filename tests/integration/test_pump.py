"""The local event pump on the embedded emulator: Lambda-like delivery, redelivery and backpressure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from crawlstack import aws
from crawlstack.local.emulator import EmbeddedAws
from crawlstack.local.pump import EventPump, Source


@pytest.fixture
def sqs() -> Iterator[Any]:
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
