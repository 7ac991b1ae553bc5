"""Dispatch Lambda's entry point: frontier batch -> host backlogs and run messages (crawlstack.lambdas.dispatch)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

from crawlstack.lambdas import dispatch
from crawlstack.lambdas.observability import for_service
from functions import container

# Redacted logs, lazy X-Ray, the crawlstack namespace: crawlstack.lambdas.observability.
observed = for_service("dispatch")
logger, tracer, metrics = observed


@observed.handler
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return dispatch.handle(container.services(), observed, event, context)
