"""The stack's names, read once: every one required, its variable named when missing."""

from __future__ import annotations

import pytest

from crawlstack import settings
from crawlstack.aws import StackNames
from crawlstack.aws.names import MissingOutput, dlq_env


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
        "table-parked",
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


def _outputs() -> dict[str, str]:
    outputs = {name: f"table-{key}" for key, name in settings.OUTPUT_TABLE.items()}
    outputs |= {name: f"https://queue/{key}" for key, name in settings.OUTPUT_QUEUE_URL.items()}
    return outputs | {settings.OUTPUT_BUCKET: "pages", settings.OUTPUT_EVENT_BUS: "items"}


def test_the_cli_reads_the_same_names_from_the_stacks_outputs() -> None:
    from_outputs = StackNames.from_outputs(_outputs())
    from_env = StackNames.from_env({**_env(), settings.ENV_EVENT_BUS: "items"})
    assert from_outputs == from_env
    with_dlq = StackNames.from_outputs({**_outputs(), settings.OUTPUT_DLQ_URL["fetch"]: "https://queue/fetch-dlq"})
    assert with_dlq.dead_letter_queues == {"fetch": "https://queue/fetch-dlq"}


@pytest.mark.parametrize(
    "missing", [settings.OUTPUT_TABLE["urls"], settings.OUTPUT_QUEUE_URL["fetch"], settings.OUTPUT_BUCKET]
)
def test_a_missing_or_empty_output_is_named(missing: str) -> None:
    for outputs in ({k: v for k, v in _outputs().items() if k != missing}, {**_outputs(), missing: ""}):
        with pytest.raises(MissingOutput) as caught:
            StackNames.from_outputs(outputs)
        assert caught.value.key == missing
