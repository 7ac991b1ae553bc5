"""The stack's physical names: a Lambda's from the environment the stack sets (``settings.ENV_*``), once.

Every adapter takes its table, queue URL or bucket in its constructor; the
composition root (``crawlstack.wiring``) reads them here once per container,
and the CLI from the stack's CloudFormation outputs (``settings.OUTPUT_*``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from crawlstack import settings


def dlq_env(key: str) -> str:
    """The variable local mode names a queue's dead-letter queue in (a deployed function has none)."""
    return f"CRAWLSTACK_{key.upper()}_DLQ_URL"


class MissingOutput(LookupError):
    """The stack has no output ``key`` (deployed from an older version)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"stack output {key} is missing")
        self.key = key


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise RuntimeError(f"environment variable {name} is not set")
    return value


@dataclass(frozen=True)
class StackNames:
    """Table names, queue URLs and the bucket of one stack (``settings.TABLES``, ``settings.QUEUES``)."""

    crawls: str
    urls: str
    hosts: str
    parked: str
    results: str
    resolved: str
    frontier_queue: str
    fetch_queue: str
    extract_queue: str
    bucket: str
    watch: str = ""
    # The event bus new items of watched sources go to (the extract function's).
    event_bus: str = ""
    # By queue key; only where known (local mode creates them, a Lambda is not told).
    dead_letter_queues: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StackNames:
        """Read every name from ``env`` (``os.environ``); RuntimeError naming the first variable missing."""
        env = os.environ if env is None else env
        return cls._of(
            {key: _require(env, var) for key, var in settings.ENV_TABLE.items()},
            {key: _require(env, var) for key, var in settings.ENV_QUEUE_URL.items()},
            _require(env, settings.ENV_BUCKET),
            env.get(settings.ENV_EVENT_BUS, ""),
            {key: env[dlq_env(key)] for key in settings.QUEUES if env.get(dlq_env(key))},
        )

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, str]) -> StackNames:
        """Read every name from a deployed stack's outputs; MissingOutput naming the first missing."""

        def output(key: str) -> str:
            if not outputs.get(key):
                raise MissingOutput(key)
            return outputs[key]

        return cls._of(
            {key: output(name) for key, name in settings.OUTPUT_TABLE.items()},
            {key: output(name) for key, name in settings.OUTPUT_QUEUE_URL.items()},
            output(settings.OUTPUT_BUCKET),
            outputs.get(settings.OUTPUT_EVENT_BUS, ""),
            {key: outputs[name] for key, name in settings.OUTPUT_DLQ_URL.items() if outputs.get(name)},
        )

    @classmethod
    def _of(
        cls,
        table: Mapping[str, str],
        queue: Mapping[str, str],
        bucket: str,
        event_bus: str,
        dead_letter_queues: Mapping[str, str],
    ) -> StackNames:
        """From the names by table and queue key (``settings.TABLES``, ``settings.QUEUES``)."""
        return cls(
            crawls=table["crawls"],
            urls=table["urls"],
            hosts=table["hosts"],
            parked=table["parked"],
            results=table["results"],
            resolved=table["resolved"],
            frontier_queue=queue["frontier"],
            fetch_queue=queue["fetch"],
            extract_queue=queue["extract"],
            bucket=bucket,
            watch=table["watch"],
            event_bus=event_bus,
            dead_letter_queues=dead_letter_queues,
        )
