"""The stack's physical names, read once from the environment the stack sets (``settings.ENV_*``).

Every adapter takes its table, queue URL or bucket in its constructor; the
composition root (``crawlstack.wiring``) reads them here once per container.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from crawlstack import settings


def dlq_env(key: str) -> str:
    """The variable local mode names a queue's dead-letter queue in (a deployed function has none)."""
    return f"CRAWLSTACK_{key.upper()}_DLQ_URL"


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
        table = {key: _require(env, var) for key, var in settings.ENV_TABLE.items()}
        queue = {key: _require(env, var) for key, var in settings.ENV_QUEUE_URL.items()}
        return cls(
            crawls=table["crawls"],
            urls=table["urls"],
            hosts=table["hosts"],
            parked=table["frontier"],
            results=table["results"],
            resolved=table["resolved"],
            frontier_queue=queue["frontier"],
            fetch_queue=queue["fetch"],
            extract_queue=queue["extract"],
            bucket=_require(env, settings.ENV_BUCKET),
            watch=table["watch"],
            event_bus=env.get(settings.ENV_EVENT_BUS, ""),
            dead_letter_queues={key: env[dlq_env(key)] for key in settings.QUEUES if env.get(dlq_env(key))},
        )
