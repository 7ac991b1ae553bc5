"""Which try a fetch task is, against the URL's state (``crawlstack.fetch.tries.next_try``)."""

from __future__ import annotations

import pytest

from crawlstack.fetch.tries import next_try
from crawlstack.messages import FetchTask
from crawlstack.ports import UrlState

TASK = FetchTask("http://a.example/x", "fp", "a.example", 1, "c", 0.0)


def attempt(n: int) -> FetchTask:
    return FetchTask(TASK.url, TASK.fp, TASK.host, TASK.depth, TASK.crawl_id, 0.0, attempt=n)


@pytest.mark.parametrize(
    ("task", "known", "go"),
    [
        (attempt(1), UrlState("queued"), True),
        (attempt(1), None, True),  # no item read: a refetch is allowed, a lost URL is not
        (attempt(1), UrlState("fetched"), False),  # a copy of a task already done
        (attempt(1), UrlState("skipped"), False),
        (attempt(1), UrlState("failed"), False),
        (attempt(1), UrlState("fetching", 1), True),  # left by a holder of the design that marked starts
        (attempt(2), UrlState("retrying", 1, 50.0), True),
        (attempt(2), UrlState("queued"), False),  # no try 1 yet
        (attempt(3), UrlState("retrying", 1, 50.0), False),  # not the next try
        (attempt(2), UrlState("fetched", 2), False),  # try 2 done: a redelivered copy
    ],
)
def test_a_task_is_fetched_only_when_it_is_the_urls_next_try(task: FetchTask, known: UrlState | None, go: bool) -> None:
    assert next_try(task, known)[0] is go


def test_a_try_whose_outcome_was_written_but_whose_next_try_was_never_added_gets_it_now() -> None:
    go, again = next_try(attempt(1), UrlState("retrying", 1, 50.0))
    assert not go and again is not None
    assert (again.attempt, again.not_before, again.url) == (2, 50.0, TASK.url)
    assert next_try(again, UrlState("retrying", 1, 50.0)) == (True, None)
