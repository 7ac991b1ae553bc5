"""SQS work queues, each with a dead-letter queue."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from crawlstack import settings

DLQ_RETENTION = Duration.days(14)


class Queues(Construct):
    """One standard queue per ``settings.QUEUES`` entry, keyed like it.

    Messages that fail ``max_receive_count`` times move to the queue's DLQ,
    kept for 14 days.  Physical names are left to CloudFormation so that
    several stacks can share an account.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queues: dict[str, sqs.Queue] = {}
        self.dlqs: dict[str, sqs.Queue] = {}
        for key, spec in settings.QUEUES.items():
            name = key.capitalize()
            dlq = sqs.Queue(
                self,
                f"{name}Dlq",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=DLQ_RETENTION,
            )
            self.dlqs[key] = dlq
            self.queues[key] = sqs.Queue(
                self,
                name,
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                visibility_timeout=Duration.seconds(spec.visibility_timeout_seconds),
                dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=spec.max_receive_count),
            )

    def __getitem__(self, key: str) -> sqs.Queue:
        return self.queues[key]
