"""The SQS queues: the queue port (``crawlstack.queueing``) on SQS, messages sent and handled ten a call.

The CLI's operations (``try_send``, ``peek``, ``move_to``) turn botocore's
exceptions into a ``DeployedError`` naming the call (``aws_errors``); the
port's let them through, for the handlers' retries and the pump.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawlstack import settings
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.errors import aws_errors
from crawlstack.queueing import Depth, Received


class SendFailed(RuntimeError):
    pass


@dataclass
class Moved:
    """What ``Queue.move_to`` moved, and each message the target refused (its id and SQS's reason)."""

    moved: int = 0
    failed: list[str] = field(default_factory=list)


class Queue:
    """An SQS queue that messages are sent to in batches of ten."""

    # Long enough for one peek or move round to finish with the messages it received.
    HOLD_SECONDS = 30

    def __init__(self, url: str, key: str, *, connection: Connection = ENVIRONMENT) -> None:
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

    # --- the CLI's: seed, dlq show|redrive ----------------------------------------

    def try_send(self, bodies: Iterable[str]) -> list[tuple[str, str]]:
        """SendMessageBatch in chunks of ten, each body once: the (body, reason) of every message SQS refused."""
        failed: list[tuple[str, str]] = []
        items = list(bodies)
        for start in range(0, len(items), settings.SQS_BATCH_SIZE):
            chunk = items[start : start + settings.SQS_BATCH_SIZE]
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)]
            with aws_errors(f"send to {self.url}"):
                resp = self.connection.client("sqs").send_message_batch(QueueUrl=self.url, Entries=entries)
            for f in resp.get("Failed", []):
                failed.append((chunk[int(f["Id"])], f"{f.get('Code', 'error')}: {f.get('Message', '')}".rstrip(": ")))
        return failed

    def peek(self, limit: int) -> list[Received]:
        """Up to ``limit`` messages, left on the queue (their receipts spent).

        They are received with a short visibility timeout, so that each
        receive brings new ones, then made visible again.  Each peek adds
        one to their receive count (harmless on a DLQ, which has no redrive).
        """
        held: dict[str, dict[str, Any]] = {}
        try:
            while len(held) < limit:
                batch = self._hold(limit - len(held))
                new = [m for m in batch if m["MessageId"] not in held]
                if not new:
                    break
                for m in new:
                    held[m["MessageId"]] = m
        finally:
            self._release(list(held.values()))
        return [_received(m) for m in list(held.values())[:limit]]

    def move_to(self, target: Queue, limit: int | None = None) -> Moved:
        """Move messages to ``target``: receive, send, then delete only what was sent.

        moto has no StartMessageMoveTask, so this is the receive/send/delete
        loop that works everywhere.  A crash between send and delete leaves a
        message on both queues: delivered twice, which the handlers'
        dedupe already has to absorb (SQS delivers at least once).
        """
        sqs = self.connection.client("sqs")
        result = Moved()
        while limit is None or result.moved + len(result.failed) < limit:
            want = settings.SQS_BATCH_SIZE if limit is None else limit - result.moved - len(result.failed)
            batch = self._hold(want)
            if not batch:
                break
            entries = []
            for i, m in enumerate(batch):
                entry: dict[str, Any] = {"Id": str(i), "MessageBody": m["Body"]}
                if m.get("MessageAttributes"):
                    entry["MessageAttributes"] = m["MessageAttributes"]
                entries.append(entry)
            with aws_errors(f"send to {target.url}"):
                resp = target.connection.client("sqs").send_message_batch(QueueUrl=target.url, Entries=entries)
            refused = {f["Id"]: f.get("Message") or f.get("Code", "error") for f in resp.get("Failed", [])}
            sent = [m for i, m in enumerate(batch) if str(i) not in refused]
            if sent:
                deletes = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(sent)]
                with aws_errors(f"delete from {self.url}"):
                    sqs.delete_message_batch(QueueUrl=self.url, Entries=deletes)
            kept = [m for i, m in enumerate(batch) if str(i) in refused]
            self._release(kept)
            result.moved += len(sent)
            result.failed.extend(
                f"{m['MessageId']}: {refused[str(i)]}" for i, m in enumerate(batch) if str(i) in refused
            )
            if kept:
                break  # the target refuses: stop rather than spin on the same messages
        return result

    def _hold(self, count: int) -> list[dict[str, Any]]:
        """Receive up to ``count`` (ten at most) for ``HOLD_SECONDS``, with their message attributes."""
        with aws_errors(f"receive from {self.url}"):
            resp = self.connection.client("sqs").receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=max(1, min(count, settings.SQS_BATCH_SIZE)),
                VisibilityTimeout=self.HOLD_SECONDS,
                WaitTimeSeconds=1,
                AttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
                MessageAttributeNames=["All"],
            )
        messages: list[dict[str, Any]] = resp.get("Messages", [])
        return messages

    def _release(self, messages: list[dict[str, Any]]) -> None:
        """Make received messages visible again at once."""
        for start in range(0, len(messages), settings.SQS_BATCH_SIZE):
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(messages[start : start + settings.SQS_BATCH_SIZE])
            ]
            with aws_errors(f"release messages of {self.url}"):
                self.connection.client("sqs").change_message_visibility_batch(QueueUrl=self.url, Entries=entries)


def _received(message: dict[str, Any]) -> Received:
    attrs = message.get("Attributes", {})
    return Received(
        message["MessageId"],
        message["Body"],
        message["ReceiptHandle"],
        int(attrs.get("ApproximateReceiveCount", 1)),
        int(attrs.get("SentTimestamp", 0)) / 1000,
    )
