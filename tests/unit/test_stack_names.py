"""The stack's names, read once: every one required, its variable named when missing."""

from __future__ import annotations

import pytest

from crawlstack import settings
from crawlstack.aws import StackNames
from crawlstack.aws.names import dlq_env


def _env() -> dict[str, str]:
    env = {var: f"table-{key}" for key, var in settings.ENV_TABLE.items()}
    env |= {var: f"https://queue/{key}" for key, var in settings.ENV_QUEUE_URL.items()}
    return env | {settings.ENV_BUCKET: "pages"}


def test_every_name_is_read_from_its_variable() -> None:
    names = StackNames.from_env(_env())
    assert (names.crawls, names.urls, names.hosts, names.parked) == (
        "table-crawls",
        "table-urls",
        "table-hosts",
        "table-frontier",
    )
    assert (names.results, names.resolved, names.bucket) == ("table-results", "table-resolved", "pages")
    assert (names.frontier_queue, names.fetch_queue, names.extract_queue) == (
        "https://queue/frontier",
        "https://queue/fetch",
        "https://queue/extract",
    )
    assert names.dead_letter_queues == {}


def test_dead_letter_queues_are_read_where_set() -> None:
    names = StackNames.from_env({**_env(), dlq_env("fetch"): "https://queue/fetch-dlq"})
    assert names.dead_letter_queues == {"fetch": "https://queue/fetch-dlq"}


@pytest.mark.parametrize("missing", [settings.ENV_TABLE["urls"], settings.ENV_QUEUE_URL["fetch"], settings.ENV_BUCKET])
def test_a_missing_or_empty_variable_is_one_line_naming_it(missing: str) -> None:
    for env in ({k: v for k, v in _env().items() if k != missing}, {**_env(), missing: ""}):
        with pytest.raises(RuntimeError, match=f"^environment variable {missing} is not set$"):
            StackNames.from_env(env)
