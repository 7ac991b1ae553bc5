"""Reading a queue empty in the integration tests."""

from __future__ import annotations

from typing import Any

from crawlstack import aws


def drain(url: str) -> list[dict[str, Any]]:
    """Every message visible in the queue at ``url`` now, deleted as read (delayed ones are not visible)."""
    sqs, out = aws.client("sqs"), []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", []):
        out += got
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        )
    return out
