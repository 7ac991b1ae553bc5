"""Fetch: a batch of host run messages -> each host worked through its backlog (see crawlstack.fetch.host_runner).

A run message whose lease is refused (a stale or duplicate message, or a
host another invocation holds) is done with.  A host whose run failed
fails its own messages: its lease was given back under the same run id, so
the redelivered message goes on, and a failure that repeats ends in the DLQ.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from crawlstack.errors import failure
from crawlstack.fetch.outcomes import Fetched, failure_class
from crawlstack.lambdas.batches import process_batch
from crawlstack.lambdas.observability import Observability
from crawlstack.messages import InvalidMessage, RunMessage
from crawlstack.records.resolution import RECORD_COMPLETE
from crawlstack.wiring import Services

_OUTCOME_METRIC = {"fetched": "PagesFetched", "skipped": "PagesSkipped", "retry": "FetchRetries"}


def handle(svc: Services, obs: Observability, event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """One invocation's batch, on ``svc``; logged and counted on ``obs``."""
    logger, metrics = obs.logger, obs.metrics
    records = event.get("Records", [])
    metrics.add_metric(name="MessagesReceived", unit=MetricUnit.Count, value=len(records))
    messages: list[RunMessage] = []
    hosts: dict[str, str] = {}  # message id -> host
    invalid: dict[str, InvalidMessage] = {}
    for raw in records:
        try:
            msg = RunMessage.from_json(raw["body"])
        except InvalidMessage as exc:
            invalid[raw["messageId"]] = exc
            continue
        messages.append(msg)
        hosts[raw["messageId"]] = msg.host

    # The whole batch at once, not per record: its hosts are worked side by side and share the sleeping.
    deadline = time.time() + context.get_remaining_time_in_millis() / 1000
    result = svc.runner.run(messages, deadline, memory_mb=int(context.memory_limit_in_mb))
    for host, error in result.errors.items():
        logger.warning("host run failed", host=host, reason=failure(error))
    for end, count in Counter(result.ends.values()).items():  # done, rescheduled, deadline, lost, refused, failed
        metrics.add_metric(name=f"Runs{end.capitalize()}", unit=MetricUnit.Count, value=count)
    # Sleep or be woken (crawlstack.fetch.pacing.should_sleep): the waits slept; RunsRescheduled, the others.
    if result.waits_slept:
        metrics.add_metric(name="RunWaitsSlept", unit=MetricUnit.Count, value=result.waits_slept)
        metrics.add_metric(name="RunSecondsSlept", unit=MetricUnit.Seconds, value=round(result.seconds_slept, 3))
    for item in result.fetched:
        _count(obs, item)
    # Wake-ups went out as each host was released, redirects at each flush (crawlstack.wiring).

    def record_handler(record: SQSRecord) -> None:
        if record.message_id in invalid:
            # It can never succeed: log it and let it go rather than cycle it to the DLQ.
            logger.error("invalid run message", reason=str(invalid[record.message_id]), body=record.body[:2000])
            return
        host = hosts.get(record.message_id, "")
        if host in result.errors:
            raise result.errors[host]

    return process_batch(svc, event, context, record_handler, logger=logger)


def _count(obs: Observability, item: Fetched) -> None:
    # Each page's outcome is in its crawl-log object already (S3, Athena): a log line per page
    # would cost CloudWatch ingestion for a copy; at DEBUG it is there when asked for.
    obs.logger.debug(
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
        name = _OUTCOME_METRIC.get(item.outcome, "FetchFailures")
    obs.metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
    if item.outcome == "failed":
        # Its own EMF line: a dimension on the shared metric set would split every other metric too.
        with single_metric(
            name="FetchFailuresByClass", unit=MetricUnit.Count, value=1, namespace=obs.metrics.namespace
        ) as metric:
            metric.add_dimension(name="FailureClass", value=failure_class(item.reason))
