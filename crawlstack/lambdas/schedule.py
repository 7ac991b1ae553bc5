"""Schedule: each minute (EventBridge Scheduler) it plans the day, sends the checks due, settles old ones.

The work is ``crawlstack.watch.scheduler.tick`` on the watch table; a
repeated invocation (Scheduler's at-least-once delivery, or one running
late into the next minute) claims each check with a conditional write, so
it sends nothing twice.

Settings: ``HandlerSettings.checks_per_day`` (the day's budget of checks for
all sources) and ``crawl_defaults`` (the watch crawl's delay and agent),
``settings.WATCH_STALE_CHECK_SECONDS``, ``settings.WATCH_LATE_SECONDS``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from crawlstack import settings
from crawlstack.lambdas.environment import HandlerSettings
from crawlstack.lambdas.observability import Observability
from crawlstack.watch import scheduler
from crawlstack.watch.pages import WATCH_CRAWL_ID
from crawlstack.wiring import Services


def handle(svc: Services, handler_settings: HandlerSettings, obs: Observability, now: float) -> dict[str, Any]:
    """One tick at ``now`` (the watch's time), on ``svc``'s watch; logged and counted on ``obs``."""
    watch = svc.watch
    if watch is None or watch.sources is None or watch.plans is None:
        raise RuntimeError(f"no watch table: {settings.ENV_TABLE['watch']} is not set")
    svc.once("watch crawl", lambda: _store_watch_crawl(svc, handler_settings))
    done = scheduler.tick(
        watch.sources,
        watch.plans,
        lambda bodies: svc.frontier_queue.send([(body, 0) for body in bodies]),
        now,
        now,
        handler_settings.checks_per_day,
        settings.WATCH_STALE_CHECK_SECONDS,
        late_after=settings.WATCH_LATE_SECONDS,
    )
    metrics = obs.metrics
    metrics.add_metric(name="ChecksPlanned", unit=MetricUnit.Count, value=done.planned)
    metrics.add_metric(name="ChecksSent", unit=MetricUnit.Count, value=done.sent)
    metrics.add_metric(name="ChecksSettled", unit=MetricUnit.Count, value=done.settled)
    metrics.add_metric(name="OldestDueCheckAgeSeconds", unit=MetricUnit.Seconds, value=done.oldest_due_age)
    if done.planned or done.sent or done.moved:
        obs.logger.info("tick", planned=done.planned, sent=done.sent, settled=done.settled, moved=done.moved)
    return {"planned": done.planned, "sent": done.sent, "settled": done.settled}


def _store_watch_crawl(svc: Services, handler_settings: HandlerSettings) -> None:
    """The ``watch`` crawl's config, once per container: the stack's delay and agent, no links followed.

    A check's page is read for its items, never crawled on from (max depth
    0), and a host's re-checks are no spider trap (no cap of pages per host).
    A config already stored (tuned by its owner) is left alone.
    """
    defaults = replace(handler_settings.crawl_defaults, crawl_id=WATCH_CRAWL_ID)
    svc.crawls.put_new(replace(defaults, max_depth=0, max_pages_per_host=0))
