"""Extract: S3 ObjectCreated notes (via the extract queue) -> records and outlinks (see crawlstack.extract)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from crawlstack.dispatch import Outbox
from crawlstack.extract import SkippedLinks
from crawlstack.fetch.warc import WarcUnreadable
from crawlstack.lambdas.batches import process_batch
from crawlstack.lambdas.observability import Observability
from crawlstack.messages import FrontierMessage, created_objects, pack_links
from crawlstack.wiring import Services

# A watch's counts, by metric name (the dashboard's checks panels, infra.monitoring).
CHECK_METRICS = {"pages": "CheckPages", "not_modified": "CheckPagesNotModified", "new_items": "NewItems"}


def skipped_metric(kind: str) -> str:
    """``HrefsSkipped`` + the class in CamelCase: ``percent-escape`` -> ``HrefsSkippedPercentEscape``."""
    return "HrefsSkipped" + "".join(part.capitalize() for part in kind.split("-"))


def handle(svc: Services, obs: Observability, event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """One invocation's batch, on ``svc``; logged and counted on ``obs``."""
    logger, metrics = obs.logger, obs.metrics
    outbox = Outbox()
    metrics.add_metric(name="MessagesReceived", unit=MetricUnit.Count, value=len(event.get("Records", [])))

    sent: list[FrontierMessage] = []

    def record_handler(record: SQSRecord) -> None:
        for bucket, key in created_objects(record.body):
            logger.append_keys(warc=key)
            try:
                extracted = svc.extractor.extract_object(bucket, key)
            except WarcUnreadable as exc:
                # Nothing of it was extracted: the message fails, and after its retries the
                # extract DLQ keeps it (alarmed) for a look and a redrive; the object stays in S3.
                logger.error("unreadable WARC", reason=str(exc))
                metrics.add_metric(name="UnreadableWarcs", unit=MetricUnit.Count, value=1)
                raise
            for failed in extracted.failed:
                logger.warning("page failed extraction", url=failed.url, reason=failed.reason)
            if extracted.failed:
                metrics.add_metric(name="PagesFailedExtraction", unit=MetricUnit.Count, value=len(extracted.failed))
            outbox.frontier.extend((body, 0) for body in pack_links(extracted.outlinks))
            sent.extend(extracted.outlinks)
            metrics.add_metric(name="RecordsExtracted", unit=MetricUnit.Count, value=len(extracted.records))
            metrics.add_metric(name="OutlinksFound", unit=MetricUnit.Count, value=len(extracted.outlinks))
            _report_skipped(obs, extracted.skipped)

    try:
        return process_batch(
            svc,
            event,
            context,
            record_handler,
            outbox,
            after_send=lambda: svc.extractor.sent.remember(sent),
            logger=logger,
        )
    finally:
        _report_checks(svc, obs)


def _report_skipped(obs: Observability, skipped: SkippedLinks) -> None:
    """One metric per class and one log line per WARC, with a few examples, however many hrefs were skipped."""
    if not skipped:
        return
    for kind, count in sorted(skipped.counts.items()):
        obs.metrics.add_metric(name=skipped_metric(kind), unit=MetricUnit.Count, value=count)
    obs.logger.info(
        "links skipped",
        counts=dict(sorted(skipped.counts.items())),
        examples=[{"href": href, "reason": reason} for href, reason in skipped.sample],
    )


def _report_checks(svc: Services, obs: Observability) -> None:
    checks = svc.extractor.checks
    if checks is not None:
        for key, count in checks.take_counts().items():
            obs.metrics.add_metric(name=CHECK_METRICS[key], unit=MetricUnit.Count, value=count)
    bus = svc.watch.event_bus if svc.watch is not None else None
    if bus is not None:
        published, oversize = bus.take_counts()
        if published:
            obs.metrics.add_metric(name="EventsPublished", unit=MetricUnit.Count, value=published)
        if oversize:
            obs.metrics.add_metric(name="EventsOversize", unit=MetricUnit.Count, value=oversize)
