"""``crawlstack status``'s URL counts: the urls table's states with the crawl log's counted outcomes."""

from __future__ import annotations

from crawlstack import settings
from crawlstack.cli.status import url_counts


def test_status_moves_logged_outcomes_out_of_queued() -> None:
    states = {"queued": 10, "failed": 1, "skipped": 2}
    crawl = {f"{settings.LOGGED_COUNTER_PREFIX}fetched": 7, f"{settings.LOGGED_COUNTER_PREFIX}skipped": 1}
    assert url_counts(states, crawl) == {"queued": 2, "fetched": 7, "skipped": 3, "failed": 1}
    # A refetch after a crash counts twice; queued never goes below zero.
    assert url_counts({"queued": 1}, {f"{settings.LOGGED_COUNTER_PREFIX}fetched": 2})["queued"] == 0
