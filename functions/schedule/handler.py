"""Schedule Lambda: each minute (EventBridge Scheduler) it plans the day, sends the checks due, settles old ones.

The work is ``crawlstack.watch.scheduler.tick`` on the watch table; a
repeated invocation (Scheduler's at-least-once delivery, or one running
late into the next minute) claims each check with a conditional write, so
it sends nothing twice.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.watch import scheduler
from crawlstack.watch.pages import WATCH_CRAWL_ID
from crawlstack.wiring import Services, services
from functions.observability import for_service

logger, tracer, metrics = for_service("schedule")
# Read once per container: a day's budget of checks for all sources (0 or unset: none).
BUDGET = int(os.environ.get(settings.ENV_WATCH_CHECKS_PER_DAY) or 0) or None
# The watch's time (tests set their own).
clock = time.time


@tracer.capture_lambda_handler
@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    svc = services()
    sources, plans = svc.stores.sources, svc.stores.plans
    if sources is None or plans is None:
        raise RuntimeError(f"no watch table: {settings.ENV_TABLE['watch']} is not set")
    _ensure_watch_crawl(svc)
    now = clock()
    done = scheduler.tick(
        sources,
        plans,
        lambda bodies: svc.frontier_queue.send([(body, 0) for body in bodies]),
        now,
        now,
        BUDGET,
        settings.WATCH_STALE_CHECK_SECONDS,
        late_after=settings.WATCH_LATE_SECONDS,
    )
    metrics.add_metric(name="ChecksPlanned", unit=MetricUnit.Count, value=done.planned)
    metrics.add_metric(name="ChecksSent", unit=MetricUnit.Count, value=done.sent)
    metrics.add_metric(name="ChecksSettled", unit=MetricUnit.Count, value=done.settled)
    metrics.add_metric(name="OldestDueCheckAgeSeconds", unit=MetricUnit.Seconds, value=done.oldest_due_age)
    if done.planned or done.sent or done.moved:
        logger.info("tick", planned=done.planned, sent=done.sent, settled=done.settled, moved=done.moved)
    return {"planned": done.planned, "sent": done.sent, "settled": done.settled}


# The services the watch crawl's config was stored through: once per container (per services built).
_watch_crawl_ready: Services | None = None


def _ensure_watch_crawl(svc: Services) -> None:
    """The ``watch`` crawl's config, once per container: the stack's delay and agent, no links followed.

    A check's page is read for its items, never crawled on from (max depth
    0), and a host's re-checks are no spider trap (no cap of pages per host).
    A config already stored (tuned by its owner) is left alone.
    """
    global _watch_crawl_ready
    if _watch_crawl_ready is not svc:
        defaults = CrawlConfig.defaults_from_env(os.environ, WATCH_CRAWL_ID)
        svc.stores.crawls.put_new(replace(defaults, max_depth=0, max_pages_per_host=0))
        _watch_crawl_ready = svc
