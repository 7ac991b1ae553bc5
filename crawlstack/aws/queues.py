"""The SQS queues: messages sent in batches of ten."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from crawlstack import settings
from crawlstack.aws import clients


class SendFailed(RuntimeError):
    pass


class Queue:
    """An SQS queue that messages are sent to in batches of ten."""

    def __init__(self, url: str, key: str) -> None:
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
            resp = clients.client("sqs").send_message_batch(QueueUrl=self.url, Entries=pending)
            failed = {f["Id"] for f in resp.get("Failed", [])}
            if not failed:
                return len(entries)
            pending = [e for e in pending if e["Id"] in failed]
            time.sleep(0.05 * 2**attempt)
        raise SendFailed(f"{len(pending)} messages could not be sent to the {self.key} queue")
