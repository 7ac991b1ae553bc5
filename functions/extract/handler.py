"""Extract Lambda's entry point: S3 ObjectCreated notes -> records and outlinks (crawlstack.lambdas.extract)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

from crawlstack.lambdas import extract
from crawlstack.lambdas.observability import for_service
from functions import container

# Redacted logs, lazy X-Ray, the crawlstack namespace: crawlstack.lambdas.observability.
observed = for_service("extract")
logger, tracer, metrics = observed


@observed.handler
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return extract.handle(container.services(), observed, event, context)
