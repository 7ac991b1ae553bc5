"""Dispatch: frontier message -> canonical, in-scope, new, robots-allowed URL -> fetch queue.

Steps, in order, for each message:

1. canonicalise the URL (``crawlstack.urls``); a URL that cannot be crawled
   is dropped with its reason ("invalid URL: bad percent-escape '%zz'");
2. scope (``crawlstack.scope``): seed hosts, mapping patterns, allow/deny,
   depth, then ports and trap-shaped URLs (``scope.refusal``); a depth-0
   message registers its host as a seed host, and an original seed (not a
   redirect) on a port other than 80 and 443 registers ``host:port``, which
   allows that port on that host;
   a message for a record (``record_id`` and ``want``) already complete
   (``crawlstack.resolution``) is skipped, before any robots.txt request,
   without taking the URL's claim (another record may still need the page);
3. robots.txt (``crawlstack.robots``), cached per origin in the hosts table
   and in the container;
4. dedupe: a conditional put on the urls table, so a URL goes to fetch once
   per crawl however many dispatchers race (a redelivered message may claim
   its own URL again, and any message a URL that a complete record passed
   over unfetched); a robots.txt disallow is recorded as its outcome;
5. the per-host cap (``max_pages_per_host``: one conditional counter per
   crawl and host name) and the page budget (``max_pages``);
6. politeness (``crawlstack.politeness``): a slot in the host's window, or
   parked behind it.

A message of a stopped crawl (``crawlstack.jobs``) is held, before step 2,
for ``resume`` to send back; it takes no claim.

Each outcome of a URL that passed dedupe is written to the urls table.  A
URL dropped before dedupe for what it is (invalid, out of scope, a port not
allowed, a trap shape) is noted there as ``dropped`` with its reason, only
where the crawl has no item for it yet and taken over by a later claim
(``ScopeRecords.note_drop``), so the crawl log says why; the container
remembers what it noted (``settings.DROPPED_NOTE_CACHE_SIZE``), so a link
repeated on every page costs one write, not one per copy.  Such URLs are
never fetched, so they bring no more links: the notes cost no more than the
claims they stand in for.  A URL dropped because the budget or its host's
cap is spent is not noted: every link of every page already fetched would
cost a write, more than the crawl; the first URL over the limit in each
container is claimed and skipped with the reason instead.  ``Decision.kind``
classes each drop for the handler's metrics.

The per-host counter is taken ``settings.HOST_CAP_CHUNK`` pages at a time
(one conditional write per chunk, not per URL); the container admits the
rest of a chunk from memory, and a chunk cut short (near the cap) falls back
to one page at a time.  Pages a container took and never used (it was
recycled) are lost to the host: a host may get a little less than its cap,
never more.

The page budget is taken the same way, sized by what it has left: each
take's reply gives the count admitted, and the next take asks for at most
1/``settings.BUDGET_CHUNK_SHARE`` of the rest (at most
``settings.BUDGET_CHUNK``; one page at first and near the end).  A
recycled container takes at most that share with it, so a crawl may stop a
little short of its budget, never over it.

Limits: the per-host counter is not idempotent.  A message redelivered after
it was counted (its dispatcher failed before the batch finished) counts
again, so a host may get a little less than its cap, never more.

Record completion is read once per batch (``prepare``, one batched read for
the batch's record ids); a record seen complete is remembered by the
container (``CompletedRecords``, shared with fetch), since completion never
reverts.  Messages without ``record_id`` and ``want`` cost no read.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from crawlstack import http, settings
from crawlstack.config import CrawlConfig, seed_port_key
from crawlstack.headers import parse_retry_after
from crawlstack.jobs import Held, hold_message, hold_task
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.politeness import SUB_SECOND, Blocked, Politeness, sqs_delay, window_size
from crawlstack.resolution import RECORD_COMPLETE, CompletedRecords, ResolvedRecords, read_complete
from crawlstack.robots import RobotsPolicy, RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.scope import out_of_scope, refusal
from crawlstack.urls import InvalidURL, canonicalize, fingerprint, host_of, origin_of, url_port

K = TypeVar("K", bound=Hashable)

ROBOTS_LOCK_SECONDS = 30.0
ROBOTS_WAIT_SECONDS = 2


class Crawls(Protocol):
    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig: ...
    def add_seed_host(self, crawl_id: str, host: str) -> None: ...
    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None: ...


class Urls(Protocol):
    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> bool: ...
    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...
    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...


class ScopeRecords(Protocol):
    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool: ...
    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...


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

    def clear(self) -> None:
        """Forget what was sent (``dispatch_in_turns`` sends part of a batch early)."""
        self.fetch.clear()
        self.frontier.clear()
        self.unparked.clear()


@dataclass
class Decision:
    """What became of one message, for logs and metrics."""

    url: str
    action: str  # queued | parked | dropped | skipped | deduped | retry | held
    reason: str = ""
    # Why a URL was dropped or skipped, as a class for metrics:
    # invalid | scope | port | trap | host-cap | budget | robots | record-complete.
    kind: str = ""


# Turns after which dispatch_in_turns sends what it admitted, however little:
# they give each host its first window places.
EARLY_TURNS = 2
# After those, what it admitted waits at most this long for a full
# SendMessageBatch: a long batch must not hold tasks past their slots.
EARLY_SEND_SECONDS = 0.2


def dispatch_in_turns(
    dispatcher: Dispatcher,
    batch: Iterable[tuple[K, str, list[FrontierMessage]]],
    outbox: Outbox,
    send: Callable[[Outbox], None],
    on_decision: Callable[[FrontierMessage, Decision], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    before: Callable[[FrontierMessage], None] | None = None,
) -> dict[K, Exception]:
    """Dispatch a batch's messages a link at a time from each: the first link of every message, then the second...

    ``batch``: (key, message id, links) per queue message (a bundle's links,
    or one message).  Each page's links come as one bundle, mostly of one
    host; taken bundle by bundle, the last host's first links would wait
    for every earlier bundle's, and their fetches for the whole batch.  In
    turns, every host gets its first window places at once, and those tasks
    are sent after each of the first ``EARLY_TURNS`` turns; later ones once
    a full SendMessageBatch is ready or ``EARLY_SEND_SECONDS`` after the
    last send, so a long batch holds no task long past its slot.
    ``outbox`` keeps the rest for the batch's own send.  Sending early loses nothing: a task sent is one that
    holds a window place, which must go out anyway.

    ``before`` is called with each link before it is dispatched (the
    handler binds its log keys), ``on_decision`` with what became of it.

    Returns the exception of each message one of whose links failed; its
    later links are not dispatched (its redelivery finds the ones before
    claimed by its own id).  ``send`` failing raises: the whole batch is
    then tried again, as when the batch's own send fails.
    """
    failed: dict[K, Exception] = {}
    pending = [(key, message_id, iter(links)) for key, message_id, links in batch]
    turn = 0
    sent_at = clock()
    while pending:
        turn += 1
        still = []
        for key, message_id, links in pending:
            msg = next(links, None)
            if msg is None:
                continue
            if before is not None:
                before(msg)
            try:
                decision = dispatcher.dispatch(msg, outbox, message_id=message_id)
            except Exception as exc:  # this message fails; the batch goes on
                failed[key] = exc
                continue
            if on_decision is not None:
                on_decision(msg, decision)
            still.append((key, message_id, links))
        pending = still
        if not outbox.fetch:
            continue
        now = clock()
        if turn <= EARLY_TURNS or len(outbox.fetch) >= settings.SQS_BATCH_SIZE or now - sent_at >= EARLY_SEND_SECONDS:
            send(outbox)
            outbox.clear()
            sent_at = now
    return failed


def _refusal_kind(reason: str) -> str:
    return "trap" if reason.startswith("trap:") else "port"


class NotedDrops:
    """A bounded, least-recently-used memory of the URLs this container noted as dropped."""

    def __init__(self, size: int = settings.DROPPED_NOTE_CACHE_SIZE) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()
        # Local mode runs two dispatch invocations at once on one container's state.
        self._lock = threading.Lock()

    def add(self, crawl_id: str, fp: str) -> bool:
        """Remember the URL; False if it was remembered already."""
        key = (crawl_id, fp)
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)
            return True


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
        scope_records: ScopeRecords | None = None,
    ) -> None:
        self.crawls = crawls
        # Without it (some unit tests) there is no per-host cap and no drop notes.
        self.scope_records = scope_records
        self._noted = NotedDrops()
        # Crawl and host pairs this container saw at their cap.
        self._host_full: set[tuple[str, str]] = set()
        # Pages of a host's cap this container took ahead and has yet to admit.
        self._host_allowance: dict[tuple[str, str], int] = {}
        # Pairs whose last chunk did not fit under the cap: one page at a time from there.
        self._host_near_cap: set[tuple[str, str]] = set()
        # Per crawl: pages of the budget this container took ahead and has yet
        # to admit, and how many its next take asks for.
        self._budget_allowance: dict[str, int] = {}
        self._budget_chunk: dict[str, int] = {}
        # Local mode runs two dispatch invocations on this state at once: an
        # allowance read by both would be spent twice, or lost.
        self._allowance_lock = threading.Lock()
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
            # Not a URL the crawl can key: noted under the fingerprint of what was sent.
            return self._drop(msg, msg.url, f"invalid URL: {exc}", "invalid")
        config = self.crawls.get(msg.crawl_id)
        # The hold is conditional on the crawl being stopped in the table, so a
        # stale cached state costs one failed write and nothing else.
        if config.stopped and self.held is not None and hold_message(self.held, msg):
            return Decision(url, "held", "crawl stopped")
        host = host_of(url)
        config = self._register_seed(msg, url, host, config)
        reason = out_of_scope(url, msg.depth, config, self.rules, chosen_by_rule=bool(msg.via))
        refused = None if reason else refusal(url, config)
        if (reason and host not in config.seed_hosts) or (refused and not refused.startswith("trap:")):
            # A seed (or a seed's port) may have been added since the config was cached.
            fresh = self.crawls.get(msg.crawl_id, max_age=1.0)
            if fresh is not config:
                config = fresh
                reason = out_of_scope(url, msg.depth, config, self.rules, chosen_by_rule=bool(msg.via))
                refused = None if reason else refusal(url, config)
        if reason:
            return self._drop(msg, url, reason, "scope")
        if refused and not (refused.startswith("trap:") and msg.depth == 0 and msg.hops == 0):
            # A seed is taken as the user wrote it, whatever its shape.
            return self._drop(msg, url, refused, _refusal_kind(refused))
        if msg.crawl_id in self._budget_spent:
            return self._drop(msg, url, "page budget spent", "budget", noted=False)
        cap = config.max_pages_per_host
        if cap is not None and (msg.crawl_id, host) in self._host_full:
            return self._drop(msg, url, f"host page cap of {cap} reached", "host-cap", noted=False)
        if self._record_complete(msg):
            # Not a claim: the URL stays free for another record (or a seed
            # without one) that reaches it later.  Noted only where the crawl
            # has no item for it yet, so the crawl log says why it was not
            # fetched; a later claim takes the note over.
            self.urls.note_skip(msg.crawl_id, fingerprint(url), url, msg.depth, RECORD_COMPLETE)
            return Decision(url, "skipped", RECORD_COMPLETE, "record-complete")

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
            return Decision(url, "skipped", "robots", "robots")
        # The host's cap before the crawl's budget: a trap host that reached
        # its cap spends none of the budget.
        if cap is not None and self.scope_records is not None and not self._take_host_page(msg.crawl_id, host, cap):
            if len(self._host_full) > settings.DROPPED_NOTE_CACHE_SIZE:
                self._host_full.clear()
            self._host_full.add((msg.crawl_id, host))
            self.urls.set_outcome(msg.crawl_id, fp, "skipped", reason=f"host page cap of {cap} reached")
            return Decision(url, "skipped", f"host page cap of {cap} reached", "host-cap")
        if config.max_pages is not None and not self._take_budget_page(msg.crawl_id, config.max_pages):
            self._budget_spent.add(msg.crawl_id)
            self.urls.set_outcome(msg.crawl_id, fp, "skipped", reason=f"page budget of {config.max_pages} spent")
            return Decision(url, "skipped", "page budget spent", "budget")

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
        admitted = self.politeness.admit(task, hold=self._hold_if_stopped, stopped=self._stopped)
        now = self.clock()
        for order, ready in admitted:
            outbox.add_fetch(ready, now, order)
        return Decision(url, "queued" if any(t.fp == fp for _, t in admitted) else "parked")

    def _take_host_page(self, crawl_id: str, host: str, cap: int) -> bool:
        """One page of the host's cap: from what this container took ahead, else a chunk, else one."""
        with self._allowance_lock:
            return self._take_host_page_locked(crawl_id, host, cap)

    def _take_host_page_locked(self, crawl_id: str, host: str, cap: int) -> bool:
        assert self.scope_records is not None
        key = (crawl_id, host)
        left = self._host_allowance.pop(key, 0)
        if left:
            self._host_allowance[key] = left - 1
            return True
        chunk = 1 if key in self._host_near_cap else min(settings.HOST_CAP_CHUNK, cap)
        if chunk > 1:
            if self.scope_records.count_host_page(crawl_id, host, cap, chunk):
                if len(self._host_allowance) >= settings.DROPPED_NOTE_CACHE_SIZE:
                    self._host_allowance.clear()  # forgotten pages are never admitted: less than the cap, never more
                self._host_allowance[key] = chunk - 1
                return True
            if len(self._host_near_cap) >= settings.DROPPED_NOTE_CACHE_SIZE:
                self._host_near_cap.clear()
            self._host_near_cap.add(key)
        return self.scope_records.count_host_page(crawl_id, host, cap)

    def _take_budget_page(self, crawl_id: str, max_pages: int) -> bool:
        """One page of the crawl's budget: from what this container took ahead, else a take sized by what is left.

        The first take is one page; each take's reply says how many pages the
        budget has left, and the next asks for at most 1/BUDGET_CHUNK_SHARE of
        them (at most BUDGET_CHUNK).  A take refused for its size falls back to
        one page.
        """
        with self._allowance_lock:
            return self._take_budget_page_locked(crawl_id, max_pages)

    def _take_budget_page_locked(self, crawl_id: str, max_pages: int) -> bool:
        left = self._budget_allowance.pop(crawl_id, 0)
        if left:
            self._budget_allowance[crawl_id] = left - 1
            return True
        chunk = self._budget_chunk.pop(crawl_id, 1)
        admitted = self.crawls.take_pages(crawl_id, max_pages, chunk)
        if admitted is None and chunk > 1:
            chunk = 1
            admitted = self.crawls.take_pages(crawl_id, max_pages, chunk)
        if admitted is None:
            return False
        if len(self._budget_chunk) >= settings.DROPPED_NOTE_CACHE_SIZE:
            # Forgotten pages are never admitted: less than the budget, never more.
            self._budget_chunk.clear()
            self._budget_allowance.clear()
        share = (max_pages - admitted) // settings.BUDGET_CHUNK_SHARE
        self._budget_chunk[crawl_id] = max(1, min(settings.BUDGET_CHUNK, share))
        if chunk > 1:
            self._budget_allowance[crawl_id] = chunk - 1
        return True

    def _register_seed(self, msg: FrontierMessage, url: str, host: str, config: CrawlConfig) -> CrawlConfig:
        """A depth-0 message makes its host a seed host; an original seed on another port allows that port there.

        A seed's redirect (hops > 0) adds its host, as before, but not its
        port: a redirect to another port needs ``allow_ports``.
        """
        if msg.depth != 0:
            return config
        added = False
        if host not in config.seed_hosts:
            self.crawls.add_seed_host(msg.crawl_id, host)
            added = True
        port = url_port(url)
        if msg.hops == 0 and port not in settings.DEFAULT_PORTS:
            key = seed_port_key(host, port)
            if key not in config.seed_hosts:
                self.crawls.add_seed_host(msg.crawl_id, key)
                added = True
        return self.crawls.get(msg.crawl_id, max_age=0) if added else config

    def _drop(self, msg: FrontierMessage, url: str, reason: str, kind: str, noted: bool = True) -> Decision:
        """Drop a URL before dedupe, noting it (once per container) for the crawl log unless ``noted`` is False."""
        if noted and self.scope_records is not None:
            fp = fingerprint(url)
            if self._noted.add(msg.crawl_id, fp):
                # The URL as noted is bounded: an invalid one may be any length.
                shown = url if len(url) <= settings.MAX_URL_LENGTH else url[: settings.MAX_URL_LENGTH] + "…"
                self.scope_records.note_drop(msg.crawl_id, fp, shown, msg.depth, reason)
        return Decision(url, "dropped", reason, kind)

    def _stopped(self, task: FetchTask) -> bool:
        """Whether the task's crawl is stopped and its tasks are held (a cached read)."""
        return self.held is not None and self.crawls.get(task.crawl_id).stopped

    def _hold_if_stopped(self, task: FetchTask) -> bool:
        """For parked tasks this dispatcher unparks: hold those of a stopped crawl instead of giving them slots."""
        if self.held is None or not self._stopped(task):
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
            retry_after = parse_retry_after(result.header("retry-after"), finished)
            record = RobotsRecord.from_fetch(origin, result.status, result.body, result.error, retry_after)
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
