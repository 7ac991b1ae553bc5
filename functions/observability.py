"""The handlers' logger, tracer and metrics, set up once here rather than in each handler.

``for_service("fetch")`` is a function's Powertools ``Logger``, ``Tracer`` and
``Metrics``, built on first use and the same objects after.  It is per
service, not one module-level set, because local mode runs the three handlers
in one process and each still logs and counts under its own service name
(the ``service`` dimension the dashboard reads, infra.monitoring).

* the logger's every line is redacted (crawlstack.redact): crawled URLs
  carry tokens now and then;
* the tracer's provider imports the X-Ray SDK at the first invocation, not at
  cold start, and patches only ``TRACED_MODULES`` (crawlstack.tracing);
* the metrics go to ``settings.METRICS_NAMESPACE``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from aws_lambda_powertools import Logger, Metrics, Tracer

from crawlstack import settings
from crawlstack.redact import redacted_logs
from crawlstack.tracing import TRACED_MODULES, LazyXRayProvider


class Observability(NamedTuple):
    logger: Logger
    tracer: Tracer
    metrics: Metrics


@functools.cache
def for_service(service: str) -> Observability:
    """The logger, tracer and metrics of the function called ``service`` (dispatch, fetch, extract)."""
    return Observability(
        logger=Logger(service=service, **redacted_logs()),
        tracer=Tracer(service=service, provider=LazyXRayProvider(), patch_modules=TRACED_MODULES),
        metrics=Metrics(namespace=settings.METRICS_NAMESPACE, service=service),
    )
