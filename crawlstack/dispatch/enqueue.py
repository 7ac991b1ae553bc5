"""Enqueue: the fetch task, admitted to its host's politeness window (``crawlstack.politeness``) or parked.

The only component that knows politeness.  The task carries the link's
canonical URL, fingerprint and host, and the host's delay (the crawl's, or
a longer robots.txt ``Crawl-delay``).  Tasks admitted (this one, or parked
ones it unparks) go to the outbox to wait in SQS for their slots; parked
tasks of a stopped crawl that this dispatcher unparks are held instead
(``crawlstack.jobs``).

Settings: the crawl's ``delay``, ``host_concurrency`` and ``user_agent``
(for the robots.txt delay); politeness's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.ports import Crawls
from crawlstack.jobs import Held, hold_task
from crawlstack.messages import FetchTask
from crawlstack.politeness import Politeness, window_size


class Enqueue:
    def __init__(
        self,
        politeness: Politeness,
        crawls: Crawls,
        held: Held | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.politeness = politeness
        self.crawls = crawls
        self.held = held
        self.clock = clock

    def __call__(self, link: Link, outbox: Outbox) -> Decision:
        msg, config, policy = link.msg, link.crawl, link.policy
        assert policy is not None, "Robots.load runs before Enqueue"
        delay = config.host_delay(policy.crawl_delay(config.user_agent))
        task = FetchTask(
            url=link.url,
            fp=link.fp,
            host=link.host,
            depth=msg.depth,
            crawl_id=msg.crawl_id,
            not_before=0.0,
            delay=delay,
            window=window_size(delay, config.host_concurrency),
            hops=msg.hops,
            referrer=msg.referrer,
            record_id=msg.record_id,
            want=msg.want,
        )
        admitted = self.politeness.admit(task, hold=self._hold_if_stopped, stopped=self._stopped)
        now = self.clock()
        for order, ready in admitted:
            outbox.add_fetch(ready, now, order)
        return Decision(link.url, "queued" if any(t.fp == link.fp for _, t in admitted) else "parked")

    def _stopped(self, task: FetchTask) -> bool:
        """Whether the task's crawl is stopped and its tasks are held (a cached read)."""
        return self.held is not None and self.crawls.get(task.crawl_id).stopped

    def _hold_if_stopped(self, task: FetchTask) -> bool:
        """For parked tasks this dispatcher unparks: hold those of a stopped crawl instead of giving them slots."""
        if self.held is None or not self._stopped(task):
            return False
        return hold_task(self.held, task)
