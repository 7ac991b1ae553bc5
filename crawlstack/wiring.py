"""The composition root: the domain services built on one backend's stores, handed to whoever runs them.

A Lambda builds its ``Services`` once per container, from the settings it
read from its environment (``crawlstack.lambdas.environment``), and keeps
them in its entry point (``functions/``); local mode builds them on its own
stores for each crawl (``crawlstack.local.services``).  Nothing here is
global: each handler body is given the services it runs on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from crawlstack import aws, jobs, settings
from crawlstack.config import CrawlConfig
from crawlstack.dispatch import (
    BudgetAndCaps,
    Canonicalise,
    Dedupe,
    Dispatcher,
    DropNotes,
    Outbox,
    RecordComplete,
    Robots,
    RunEnqueue,
    Scope,
    ScopeRecords,
    flush_runs,
)
from crawlstack.jobs import Held
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.ports import Blobs, Crawls, Hosts, Results, Urls
from crawlstack.queueing import MessageQueue
from crawlstack.records.resolution import CompletedRecords, ResolvedRecords
from crawlstack.rules import RuleSet
from crawlstack.runs.ports import Backlog, Runs

if TYPE_CHECKING:
    # Each handler imports the one it uses: dispatch needs neither (nor WARCs, warcio), fetch no extractor.
    from crawlstack.extract import Extractor
    from crawlstack.fetch.host_runner import HostRunner
    from crawlstack.watch.pages import CheckPages
    from crawlstack.watch.scheduler import PlanStore, SourceList


@dataclass(frozen=True)
class Stores:
    """Every table, queue and bucket the handlers use, on one backend: AWS (``on_aws``) or local mode's own.

    Each field is a port (``crawlstack.ports``) with two implementations under one
    conformance suite (``tests/integration/test_*_port.py``); mypy checks each
    implementation against its port where it is wired here.
    """

    crawls: Crawls
    urls: Urls
    hosts: Hosts
    resolved: ResolvedRecords
    held: Held
    runs: Runs
    backlog: Backlog
    scope: ScopeRecords
    results: Results
    blobs: Blobs
    frontier_queue: MessageQueue
    fetch_queue: MessageQueue
    extract_queue: MessageQueue
    # By queue key, where the backend knows them (a Lambda is not told its DLQs).
    dead_letter: Mapping[str, MessageQueue] = field(default_factory=dict)

    @classmethod
    def on_aws(
        cls,
        names: aws.StackNames,
        crawl_defaults: CrawlConfig | None = None,
        connection: aws.Connection = aws.ENVIRONMENT,
    ) -> Stores:
        """The stack ``names``' adapters, their calls through ``connection``; a crawl's config is read with
        ``crawl_defaults`` (the stack's)."""
        return cls(
            crawls=aws.CrawlStore(names.crawls, defaults=crawl_defaults, connection=connection),
            urls=aws.UrlStore(names.urls, connection=connection),
            hosts=aws.HostStore(names.hosts, connection=connection),
            resolved=aws.ResolvedStore(names.resolved, connection=connection),
            held=aws.HeldStore(names.parked, names.crawls, connection=connection),
            runs=aws.RunStore(names.hosts, connection=connection),
            backlog=aws.BacklogStore(names.parked, connection=connection),
            scope=aws.ScopeStore(names.hosts, names.urls, connection=connection),
            results=aws.ResultStore(names.results, connection=connection),
            blobs=aws.BlobStore(names.bucket, connection=connection),
            frontier_queue=aws.Queue(names.frontier_queue, "frontier", connection=connection),
            fetch_queue=aws.Queue(names.fetch_queue, "fetch", connection=connection),
            extract_queue=aws.Queue(names.extract_queue, "extract", connection=connection),
            dead_letter={
                key: aws.Queue(url, f"{key} DLQ", connection=connection)
                for key, url in names.dead_letter_queues.items()
            },
        )


@dataclass(frozen=True)
class WatchPorts:
    """A watch's side of the pipeline, where the backend has one (the stack's watch table, or local mode's state).

    ``checks`` builds extract's side (``crawlstack.watch.pages``) on the frontier
    queue's send; ``sources`` and ``plans`` are what the schedule function ticks
    over; ``event_bus`` is where new items go on the stack (None: local mode's outbox).
    """

    checks: Callable[[Callable[[list[str]], object]], CheckPages]
    sources: SourceList | None = None
    plans: PlanStore | None = None
    event_bus: aws.EventBus | None = None


@dataclass(frozen=True)
class RunHooks:
    """What a backend tells the host runs beside its stores (``HostRunner``); a Lambda's are these defaults.

    Local mode's (``crawlstack.local.backend.LocalState.run_hooks``): its journal of
    requests (``on_request``), its pump's ``settled``, its pacing, and its
    backlog's wake-up as tasks are added (``wait_for_tasks``).
    """

    on_request: Callable[[FetchTask], object] | None = None
    settled: Callable[[], bool] | None = None
    # How often host runs write: a write costs more on AWS than on the local backend.
    pacing: settings.RunPacing = settings.DEPLOYED_PACING
    wait_for_tasks: Callable[[str, float], object] | None = None


@dataclass
class Services:
    """One container's services: each component built on first use, with the stores it uses."""

    rules: RuleSet
    stores: Stores
    watch: WatchPorts | None = None
    run_hooks: RunHooks = field(default_factory=RunHooks)
    _done: set[str] = field(default_factory=set, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def once(self, key: str, do: Callable[[], object]) -> None:
        """Run ``do`` the first time this container is asked ``key``; again if it raised."""
        with self._lock:
            if key in self._done:
                return
            do()
            self._done.add(key)

    @property
    def crawls(self) -> Crawls:
        return self.stores.crawls

    @property
    def urls(self) -> Urls:
        return self.stores.urls

    @property
    def hosts(self) -> Hosts:
        return self.stores.hosts

    @property
    def resolved(self) -> ResolvedRecords:
        return self.stores.resolved

    @cached_property
    def completed(self) -> CompletedRecords:
        # One memory for dispatch and fetch: a record either of them saw
        # complete costs the other no read (completion never reverts).
        return CompletedRecords()

    @property
    def held(self) -> Held:
        return self.stores.held

    @property
    def runs(self) -> Runs:
        return self.stores.runs

    @property
    def backlog(self) -> Backlog:
        return self.stores.backlog

    @cached_property
    def dispatcher(self) -> Dispatcher:
        # Each component with the stores it uses; Dispatcher puts them in their order.
        scope_records = self.stores.scope
        drops = DropNotes(scope_records)
        return Dispatcher(
            canonicalise=Canonicalise(drops),
            scope=Scope(self.crawls, self.rules, drops, held=self.held),
            limits=BudgetAndCaps(self.crawls, self.urls, scope_records),
            record_complete=RecordComplete(self.urls, self.resolved, self.completed),
            robots=Robots(self.hosts, self.urls),
            dedupe=Dedupe(self.urls),
            enqueue=RunEnqueue(),
        )

    @cached_property
    def runner(self) -> HostRunner:
        from crawlstack.fetch.host_runner import HostRunner

        return HostRunner(
            self.runs,
            self.backlog,
            self.urls,
            self.crawls,
            self.stores.blobs,
            robots=self.hosts,
            resolved=self.resolved,
            completed=self.completed,
            held=self.held,
            # Redirects go out at each flush, wake-ups as each host is released: not at the invocation's end.
            send_frontier=self.frontier_queue.send,
            send_runs=self.fetch_queue.send,
            on_request=self.run_hooks.on_request,
            settled=self.run_hooks.settled,
            pacing=self.run_hooks.pacing,
            wait_for_tasks=self.run_hooks.wait_for_tasks,
        )

    @cached_property
    def extractor(self) -> Extractor:
        from crawlstack.extract import Extractor

        frontier = self.stores.frontier_queue
        watch = self.watch
        checks = watch.checks(lambda bodies: frontier.send([(b, 0) for b in bodies])) if watch else None
        return Extractor(
            self.crawls,
            self.stores.results,
            self.stores.blobs,
            self.rules,
            resolved=self.resolved,
            outcomes=self.urls,
            checks=checks,
        )

    @property
    def fetch_queue(self) -> MessageQueue:
        return self.stores.fetch_queue

    @property
    def frontier_queue(self) -> MessageQueue:
        return self.stores.frontier_queue

    def flush(self, outbox: Outbox) -> None:
        """Send what a dispatch batch produced: frontier re-sends, then its tasks into their hosts' runs."""
        if outbox.frontier:
            self.frontier_queue.send(outbox.frontier)
        flush_runs(outbox, self.backlog, self.runs, self.send_runs)

    def send_runs(self, messages: list[RunMessage], delay: int = 0) -> None:
        self.fetch_queue.send((msg.to_json(), delay) for msg in messages)


def watch_on_aws(names: aws.StackNames, connection: aws.Connection = aws.ENVIRONMENT) -> WatchPorts | None:
    """The watch's stores on the watch table, where the stack has one; its events on the stack's bus."""
    if not names.watch:
        return None
    blobs = aws.BlobStore(names.bucket, connection=connection)
    bus = aws.EventBus(names.event_bus, blobs, connection=connection) if names.event_bus else None

    def publish(events: list[dict[str, Any]], went: Callable[[list[dict[str, Any]]], object]) -> None:
        if bus is None:
            raise RuntimeError(f"no event bus to publish new items on: {settings.ENV_EVENT_BUS} is not set")
        bus.publish(events, went)

    def checks(send: Callable[[list[str]], object]) -> CheckPages:
        from crawlstack.watch.pages import CheckPages

        seen = aws.SeenItems(names.watch, publish, connection=connection)
        store = aws.DynamoWatch(names.watch, blobs, seen, connection=connection)
        return CheckPages(aws.DynamoSources(names.watch, connection=connection), store, send, time.time)

    return WatchPorts(
        checks=checks,
        sources=aws.DynamoSources(names.watch, connection=connection),
        plans=aws.DynamoWatch(names.watch, blobs, connection=connection),
        event_bus=bus,
    )


def stop_runs(services: Services) -> None:
    """Stop the host runs in flight at their next wait (local mode's Ctrl-C); nothing if none were built."""
    if "runner" in services.__dict__:
        services.runner.stop()


def stop_crawl(
    crawl_id: str, names: aws.StackNames | None = None, connection: aws.Connection = aws.ENVIRONMENT
) -> None:
    """``crawlstack.jobs.stop`` on the stack ``names`` (default: the environment's) names (``crawl stop``)."""
    names = names or aws.StackNames.from_env()
    jobs.stop(crawl_id, aws.CrawlStore(names.crawls, connection=connection))


def resume_crawl(
    crawl_id: str, names: aws.StackNames | None = None, connection: aws.Connection = aws.ENVIRONMENT
) -> int:
    """``crawlstack.jobs.resume`` on the stack ``names`` (default: the environment's) names; held items sent back."""
    names = names or aws.StackNames.from_env()
    stores = Stores.on_aws(names, connection=connection)
    return jobs.resume(
        crawl_id,
        stores.crawls,
        stores.held,
        stores.frontier_queue,
        stores.backlog,
        stores.runs,
        lambda messages: stores.fetch_queue.send((msg.to_json(), 0) for msg in messages),
    )
