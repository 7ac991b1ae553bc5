"""Why local mode keeps queues short: moto's SQS call cost against queue length.

Times SendMessageBatch (10 messages), ReceiveMessage (10) and
GetQueueAttributes on one queue holding N messages, on the embedded emulator
(with its cheaper clock) and on plain moto.

    python bench/moto_sqs.py
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import boto3
from moto import mock_aws

from crawlstack.local.emulator import EmbeddedAws


def measure(emulator: Callable[[], AbstractContextManager[object]], sizes: list[int]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    with emulator():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="bench")["QueueUrl"]
        queued = 0
        for size in sizes:
            while queued < size:
                sqs.send_message_batch(
                    QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x" * 200} for i in range(10)]
                )
                queued += 10
            row = {}
            for name, call in {
                "send_batch_ms": lambda: sqs.send_message_batch(
                    QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x" * 200} for i in range(10)]
                ),
                "receive_ms": lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0),
                "attributes_ms": lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
            }.items():
                started = time.perf_counter()
                call()
                row[name] = round((time.perf_counter() - started) * 1000, 1)
            queued += 10
            out[size] = row
    return out


def main() -> None:
    sizes = [200, 1000, 5000]
    print(json.dumps({"embedded": measure(EmbeddedAws, sizes), "plain_moto": measure(mock_aws, sizes)}, indent=1))


if __name__ == "__main__":
    main()
