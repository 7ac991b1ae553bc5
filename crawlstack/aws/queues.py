"""The SQS queues: the queue port (``crawlstack.queueing``) on SQS, messages sent and handled ten a call."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from crawlstack import settings
from crawlstack.aws import clients
from crawlstack.queueing import Depth, Received


class SendFailed(RuntimeError):
    pass


class Queue:
    """An SQS queue that messages are sent to in batches of ten."""

    def __init__(self, url: str, key: str, *, connection: clients.Connection = clients.ENVIRONMENT) -> None:
        self.connection = connection
        self.url = url
        # Which queue (``settings.QUEUES``), for messages.
        self.key = key

    def send(self, messages: Iterable[tuple[str, int]]) -> int:
        """Send (body, delay_seconds) pairs with SendMessageBatch; return how many."""
        batch: list[dict[str, Any]] = []
        sent = 0
        for body, delay in messages:
            wait = max(0, min(delay, settings.MAX_SQS_DELAY_SECONDS))
            batch.append({"Id": str(len(batch)), "MessageBody": body, "DelaySeconds": wait})
            if len(batch) == settings.SQS_BATCH_SIZE:
                sent += self._send_batch(batch)
                batch = []
        if batch:
            sent += self._send_batch(batch)
        return sent

    def _send_batch(self, entries: list[dict[str, Any]]) -> int:
        pending = entries
        for attempt in range(4):
            resp = self.connection.client("sqs").send_message_batch(QueueUrl=self.url, Entries=pending)
            failed = {f["Id"] for f in resp.get("Failed", [])}
            if not failed:
                return len(entries)
            pending = [e for e in pending if e["Id"] in failed]
            time.sleep(0.05 * 2**attempt)
        raise SendFailed(f"{len(pending)} messages could not be sent to the {self.key} queue")

    def receive(self, most: int, visibility_timeout: int) -> list[Received]:
        """Up to ``most`` messages visible now, ten a call (SQS's most), without waiting for more."""
        out: list[Received] = []
        while len(out) < most:
            want = min(settings.SQS_BATCH_SIZE, most - len(out))
            got = (
                self.connection.client("sqs")
                .receive_message(
                    QueueUrl=self.url,
                    MaxNumberOfMessages=want,
                    VisibilityTimeout=visibility_timeout,
                    WaitTimeSeconds=0,
                    AttributeNames=["All"],
                )
                .get("Messages", [])
            )
            out += [_received(m) for m in got]
            if len(got) < want:
                break
        return out

    def delete(self, receipts: Sequence[str]) -> None:
        for start in range(0, len(receipts), settings.SQS_BATCH_SIZE):
            chunk = receipts[start : start + settings.SQS_BATCH_SIZE]
            self.connection.client("sqs").delete_message_batch(
                QueueUrl=self.url, Entries=[{"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(chunk)]
            )

    def change_visibility(self, receipts: Sequence[str], timeout: int) -> None:
        for start in range(0, len(receipts), settings.SQS_BATCH_SIZE):
            chunk = receipts[start : start + settings.SQS_BATCH_SIZE]
            self.connection.client("sqs").change_message_visibility_batch(
                QueueUrl=self.url,
                Entries=[{"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": timeout} for i, r in enumerate(chunk)],
            )

    def depth(self) -> Depth:
        attrs = self.connection.client("sqs").get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return Depth(
            int(attrs.get("ApproximateNumberOfMessages", 0)),
            int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
            int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
        )


def _received(message: dict[str, Any]) -> Received:
    attrs = message.get("Attributes", {})
    return Received(
        message["MessageId"],
        message["Body"],
        message["ReceiptHandle"],
        int(attrs.get("ApproximateReceiveCount", 1)),
        int(attrs.get("SentTimestamp", 0)) / 1000,
    )
