"""Fetch Lambda's entry point: host run messages -> each host worked through its backlog (crawlstack.lambdas.fetch)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

from crawlstack.lambdas import fetch
from crawlstack.lambdas.observability import for_service
from functions import container

# Redacted logs, lazy X-Ray, the crawlstack namespace: crawlstack.lambdas.observability.
observed = for_service("fetch")
logger, tracer, metrics = observed


@observed.handler
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return fetch.handle(container.services(), observed, event, context)
