"""Robots: the origin's robots.txt (``crawlstack.robots``) before the dedupe claim, its verdict after.

``load``, before the claim: the policy, cached per origin in the container
and in the hosts table; fetched by one dispatcher at a time, holding the
host like a fetch.  A message whose robots.txt another dispatcher is
fetching is put back on the frontier for a moment; it comes back with a new
message id, and must find its URL unclaimed, hence before the claim.

``check``, after the claim: a URL robots.txt disallows is recorded as
``skipped`` with the reason, as the claimed URL's outcome.

Settings: ``ROBOTS_LOCK_SECONDS`` (how long the fetching dispatcher holds
the origin's lock and the host), ``ROBOTS_WAIT_SECONDS`` (how long a
message waits for another dispatcher's fetch), ``politeness.SUB_SECOND``;
the crawl's ``user_agent``, ``allow_private`` and delays.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from crawlstack import http
from crawlstack.config import CrawlConfig
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.ports import RobotsCache, Urls
from crawlstack.headers import parse_retry_after
from crawlstack.politeness import SUB_SECOND
from crawlstack.robots import RobotsPolicy, RobotsRecord
from crawlstack.urls import origin_of

ROBOTS_LOCK_SECONDS = 30.0
ROBOTS_WAIT_SECONDS = 2


class Robots:
    def __init__(
        self,
        cache: RobotsCache,
        urls: Urls,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cache = cache
        self.urls = urls
        self.clock = clock
        self.sleep = sleep
        self._policies: dict[str, RobotsPolicy] = {}

    def load(self, link: Link, outbox: Outbox) -> Decision | None:
        """Before the claim: the origin's policy on the link, or the message put back to wait for it."""
        link.policy = self._policy(link.url, link.host, link.crawl)
        if link.policy is not None:
            return None
        outbox.frontier.append((link.msg.to_json(), ROBOTS_WAIT_SECONDS))
        return Decision(link.url, "retry", "robots.txt being fetched by another dispatcher")

    def check(self, link: Link, outbox: Outbox) -> Decision | None:
        """After the claim: a disallowed URL's outcome is ``skipped``."""
        policy = link.policy
        assert policy is not None, "Robots.load runs before Robots.check"
        if policy.allows(link.url, link.crawl.user_agent):
            return None
        self.urls.set_outcome(link.msg.crawl_id, link.fp, "skipped", reason=policy.disallow_reason())
        return Decision(link.url, "skipped", "robots", "robots")

    def _policy(self, url: str, host: str, config: CrawlConfig) -> RobotsPolicy | None:
        origin = origin_of(url)
        policy = self._policies.get(origin)
        if policy is not None and not policy.record.expired():
            return policy
        record = self.cache.get_robots(origin)
        if record is None:
            record = self._fetch(origin, host, config)
            if record is None:
                return None
        policy = RobotsPolicy(record)
        self._policies[origin] = policy
        return policy

    def _fetch(self, origin: str, host: str, config: CrawlConfig) -> RobotsRecord | None:
        """Fetch and cache robots.txt as the one dispatcher doing so, holding the host like a fetch.

        None when another dispatcher is fetching it or the host is busy:
        the caller puts its message back for a moment.
        """
        now = self.clock()
        if not self.cache.lock_robots(origin, now + ROBOTS_LOCK_SECONDS):
            return None
        if not self._claim_host(host):
            self.cache.unlock_robots(origin)
            return None
        finished = now
        delay = 0.0
        try:
            result = http.fetch_robots(origin, config.user_agent, http.AddressGuard(config.allow_private))
            finished = result.finished_at or self.clock()
            retry_after = parse_retry_after(result.header("retry-after"), finished)
            record = RobotsRecord.from_fetch(origin, result.status, result.body, result.error, retry_after)
            self.cache.put_robots(record)
            if result.status is not None:
                # The robots.txt request counts against the host's delay too.
                delay = config.host_delay(RobotsPolicy(record).crawl_delay(config.user_agent))
        finally:
            self.cache.push_back(host, finished + delay)
        return record

    def _claim_host(self, host: str) -> bool:
        """Claim the host; a gap of under a second after the last request is slept out.

        Slots are back to back on a busy host, so a refresh that only ever
        tried at random moments could wait a long time for a free one.
        """
        for _ in range(3):
            now = self.clock()
            blocked = self.cache.claim(host, now, now + ROBOTS_LOCK_SECONDS)
            if blocked is None:
                return True
            wait = blocked.free_at - now
            if blocked.in_flight or wait > SUB_SECOND:
                return False
            self.sleep(max(wait, 0.0))
        return False
