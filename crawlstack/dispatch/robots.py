"""Robots: the origin's robots.txt (``crawlstack.fetch.robots_txt``), if known, before the claim; its verdict after.

Dispatch never fetches robots.txt: the host's run does, as the host's next
request under its lease (``crawlstack.fetch.host_loop``), so the file's request
is spaced like any other and made once per origin per expiry.  Here the
policy is what this container remembers or the hosts table caches; a URL of
an origin with none yet goes on, and its run checks it.

``load``, before the claim: the policy, if known (``link.policy``; None if not).
``check``, after the claim: a URL a known robots.txt disallows is recorded
as ``skipped`` with the reason, as the claimed URL's outcome, and costs no
backlog space.

Settings: ``ROBOTS_MISS_SECONDS`` (how long an origin found uncached is
not looked up again: until its run has fetched the file, every link to it
would cost a read), ``settings.ROBOTS_MEMORY_ORIGINS`` (origins a
container remembers, policies and misses each); the
crawl's ``user_agent``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from crawlstack import settings
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.ports import RobotsCache
from crawlstack.fetch.robots_txt import RobotsPolicy, remember
from crawlstack.ports import Urls
from crawlstack.urls import origin_of

ROBOTS_MISS_SECONDS = 5.0


class Robots:
    def __init__(self, cache: RobotsCache, urls: Urls, clock: Callable[[], float] = time.time) -> None:
        self.cache = cache
        self.urls = urls
        self.clock = clock
        self._policies: dict[str, RobotsPolicy] = {}
        self._misses: dict[str, float] = {}  # origin -> when it may be looked up again

    def load(self, link: Link, outbox: Outbox) -> Decision | None:
        """Before the claim: the origin's policy on the link, if this container or the cache knows it."""
        link.policy = self._policy(link.url)
        return None

    def check(self, link: Link, outbox: Outbox) -> Decision | None:
        """After the claim: a URL a known robots.txt disallows ends ``skipped``."""
        policy = link.policy
        if policy is None or policy.allows(link.url, link.crawl.user_agent):
            return None
        self.urls.set_outcome(link.msg.crawl_id, link.fp, "skipped", reason=policy.disallow_reason())
        return Decision(link.url, "skipped", "robots", "robots")

    def _policy(self, url: str) -> RobotsPolicy | None:
        origin = origin_of(url)
        now = self.clock()
        policy = self._policies.get(origin)
        if policy is not None and not policy.record.expired(now):
            return policy
        if self._misses.get(origin, 0.0) > now:
            return None
        record = self.cache.get_robots(origin)
        if record is None or record.expired(now):
            remember(self._misses, origin, now + ROBOTS_MISS_SECONDS, settings.ROBOTS_MEMORY_ORIGINS)
            return None
        policy = RobotsPolicy(record)
        remember(self._policies, origin, policy, settings.ROBOTS_MEMORY_ORIGINS)
        return policy
