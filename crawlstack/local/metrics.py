"""Powertools metrics made safe for local mode's threads.

In Lambda one process runs one invocation at a time.  Local mode runs the
handlers on many threads of one process, and Powertools' metric set is one
dict shared by every ``Metrics`` instance: a flush on one thread could find
the set emptied by another between its "anything to publish?" check and its
serialisation, and fail the batch with ``SchemaValidationError: Must contain
at least one metric``.  ``serialised_metrics()`` puts every change to the
set and every flush under one lock for as long as it is active.

``metric_total`` adds up one metric over ``OUT/metrics.jsonl``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_METHODS = ("add_metric", "add_dimension", "add_metadata", "flush_metrics", "clear_metrics")


@contextlib.contextmanager
def serialised_metrics() -> Iterator[None]:
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

    lock = threading.RLock()
    originals = {name: getattr(AmazonCloudWatchEMFProvider, name) for name in _METHODS}

    def locked(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(*args, **kwargs)

        return run

    for name, method in originals.items():
        setattr(AmazonCloudWatchEMFProvider, name, locked(method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(AmazonCloudWatchEMFProvider, name, method)


def metric_total(path: Path, name: str) -> float:
    """The sum of EMF metric ``name`` over the lines of ``path`` (each a number or a list of them); 0 if none."""
    total = 0.0
    if not path.exists():
        return total
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if name not in line:
                continue
            value = json.loads(line).get(name)
            if isinstance(value, list):
                total += sum(v for v in value if isinstance(v, int | float))
            elif isinstance(value, int | float):
                total += value
    return total
