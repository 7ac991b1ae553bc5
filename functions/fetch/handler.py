"""Fetch Lambda: fetch queue batch -> one WARC in S3 (see crawlstack.fetcher)."""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from crawlstack.crawllog import write_crawl_log
from crawlstack.dispatcher import Outbox
from crawlstack.fetcher import failure_class
from crawlstack.messages import FetchTask, InvalidMessage
from crawlstack.resolution import RECORD_COMPLETE
from crawlstack.wiring import services
from functions.observability import for_service

# Redacted logs, lazy X-Ray, the crawlstack namespace: functions.observability.
logger, tracer, metrics = for_service("fetch")


@tracer.capture_lambda_handler
@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    svc = services()
    outbox = Outbox()
    metrics.add_metric(name="MessagesReceived", unit=MetricUnit.Count, value=len(event.get("Records", [])))
    tasks: list[FetchTask] = []
    owners: list[str] = []
    invalid: dict[str, InvalidMessage] = {}
    for raw in event.get("Records", []):
        try:
            tasks.append(FetchTask.from_json(raw["body"]))
            owners.append(raw["messageId"])
        except InvalidMessage as exc:
            invalid[raw["messageId"]] = exc

    # The whole batch at once, not per record: fetch_batch fetches its tasks concurrently.
    batch = svc.fetcher.fetch_batch(tasks, outbox)
    failures = {owners[i]: exc for i, exc in batch.errors.items()}
    try:
        write_crawl_log(svc.fetcher.blobs, batch.fetched, time.time())
    except Exception as exc:
        # Only the log for Athena is missing: pages and outcomes are stored,
        # and a retry would fetch nothing again, so the batch still succeeds.
        logger.warning("crawl log not written", reason=str(exc))
        metrics.add_metric(name="CrawlLogErrors", unit=MetricUnit.Count, value=1)
    if batch.completion_error is not None:
        # Fetched as if no record were complete: a missed saving, not a failure.
        logger.warning("record completion not read", reason=str(batch.completion_error))
        metrics.add_metric(name="CompletionReadErrors", unit=MetricUnit.Count, value=1)
    for item in batch.fetched:
        logger.info(
            "fetched",
            url=item.task.url,
            correlation_id=item.task.fp,
            outcome=item.outcome,
            status=item.status,
            reason=item.reason,
        )
        if item.outcome == "skipped" and item.reason == RECORD_COMPLETE:
            name = "RecordCompleteSkips"
        else:
            name = {"fetched": "PagesFetched", "skipped": "PagesSkipped", "retry": "FetchRetries"}.get(
                item.outcome, "FetchFailures"
            )
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
        if item.outcome == "failed":
            # Its own EMF line: a dimension on the shared metric set would split every other metric too.
            with single_metric(
                name="FetchFailuresByClass", unit=MetricUnit.Count, value=1, namespace=metrics.namespace
            ) as failure:
                failure.add_dimension(name="FailureClass", value=failure_class(item.reason))

    def record_handler(record: SQSRecord) -> None:
        if record.message_id in invalid:
            # It can never succeed: log it and let it go rather than cycle it to the DLQ.
            logger.error("invalid fetch task", reason=str(invalid[record.message_id]), body=record.body[:2000])
            return
        if record.message_id in failures:
            raise failures[record.message_id]

    return svc.process_batch(event, context, record_handler, outbox, logger=logger)
