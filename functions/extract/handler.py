"""Extract Lambda: S3 ObjectCreated (via the extract queue) -> records and outlinks."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from crawlstack import settings
from crawlstack.dispatcher import Outbox
from crawlstack.messages import FrontierMessage
from crawlstack.wiring import services

logger = Logger(service="extract")
tracer = Tracer(service="extract")
metrics = Metrics(namespace="crawlstack", service="extract")


def created_objects(body: str) -> list[tuple[str, str]]:
    """(bucket, key) of each WARC an S3 event notification announces."""
    event = json.loads(body)
    out = []
    for rec in event.get("Records", []):  # an s3:TestEvent has none
        if not str(rec.get("eventName", "")).startswith("ObjectCreated"):
            continue
        key = unquote_plus(rec["s3"]["object"]["key"])
        if key.startswith(settings.PAGES_PREFIX):
            out.append((rec["s3"]["bucket"]["name"], key))
    return out


@tracer.capture_lambda_handler
@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    svc = services()
    outbox = Outbox()
    metrics.add_metric(name="MessagesReceived", unit=MetricUnit.Count, value=len(event.get("Records", [])))

    sent: list[FrontierMessage] = []

    def record_handler(record: SQSRecord) -> None:
        for bucket, key in created_objects(record.body):
            logger.append_keys(warc=key)
            extracted = svc.extractor.extract_object(bucket, key)
            outbox.frontier.extend((link.to_json(), 0) for link in extracted.outlinks)
            sent.extend(extracted.outlinks)
            metrics.add_metric(name="RecordsExtracted", unit=MetricUnit.Count, value=len(extracted.records))
            metrics.add_metric(name="OutlinksFound", unit=MetricUnit.Count, value=len(extracted.outlinks))

    return svc.process_batch(
        event,
        context,
        record_handler,
        outbox,
        after_send=lambda: svc.extractor.sent.remember(sent),
        logger=logger,
    )
