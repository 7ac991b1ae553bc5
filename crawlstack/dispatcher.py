"""Dispatch: frontier message -> canonical, in-scope, new, robots-allowed URL -> fetch queue.

Steps, in order, for each message:

1. canonicalise the URL (``crawlstack.urls``); a URL that cannot be crawled
   is dropped with its reason;
2. scope (``crawlstack.scope``): seed hosts, mapping patterns, allow/deny,
   depth; a depth-0 message registers its host as a seed host;
   a message for a record (``record_id`` and ``want``) already complete
   (``crawlstack.resolution``) is skipped, before any robots.txt request,
   without taking the URL's claim (another record may still need the page);
3. robots.txt (``crawlstack.robots``), cached per origin in the hosts table
   and in the container;
4. dedupe: a conditional put on the urls table, so a URL goes to fetch once
   per crawl however many dispatchers race (a redelivered message may claim
   its own URL again, and any message a URL that a complete record passed
   over unfetched); a robots.txt disallow is recorded as its outcome;
5. the page budget (``max_pages``);
6. politeness (``crawlstack.politeness``): a slot in the host's window, or
   parked behind it.

A message of a stopped crawl (``crawlstack.jobs``) is held, before step 2,
for ``resume`` to send back; it takes no claim.

Each outcome of a URL that passed dedupe is written to the urls table.

Record completion is read once per batch (``prepare``, one batched read for
the batch's record ids); a record seen complete is remembered by the
container (``CompletedRecords``, shared with fetch), since completion never
reverts.  Messages without ``record_id`` and ``want`` cost no read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawlstack import http
from crawlstack.config import CrawlConfig
from crawlstack.jobs import Held, hold_message, hold_task
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import SUB_SECOND, Blocked, Politeness, sqs_delay, window_size
from crawlstack.resolution import RECORD_COMPLETE, CompletedRecords, ResolvedRecords, read_complete
from crawlstack.robots import RobotsPolicy, RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.scope import out_of_scope
from crawlstack.urls import InvalidURL, canonicalize, fingerprint, host_of, origin_of

ROBOTS_LOCK_SECONDS = 30.0
ROBOTS_WAIT_SECONDS = 2


class Crawls(Protocol):
    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig: ...
    def add_seed_host(self, crawl_id: str, host: str) -> None: ...
    def count_page(self, crawl_id: str, max_pages: int) -> bool: ...


class Urls(Protocol):
    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> bool: ...
    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...
    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...


class RobotsCache(Protocol):
    def get_robots(self, origin: str) -> RobotsRecord | None: ...
    def lock_robots(self, origin: str, until: float) -> bool: ...
    def unlock_robots(self, origin: str) -> None: ...
    def put_robots(self, record: RobotsRecord) -> None: ...
    def claim(self, host: str, now: float, lease_until: float) -> Blocked | None: ...
    def push_back(self, host: str, free_at: float) -> None: ...


@dataclass
class Outbox:
    """What a batch sends when it is done: fetch tasks and frontier re-sends."""

    fetch: list[tuple[str, int]] = field(default_factory=list)
    frontier: list[tuple[str, int]] = field(default_factory=list)
    unparked: dict[str, list[str | None]] = field(default_factory=dict)

    def add_fetch(self, task: FetchTask, now: float, parked_order: str | None = None, *, admitted: bool = True) -> None:
        """Queue ``task`` to wait in SQS for its slot.

        ``admitted``: it comes from an admission or an unpark, so its parked
        row (None if it never parked) is deleted once it is sent.
        """
        self.fetch.append((task.to_json(), sqs_delay(task.not_before, now)))
        if admitted:
            self.unparked.setdefault(task.host, []).append(parked_order)


@dataclass
class Decision:
    """What became of one message, for logs and metrics."""

    url: str
    action: str  # queued | parked | dropped | skipped | deduped | retry | held
    reason: str = ""


class Dispatcher:
    def __init__(
        self,
        crawls: Crawls,
        urls: Urls,
        robots: RobotsCache,
        politeness: Politeness,
        rules: RuleSet,
        clock: Any = time.time,
        sleep: Any = time.sleep,
        resolved: ResolvedRecords | None = None,
        completed: CompletedRecords | None = None,
        held: Held | None = None,
    ) -> None:
        self.crawls = crawls
        self.held = held
        self.urls = urls
        self.robots = robots
        self.politeness = politeness
        self.rules = rules
        self.clock = clock
        self.sleep = sleep
        self._robots_cache: dict[str, RobotsPolicy] = {}
        self._budget_spent: set[str] = set()
        self.resolved = resolved
        self.completed = completed if completed is not None else CompletedRecords()
        # Records read incomplete by ``prepare`` for the batch being dispatched.
        self._incomplete: set[tuple[str, str]] = set()

    def prepare(self, messages: Iterable[FrontierMessage]) -> None:
        """Read, in one go, which records the batch's messages resolve are complete."""
        keys = {(msg.crawl_id, msg.record_id) for msg in messages if msg.record_id and self._resolves(msg)}
        if self.resolved is None or not keys:
            self._incomplete = set()
            return
        self._incomplete = keys - read_complete(self.resolved, self.completed, keys)

    def _resolves(self, msg: FrontierMessage) -> bool:
        return self.resolved is not None and bool(msg.record_id) and bool(msg.want)

    def _record_complete(self, msg: FrontierMessage) -> bool:
        if self.resolved is None or not self._resolves(msg) or msg.record_id is None:
            return False
        key = (msg.crawl_id, msg.record_id)
        if key in self.completed:
            return True
        if key in self._incomplete:
            return False
        # Not prepared with its batch: read it alone (and keep no "incomplete"
        # answer, which only holds for the batch it was read for).
        return bool(read_complete(self.resolved, self.completed, [key]))

    def dispatch(self, msg: FrontierMessage, outbox: Outbox, message_id: str = "") -> Decision:
        try:
            url = canonicalize(msg.url)
        except InvalidURL as exc:
            return Decision(msg.url, "dropped", f"invalid URL: {exc}")
        config = self.crawls.get(msg.crawl_id)
        # The hold is conditional on the crawl being stopped in the table, so a
        # stale cached state costs one failed write and nothing else.
        if config.stopped and self.held is not None and hold_message(self.held, msg):
            return Decision(url, "held", "crawl stopped")
        host = host_of(url)
        if msg.depth == 0 and host not in config.seed_hosts:
            self.crawls.add_seed_host(msg.crawl_id, host)
            config = self.crawls.get(msg.crawl_id, max_age=0)
        reason = out_of_scope(url, msg.depth, config, self.rules, chosen_by_rule=bool(msg.via))
        if reason and host not in config.seed_hosts:
            # A seed may have been added since the config was cached.
            fresh = self.crawls.get(msg.crawl_id, max_age=1.0)
            if fresh is not config:
                config = fresh
                reason = out_of_scope(url, msg.depth, config, self.rules, chosen_by_rule=bool(msg.via))
        if reason:
            return Decision(url, "dropped", reason)
        if msg.crawl_id in self._budget_spent:
            return Decision(url, "dropped", "page budget spent")
        if self._record_complete(msg):
            # Not a claim: the URL stays free for another record (or a seed
            # without one) that reaches it later.  Noted only where the crawl
            # has no item for it yet, so the crawl log says why it was not
            # fetched; a later claim takes the note over.
            self.urls.note_skip(msg.crawl_id, fingerprint(url), url, msg.depth, RECORD_COMPLETE)
            return Decision(url, "skipped", RECORD_COMPLETE)

        # robots.txt before the dedupe claim: a message put back to wait for
        # another dispatcher's robots.txt fetch comes back with a new message
        # id, and must find its URL unclaimed.
        policy = self._robots(url, config)
        if policy is None:
            outbox.frontier.append((msg.to_json(), ROBOTS_WAIT_SECONDS))
            return Decision(url, "retry", "robots.txt being fetched by another dispatcher")
        fp = fingerprint(url)
        # The record id goes with the claim: fetch gives the claim back only
        # while this record still holds it.
        if not self.urls.claim(msg.crawl_id, fp, url, msg.depth, claimer=message_id, record_id=msg.record_id):
            return Decision(url, "deduped")
        if not policy.allows(url, config.user_agent):
            self.urls.set_outcome(msg.crawl_id, fp, "skipped", reason=policy.disallow_reason())
            return Decision(url, "skipped", "robots")
        if config.max_pages is not None and not self.crawls.count_page(msg.crawl_id, config.max_pages):
            self._budget_spent.add(msg.crawl_id)
            self.urls.set_outcome(msg.crawl_id, fp, "skipped", reason=f"page budget of {config.max_pages} spent")
            return Decision(url, "skipped", "page budget spent")

        delay = config.host_delay(policy.crawl_delay(config.user_agent))
        task = FetchTask(
            url=url,
            fp=fp,
            host=host,
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
        admitted = self.politeness.admit(task, hold=self._hold_if_stopped)
        now = self.clock()
        for order, ready in admitted:
            outbox.add_fetch(ready, now, order)
        return Decision(url, "queued" if any(t.fp == fp for _, t in admitted) else "parked")

    def _hold_if_stopped(self, task: FetchTask) -> bool:
        """For parked tasks this dispatcher unparks: hold those of a stopped crawl instead of giving them slots."""
        if self.held is None or not self.crawls.get(task.crawl_id).stopped:
            return False
        return hold_task(self.held, task)

    def _robots(self, url: str, config: CrawlConfig) -> RobotsPolicy | None:
        origin = origin_of(url)
        policy = self._robots_cache.get(origin)
        if policy is not None and not policy.record.expired():
            return policy
        record = self.robots.get_robots(origin)
        if record is None:
            record = self._fetch_robots(origin, host_of(url), config)
            if record is None:
                return None
        policy = RobotsPolicy(record)
        self._robots_cache[origin] = policy
        return policy

    def _fetch_robots(self, origin: str, host: str, config: CrawlConfig) -> RobotsRecord | None:
        """Fetch and cache robots.txt as the one dispatcher doing so, holding the host like a fetch.

        None when another dispatcher is fetching it or the host is busy:
        the caller puts its message back for a moment.
        """
        now = self.clock()
        if not self.robots.lock_robots(origin, now + ROBOTS_LOCK_SECONDS):
            return None
        if not self._claim_for_robots(host):
            self.robots.unlock_robots(origin)
            return None
        finished = now
        delay = 0.0
        try:
            result = http.fetch_robots(origin, config.user_agent, http.AddressGuard(config.allow_private))
            finished = result.finished_at or self.clock()
            record = RobotsRecord.from_fetch(origin, result.status, result.body, result.error)
            self.robots.put_robots(record)
            if result.status is not None:
                # The robots.txt request counts against the host's delay too.
                delay = config.host_delay(RobotsPolicy(record).crawl_delay(config.user_agent))
        finally:
            self.robots.push_back(host, finished + delay)
        return record

    def _claim_for_robots(self, host: str) -> bool:
        """Claim the host; a gap of under a second after the last request is slept out.

        Slots are back to back on a busy host, so a refresh that only ever
        tried at random moments could wait a long time for a free one.
        """
        for _ in range(3):
            now = self.clock()
            blocked = self.robots.claim(host, now, now + ROBOTS_LOCK_SECONDS)
            if blocked is None:
                return True
            wait = blocked.free_at - now
            if blocked.in_flight or wait > SUB_SECOND:
                return False
            self.sleep(max(wait, 0.0))
        return False
