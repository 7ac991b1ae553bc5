"""Dispatch: a frontier queue batch -> host backlogs and run messages (see crawlstack.dispatch).

Like fetch and extract, a batch fails only the messages that raised
(``batchItemFailures``), although it works across them: a message that is
invalid (a lone surrogate in an id, say) is dropped at parsing; a batched
read that fails leaves each message to read alone (``Dispatcher.prepare``);
a link that fails fails its message (``dispatch_in_turns``); and a failed
admission of the batch's tasks fails the messages whose tasks it may have
left out (``RunAdmissions.unadmitted``).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from crawlstack.dispatch import Decision, Link, Outbox, dispatch_in_turns
from crawlstack.lambdas.batches import process_batch
from crawlstack.lambdas.observability import Observability
from crawlstack.messages import FrontierMessage, InvalidMessage, frontier_messages
from crawlstack.wiring import Services

_METRIC = {"queued": "UrlsQueued", "deduped": "DedupeHits"}
# A URL dropped or skipped, by why (Decision.kind).
_KIND_METRIC = {
    "invalid": "UrlsInvalid",
    "scope": "UrlsOutOfScope",
    "port": "UrlsPortRefused",
    "trap": "UrlsTrapped",
    "host-cap": "UrlsOverHostCap",
    "budget": "UrlsOverBudget",
    "robots": "RobotsBlocked",
    "record-complete": "RecordCompleteSkips",
}


def handle(svc: Services, obs: Observability, event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """One invocation's batch, on ``svc``; logged and counted on ``obs``."""
    logger, metrics = obs.logger, obs.metrics
    outbox = Outbox()
    metrics.add_metric(name="MessagesReceived", unit=MetricUnit.Count, value=len(event.get("Records", [])))
    # Each body parsed once (a bundle holds up to 50 links); one batched read of
    # the records the batch resolves (invalid messages are reported below).
    parsed = {(r.get("messageId"), r.get("body", "")): _messages(r.get("body", "")) for r in event.get("Records", [])}
    # Each link made once: its canonical URL and fingerprint serve the batch's reads and its dispatch.
    links = {
        key: [Link(m, key[0] or "") for m in messages] for key, messages in parsed.items() if isinstance(messages, list)
    }
    svc.dispatcher.prepare(link for batch in links.values() for link in batch)

    def bind_logs(link: Link) -> None:
        logger.append_keys(url=link.msg.url, crawl_id=link.msg.crawl_id)
        # The URL's fingerprint (its key in the urls table) ties its log lines together across functions;
        # worked out here once, dispatch uses it too.
        logger.set_correlation_id(link.correlation_id)

    def count(msg: FrontierMessage, decision: Decision) -> None:
        logger.debug("dispatched", action=decision.action, reason=decision.reason)
        if decision.kind in _KIND_METRIC:
            metrics.add_metric(name=_KIND_METRIC[decision.kind], unit=MetricUnit.Count, value=1)
        elif decision.action in _METRIC:
            metrics.add_metric(name=_METRIC[decision.action], unit=MetricUnit.Count, value=1)

    # A link bundle (crawlstack.messages) is one message: a link that fails
    # fails it, and its redelivery finds the links before it already claimed.
    # The whole batch at once, not per record: its messages take turns, a link from each at a time.
    failed: dict[tuple[str, str], Exception] = dispatch_in_turns(
        svc.dispatcher,
        ((key, key[0] or "", batch) for key, batch in links.items()),
        outbox,
        on_decision=count,
        before=bind_logs,
    )
    # Sent before the messages are reported, so a failed send fails only the messages whose tasks it held.
    try:
        svc.flush(outbox)
    except Exception as exc:
        senders = outbox.runs.unadmitted(exc)
        cause = exc.__cause__ or exc
        logger.warning("admitting the batch's tasks failed", reason=f"{type(cause).__name__}: {cause}"[:500])
        failed.update({key: exc for key in links if (key[0] or "") in senders and key not in failed})

    def record_handler(record: SQSRecord) -> None:
        key = (record.message_id, record.body)
        messages = parsed.get(key)
        if isinstance(messages, InvalidMessage):
            # It can never succeed: log it whole (it is the user's own
            # message) and let it go rather than cycle it to the DLQ.
            logger.error("invalid frontier message", reason=str(messages), body=record.body[:2000])
            metrics.add_metric(name="InvalidMessages", unit=MetricUnit.Count, value=1)
            return
        if key in failed:
            raise failed[key]

    return process_batch(svc, event, context, record_handler, logger=logger)


def _messages(body: str) -> list[FrontierMessage] | InvalidMessage:
    """A record's frontier messages (one, or a bundle's links), or why it has none."""
    try:
        return frontier_messages(body)
    except InvalidMessage as exc:
        return exc
