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
    Outbox,
    RecordComplete,
    Robots,
    RunEnqueue,
    Scope,
    flush_runs,
)
from crawlstack.messages import RunMessage
from crawlstack.resolution import CompletedRecords
from crawlstack.rules import RuleSet, load_rules

if TYPE_CHECKING:
    # Each handler imports the one it uses: dispatch needs neither (nor WARCs, warcio), fetch no extractor.
    from crawlstack.extractor import Extractor
    from crawlstack.runs.runner import HostRunner


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
    def runs(self) -> aws.RunStore:
        return aws.RunStore(self.names.hosts)

    @cached_property
    def backlog(self) -> aws.BacklogStore:
        return aws.BacklogStore(self.names.parked)

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
            aws.BlobStore(self.names.bucket),
            robots=self.hosts,
            resolved=self.resolved,
            completed=self.completed,
            held=self.held,
            # Redirects go out at each flush, wake-ups as each host is released: not at the invocation's end.
            send_frontier=self.frontier_queue.send,
            send_runs=self.fetch_queue.send,
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


_services: Services | None = None
_lock = threading.Lock()


def services() -> Services:
    global _services
    with _lock:
        if _services is None:
            rules_dir = os.environ.get(settings.ENV_RULES_DIR)
            _services = Services(load_rules(rules_dir) if rules_dir else RuleSet(), aws.StackNames.from_env())
        return _services


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


def stop_crawl(crawl_id: str, names: aws.StackNames | None = None) -> None:
    """``crawlstack.jobs.stop`` on the stack ``names`` (default: the environment's) names (``crawl stop``)."""
    names = names or aws.StackNames.from_env()
    jobs.stop(crawl_id, aws.CrawlStore(names.crawls))


def resume_crawl(crawl_id: str, names: aws.StackNames | None = None) -> int:
    """``crawlstack.jobs.resume`` on the stack ``names`` (default: the environment's) names; held items sent back."""
    names = names or aws.StackNames.from_env()
    fetch = aws.Queue(names.fetch_queue, "fetch")
    return jobs.resume(
        crawl_id,
        aws.CrawlStore(names.crawls),
        aws.HeldStore(names.parked, names.crawls),
        aws.Queue(names.frontier_queue, "frontier"),
        aws.BacklogStore(names.parked),
        aws.RunStore(names.hosts),
        lambda messages: fetch.send((msg.to_json(), 0) for msg in messages),
    )
