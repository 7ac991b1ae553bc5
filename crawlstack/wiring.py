"""Builds the domain services on the AWS adapters, once per container.

Handlers call ``services()``; local mode calls ``reset()`` between crawls,
which is what a fresh Lambda container would give.  The rules directory comes
from ``CRAWLSTACK_RULES_DIR`` and is compiled at cold start, so an invalid
rule fails the container at once, with its one-line reason, not page by page.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
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
    Enqueue,
    Outbox,
    RecordComplete,
    Robots,
    Scope,
)
from crawlstack.politeness import Politeness
from crawlstack.resolution import CompletedRecords
from crawlstack.rules import RuleSet, load_rules

if TYPE_CHECKING:
    # Each handler imports the one it uses: dispatch needs neither (nor WARCs, warcio), fetch no extractor.
    from crawlstack.extractor import Extractor
    from crawlstack.fetcher import Fetcher


@dataclass
class Services:
    rules: RuleSet
    # The stack's tables, queues and bucket, read once (``services()``).
    names: aws.StackNames

    @cached_property
    def crawls(self) -> aws.CrawlStore:
        return aws.CrawlStore(self.names.crawls)

    @cached_property
    def urls(self) -> aws.UrlStore:
        return aws.UrlStore(self.names.urls)

    @cached_property
    def hosts(self) -> aws.HostStore:
        return aws.HostStore(self.names.hosts)

    @cached_property
    def resolved(self) -> aws.ResolvedStore:
        return aws.ResolvedStore(self.names.resolved)

    @cached_property
    def completed(self) -> CompletedRecords:
        # One memory for dispatch and fetch: a record either of them saw
        # complete costs the other no read (completion never reverts).
        return CompletedRecords()

    @cached_property
    def held(self) -> aws.HeldStore:
        return aws.HeldStore(self.names.parked, self.names.crawls)

    @cached_property
    def politeness(self) -> Politeness:
        return Politeness(self.hosts, aws.ParkStore(self.names.parked))

    @cached_property
    def dispatcher(self) -> Dispatcher:
        # Each component with the stores it uses; Dispatcher puts them in their order.
        scope_records = aws.ScopeStore(self.names.hosts, self.names.urls)
        drops = DropNotes(scope_records)
        return Dispatcher(
            canonicalise=Canonicalise(drops),
            scope=Scope(self.crawls, self.rules, drops, held=self.held),
            limits=BudgetAndCaps(self.crawls, self.urls, scope_records),
            record_complete=RecordComplete(self.urls, self.resolved, self.completed),
            robots=Robots(self.hosts, self.urls),
            dedupe=Dedupe(self.urls),
            enqueue=Enqueue(self.politeness, self.crawls, held=self.held),
        )

    @cached_property
    def fetcher(self) -> Fetcher:
        from crawlstack.fetcher import Fetcher

        return Fetcher(
            self.urls,
            self.crawls,
            self.politeness,
            aws.BlobStore(self.names.bucket),
            resolved=self.resolved,
            completed=self.completed,
            held=self.held,
            send_now=self.flush,
        )

    @cached_property
    def extractor(self) -> Extractor:
        from crawlstack.extractor import Extractor

        return Extractor(
            self.crawls,
            aws.ResultStore(self.names.results),
            aws.BlobStore(self.names.bucket),
            self.rules,
            resolved=self.resolved,
            outcomes=self.urls,
        )

    @cached_property
    def fetch_queue(self) -> aws.Queue:
        return aws.Queue(self.names.fetch_queue, "fetch")

    @cached_property
    def frontier_queue(self) -> aws.Queue:
        return aws.Queue(self.names.frontier_queue, "frontier")

    def process_batch(
        self,
        event: dict[str, Any],
        context: Any,
        record_handler: Callable[[Any], None],
        outbox: Outbox,
        after_send: Callable[[], None] | None = None,
        logger: Any = None,
    ) -> PartialItemFailureResponse:
        """Run ``record_handler`` over an SQS batch (Powertools, partial failures), then send ``outbox``.

        What finished records produced goes out even if the batch as a whole
        fails: unparked tasks already hold places in their hosts' windows.
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
            self.flush(outbox)
            if after_send is not None:
                after_send()

    def flush(self, outbox: Outbox) -> None:
        """Send what a batch produced; parked URLs are deleted only once sent."""
        if outbox.fetch:
            self.fetch_queue.send(outbox.fetch)
        if outbox.frontier:
            self.frontier_queue.send(outbox.frontier)
        for host, orders in outbox.unparked.items():
            self.politeness.unparked(host, orders)


_services: Services | None = None
_lock = threading.Lock()


def services() -> Services:
    global _services
    with _lock:
        if _services is None:
            rules_dir = os.environ.get(settings.ENV_RULES_DIR)
            _services = Services(load_rules(rules_dir) if rules_dir else RuleSet(), aws.StackNames.from_env())
        return _services


def reset() -> None:
    global _services
    with _lock:
        _services = None
    aws.reset_clients()


def stop_crawl(crawl_id: str, names: aws.StackNames | None = None) -> None:
    """``crawlstack.jobs.stop`` on the stack ``names`` (default: the environment's) names (``crawl stop``)."""
    names = names or aws.StackNames.from_env()
    jobs.stop(crawl_id, aws.CrawlStore(names.crawls))


def resume_crawl(crawl_id: str, names: aws.StackNames | None = None) -> int:
    """``crawlstack.jobs.resume`` on the stack ``names`` (default: the environment's) names; held items sent back."""
    names = names or aws.StackNames.from_env()
    return jobs.resume(
        crawl_id,
        aws.CrawlStore(names.crawls),
        aws.HeldStore(names.parked, names.crawls),
        aws.Queue(names.frontier_queue, "frontier"),
        aws.Queue(names.fetch_queue, "fetch"),
        Politeness(aws.HostStore(names.hosts), aws.ParkStore(names.parked)),
    )
