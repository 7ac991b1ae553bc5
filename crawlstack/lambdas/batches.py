"""An SQS batch through Powertools' batch processor: each message reported alone if it failed (partial failures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

from crawlstack.dispatch import Outbox
from crawlstack.wiring import Services


def process_batch(
    svc: Services,
    event: dict[str, Any],
    context: Any,
    record_handler: Callable[[Any], None],
    outbox: Outbox | None = None,
    after_send: Callable[[], None] | None = None,
    logger: Any = None,
) -> PartialItemFailureResponse:
    """Run ``record_handler`` over an SQS batch (Powertools, partial failures), then send ``outbox`` if given.

    What finished records produced goes out even if the batch as a whole
    fails: their URLs are claimed, and a redelivery would not admit them again.
    ``after_send`` runs only once the sends succeeded.  Each failed
    message is logged on ``logger`` with its one-line reason and receive
    count, so a message that ends in the DLQ has its reason in the logs.
    """

    def logged(record: Any) -> None:
        try:
            record_handler(record)
        except Exception as exc:
            if logger is not None:
                text = str(exc).splitlines()[0] if str(exc) else ""
                logger.warning(
                    "message failed, to be retried",
                    message_id=record.message_id,
                    receive_count=record.attributes.approximate_receive_count,
                    reason=f"{type(exc).__name__}: {text}",
                )
            raise

    try:
        return process_partial_response(
            event=event,
            record_handler=logged,
            # One processor per invocation: it holds the batch's state, and
            # local mode runs several invocations of one function at once.
            processor=BatchProcessor(event_type=EventType.SQS),
            context=context,
        )
    finally:
        if outbox is not None:
            svc.flush(outbox)
        if after_send is not None:
            after_send()
