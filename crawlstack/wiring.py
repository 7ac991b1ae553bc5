"""Builds the domain services on the AWS adapters, once per container.

Handlers call ``services()``; local mode calls ``reset()`` between crawls,
which is what a fresh Lambda container would give.  The rules directory comes
from ``CRAWLSTACK_RULES_DIR`` and is compiled at cold start, so an invalid
rule fails the container at once, with its one-line reason, not page by page.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

from crawlstack import aws, jobs, settings
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
from crawlstack.messages import RunMessage
from crawlstack.ports import Blobs, Crawls, Hosts, Results, Urls
from crawlstack.queueing import MessageQueue
from crawlstack.resolution import CompletedRecords, ResolvedRecords
from crawlstack.rules import RuleSet, load_rules
from crawlstack.runs.ports import Backlog, Runs

if TYPE_CHECKING:
    # Each handler imports the one it uses: dispatch needs neither (nor WARCs, warcio), fetch no extractor.
    from crawlstack.extract import Extractor
    from crawlstack.local import sqlite as local
    from crawlstack.runs.runner import HostRunner
    from crawlstack.watch.pages import CheckPages


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
    # Local mode's journal of page requests (``HostRunner.on_request``), for resuming after a kill.
    journal: local.SqliteJournal | None = None
    # Local mode's pump: True when nothing but the fetch invocations can bring work (``HostRunner``).
    settled: Callable[[], bool] | None = None
    # How often host runs write: a write costs more on AWS than on the local backend.
    pacing: settings.RunPacing = settings.DEPLOYED_PACING
    # Local mode's backlog wakes a lingering host as its tasks are added (``HostRunner``).
    wait_for_tasks: Callable[[str, float], object] | None = None
    # A watch's extract side (crawlstack.watch.pages), given the frontier queue's send; None outside a watch.
    checks: Callable[[Callable[[list[str]], object]], CheckPages] | None = None
    # A deployed watch's sources and schedule (the schedule function's), and the bus new items go to.
    sources: aws.DynamoSources | None = None
    plans: aws.DynamoWatch | None = None
    event_bus: aws.EventBus | None = None

    @classmethod
    def on_aws(cls, names: aws.StackNames, connection: aws.Connection = aws.ENVIRONMENT) -> Stores:
        """The AWS adapters on the stack ``names`` names, their calls through ``connection``."""
        return cls(
            crawls=aws.CrawlStore(names.crawls, connection=connection),
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
            **_watch_on_aws(names, connection),
        )


@dataclass
class Services:
    rules: RuleSet
    # The stores, built once (``services()``): a Lambda's from the stack's names, local mode's its own.
    stores: Stores

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
        from crawlstack.runs.runner import HostRunner

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
            on_request=self.stores.journal.started if self.stores.journal is not None else None,
            settled=self.stores.settled,
            pacing=self.stores.pacing,
            wait_for_tasks=self.stores.wait_for_tasks,
        )

    @cached_property
    def extractor(self) -> Extractor:
        from crawlstack.extract import Extractor

        frontier = self.stores.frontier_queue
        checks = (
            self.stores.checks(lambda bodies: frontier.send([(b, 0) for b in bodies])) if self.stores.checks else None
        )
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

    def process_batch(
        self,
        event: dict[str, Any],
        context: Any,
        record_handler: Callable[[Any], None],
        outbox: Outbox | None = None,
        after_send: Callable[[], None] | None = None,
        logger: Any = None,
    ) -> PartialItemFailureResponse:
        """Run ``record_handler`` over an SQS batch (Powertools, partial failures), then send ``outbox`` if given.

        What finished records produced goes out even if the batch as a whole
        fails: their URLs are claimed, and a redelivery would not admit them again.
        ``after_send`` runs only once the sends succeeded.  Each failed
        message is logged on ``logger`` with its one-line reason and receive
        count, so a message that ends in the DLQ has its reason in the logs.
        """

        def logged(record: Any) -> None:
            try:
                record_handler(record)
            except Exception as exc:
                if logger is not None:
                    text = str(exc).splitlines()[0] if str(exc) else ""
                    logger.warning(
                        "message failed, to be retried",
                        message_id=record.message_id,
                        receive_count=record.attributes.approximate_receive_count,
                        reason=f"{type(exc).__name__}: {text}",
                    )
                raise

        try:
            return process_partial_response(
                event=event,
                record_handler=logged,
                # One processor per invocation: it holds the batch's state, and
                # local mode runs several invocations of one function at once.
                processor=BatchProcessor(event_type=EventType.SQS),
                context=context,
            )
        finally:
            if outbox is not None:
                self.flush(outbox)
            if after_send is not None:
                after_send()

    def flush(self, outbox: Outbox) -> None:
        """Send what a dispatch batch produced: frontier re-sends, then its tasks into their hosts' runs."""
        if outbox.frontier:
            self.frontier_queue.send(outbox.frontier)
        flush_runs(outbox, self.backlog, self.runs, self.send_runs)

    def send_runs(self, messages: list[RunMessage], delay: int = 0) -> None:
        self.fetch_queue.send((msg.to_json(), delay) for msg in messages)


def _watch_on_aws(names: aws.StackNames, connection: aws.Connection) -> dict[str, Any]:
    """The watch's stores on the watch table, where the stack has one; its events on the stack's bus."""
    if not names.watch:
        return {}
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

    return {
        "checks": checks,
        "sources": aws.DynamoSources(names.watch, connection=connection),
        "plans": aws.DynamoWatch(names.watch, blobs, connection=connection),
        "event_bus": bus,
    }


_services: Services | None = None
# Local mode's backend, when it installed one (``use``); None: the AWS adapters on the environment's names.
_stores: Callable[[], Stores] | None = None
_lock = threading.Lock()


def services() -> Services:
    global _services
    with _lock:
        if _services is None:
            rules_dir = os.environ.get(settings.ENV_RULES_DIR)
            stores = _stores() if _stores is not None else Stores.on_aws(aws.StackNames.from_env())
            _services = Services(load_rules(rules_dir) if rules_dir else RuleSet(), stores)
        return _services


def use(stores: Callable[[], Stores] | None) -> None:
    """Build the services on ``stores()`` from now on (local mode's backend); None: back to the AWS adapters."""
    global _stores
    reset()
    with _lock:
        _stores = stores


def stop_runs() -> None:
    """Stop the host runs in flight at their next wait (local mode's Ctrl-C); nothing if none were built."""
    with _lock:
        svc = _services
    if svc is not None and "runner" in svc.__dict__:
        svc.runner.stop()


def reset() -> None:
    global _services
    with _lock:
        _services = None
    aws.reset_clients()


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
    stores = Stores.on_aws(names, connection)
    return jobs.resume(
        crawl_id,
        stores.crawls,
        stores.held,
        stores.frontier_queue,
        stores.backlog,
        stores.runs,
        lambda messages: stores.fetch_queue.send((msg.to_json(), 0) for msg in messages),
    )
