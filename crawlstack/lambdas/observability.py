"""A function's logger, tracer and metrics (Powertools), and the decorators that make a body a Lambda handler.

``for_service("fetch")`` builds the function's ``Logger``, ``Tracer`` and
``Metrics``; each entry point (``functions/``) builds its set once, at
import, and local mode one per crawl for each of the functions it runs in
one process, so each still logs and counts under its own service name
(the ``service`` dimension the dashboard reads, infra.monitoring).

* the logger's every line is redacted (crawlstack.lambdas.redact): crawled URLs
  carry tokens now and then;
* the tracer's provider imports the X-Ray SDK at the first invocation, not at
  cold start, and patches only ``TRACED_MODULES`` (crawlstack.lambdas.tracing);
* the metrics go to ``settings.METRICS_NAMESPACE``.

In Lambda, Powertools reads its own variables (``POWERTOOLS_LOG_LEVEL``,
``POWERTOOLS_TRACE_DISABLED``); local mode passes a level and turns tracing
off instead, and writes no variable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer

from crawlstack import settings
from crawlstack.lambdas.redact import redacted_logs
from crawlstack.lambdas.tracing import TRACED_MODULES, LazyXRayProvider

Result = TypeVar("Result")


class Observability(NamedTuple):
    logger: Logger
    tracer: Tracer
    metrics: Metrics

    def handler(self, body: Callable[[Any, Any], Result]) -> Callable[[Any, Any], Result]:
        """``body(event, context)`` as a Lambda handler: traced, its metrics flushed at its end, its logs in context."""
        handler: Callable[[Any, Any], Result] = self.tracer.capture_lambda_handler(
            self.metrics.log_metrics(self.logger.inject_lambda_context(body))
        )
        return handler


def for_service(service: str, level: str | None = None, traced: bool | None = None) -> Observability:
    """The logger, tracer and metrics of the function called ``service`` (dispatch, fetch, extract, schedule).

    ``level``: the logger's level (None: Powertools' own, from its variables);
    ``traced``: False turns tracing off (None: Powertools decides, on in Lambda only).
    """
    logger = Logger(service=service, **redacted_logs())
    if level is not None:
        # Set here, not by Logger(level=...): a second Logger of the service reuses the first's setup, level too.
        logger.setLevel(level)
    return Observability(
        logger=logger,
        tracer=Tracer(
            service=service,
            disabled=None if traced is None else not traced,
            provider=LazyXRayProvider(),
            patch_modules=TRACED_MODULES,
        ),
        metrics=Metrics(namespace=settings.METRICS_NAMESPACE, service=service),
    )
