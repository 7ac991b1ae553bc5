"""Powertools metrics made safe for local mode's threads.

In Lambda one process runs one invocation at a time.  Local mode runs the
handlers on many threads of one process, and Powertools' metric set is one
dict shared by every ``Metrics`` instance: a flush on one thread could find
the set emptied by another between its "anything to publish?" check and its
serialisation, and fail the batch with ``SchemaValidationError: Must contain
at least one metric``.  ``serialised_metrics()`` puts every change to the
set and every flush under one lock for as long as it is active.

``MetricsFile`` is ``OUT/metrics.jsonl``, where the handlers' EMF lines go;
``metric_total`` adds up one metric over it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from crawlstack.local.sqlite.db import is_storage_full

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


class MetricsFile:
    """``OUT/metrics.jsonl`` as the handlers' stdout (``contextlib.redirect_stdout``).

    A write that fails for want of room goes to ``note`` (the state's fault:
    the crawl stops on it) and the lines from then on are dropped, so that
    closing the file raises nothing over the crawl's own one-line error.
    """

    def __init__(self, path: Path, append: bool, note: Callable[[BaseException], None]) -> None:
        self._file = path.open("a" if append else "w", encoding="utf-8")
        self._note = note
        self.full = False

    def write(self, text: str) -> int:
        if not self.full:
            try:
                self._file.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if not self.full:
            try:
                self._file.flush()
            except OSError as exc:
                self._failed(exc)

    def close(self) -> None:
        try:
            self._file.close()  # closes the file even when its last flush fails
        except OSError as exc:
            if not self.full:
                self._failed(exc)

    def __getattr__(self, name: str) -> Any:
        if name == "_file":
            raise AttributeError(name)
        return getattr(self._file, name)  # the rest of a text file's interface, as the file has it

    def _failed(self, exc: OSError) -> None:
        if not is_storage_full(exc):
            raise exc
        self.full = True
        self._note(exc)

    def __enter__(self) -> MetricsFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
