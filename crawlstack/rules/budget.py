"""A time budget for one page's extraction, checked between the steps of the work.

Setting: ``settings.EXTRACTION_BUDGET_SECONDS`` (the extractor's, per page).

A mapping is the user's code run on a stranger's page: a chain over tens of
thousands of nodes, each value cheap, can still add up to minutes.  The
extractor opens a budget around each page (``page_budget``); the rules
engine calls ``check()`` between steps and between values, which raises
``BudgetExceeded`` once the page has had its time, and the extractor turns
that into the page's ``failed`` outcome.  No single call can outlast the
budget by much: user regexes have their own per-call timeout
(``crawlstack.rules.patterns``) and element text is linear in the page's size.

The budget lives in a context variable, so each thread (each pump worker
or Lambda invocation) has its own, and code run outside a budget (``rules
test``, dispatch's scope checks) is never cut short.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_now = time.monotonic

# (the monotonic deadline, the budget's seconds) of the page being extracted.
_budget: ContextVar[tuple[float, float] | None] = ContextVar("extraction_budget", default=None)


class BudgetExceeded(Exception):
    """A page's extraction ran past its budget; ``str()`` is the crawl-log reason."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"extraction budget of {seconds:g}s exceeded")
        self.seconds = seconds


@contextlib.contextmanager
def page_budget(seconds: float | None) -> Iterator[None]:
    """Within the block, ``check()`` raises ``BudgetExceeded`` after ``seconds`` (None: no budget)."""
    if seconds is None:
        yield
        return
    token = _budget.set((_now() + seconds, seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def check() -> None:
    """Raise ``BudgetExceeded`` if the current page's budget is spent; nothing outside a budget."""
    budget = _budget.get()
    if budget is not None and _now() > budget[0]:
        raise BudgetExceeded(budget[1])
