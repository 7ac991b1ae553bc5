"""A Dispatcher built as crawlstack.wiring builds it, on whichever stores a test gives."""

from __future__ import annotations

import time
from collections.abc import Callable

from crawlstack.dispatch import (
    BudgetAndCaps,
    Canonicalise,
    Crawls,
    Dedupe,
    Dispatcher,
    DropNotes,
    RecordComplete,
    Robots,
    RobotsCache,
    RunEnqueue,
    Scope,
    ScopeRecords,
    Urls,
)
from crawlstack.jobs import Held
from crawlstack.records.resolution import CompletedRecords, ResolvedRecords
from crawlstack.rules import RuleSet


def build_dispatcher(
    crawls: Crawls,
    urls: Urls,
    hosts: RobotsCache,
    rules: RuleSet | None = None,
    *,
    clock: Callable[[], float] = time.time,
    resolved: ResolvedRecords | None = None,
    completed: CompletedRecords | None = None,
    held: Held | None = None,
    scope_records: ScopeRecords | None = None,
) -> Dispatcher:
    drops = DropNotes(scope_records)
    return Dispatcher(
        canonicalise=Canonicalise(drops),
        scope=Scope(crawls, rules or RuleSet(), drops, held=held),
        limits=BudgetAndCaps(crawls, urls, scope_records),
        robots=Robots(hosts, urls, clock=clock),
        dedupe=Dedupe(urls),
        enqueue=RunEnqueue(),
        record_complete=RecordComplete(urls, resolved, completed) if resolved is not None else None,
    )
