"""Schedule Lambda's entry point: each minute, plan the day, send the checks due (crawlstack.lambdas.schedule)."""

from __future__ import annotations

import time
from typing import Any

from crawlstack.lambdas import schedule
from crawlstack.lambdas.observability import for_service
from functions import container

# Redacted logs, lazy X-Ray, the crawlstack namespace: crawlstack.lambdas.observability.
observed = for_service("schedule")
logger, tracer, metrics = observed
# The watch's time (tests and the watch bench set their own).
clock = time.time


@observed.handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return schedule.handle(container.services(), container.settings(), observed, clock())
