"""bench/cost.py end to end on its smallest web, so `make bench` cannot break silently.

The benchmark checks that it priced every function the crawl ran; a function
the crawl never invokes (the watch's schedule) must not stop it.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from benches import load


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    return load("cost")


def test_the_smallest_web_is_crawled_and_priced(cost: ModuleType) -> None:
    run = cost.crawl(cost.Web("tiny", 2, 3, 0.0, "the smallest web"), extract_instances=1)
    assert run["pages"] == 6
    assert run["records"] == 6
    usd = run["usd_per_million_pages"]
    assert set(usd) == {*cost.SERVICES, "total"}
    # Every service a crawl uses is billed something, and the total is their sum.
    assert all(usd[s] > 0 for s in ("sqs", "dynamodb", "s3", "lambda", "logs"))
    assert usd["total"] == pytest.approx(sum(usd[s] for s in cost.SERVICES), abs=1e-3)
    assert set(run["log_bytes_per_page"]) >= {"dispatch", "fetch", "extract"}


def test_a_crawl_needs_the_logs_of_the_functions_it_ran_only(cost: ModuleType) -> None:
    summary = {
        "invocations": {"frontier": 3, "fetch": 2, "extract": 1},
        "log_bytes": {"dispatch": {"logger": 10}, "fetch": {"logger": 0}, "extract": {"logger": 5}},
    }
    assert cost.invoked_functions(summary) == ["dispatch", "extract", "fetch"]
    assert cost.uncounted_logs(summary) == []
    del summary["log_bytes"]["fetch"]
    assert cost.uncounted_logs(summary) == ["fetch"]
