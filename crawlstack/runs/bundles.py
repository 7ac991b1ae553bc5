"""Backlog bundles as stored: their order keys and their compact encoding, shared by every ``Backlog`` adapter.

* ``order_key``: ``<depth, 4 digits>#<microseconds, 16 digits>#<8 hex>``, so
  keys sort by depth, then by when the bundle was made (strictly increasing
  within a process, by clock across writers); the random tail keeps keys
  unique.
* ``encode``/``decode``: zlib of one JSON document ``{"n", "s", "c"}``: the
  fields all the bundle's tasks share (``s``) once, the rest by column
  (``c``).  ``pack`` cuts a long list into runs that fit a byte budget.

Pure: the DynamoDB adapter (``crawlstack.aws.backlog``) and local mode's
(``crawlstack.local.sqlite.backlog``) store what these make.
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import threading
import time
import zlib
from collections.abc import Sequence
from typing import Any

from crawlstack.messages import FetchTask

MAX_DEPTH = 9999  # the order key's four digits

_last_micros = 0
_order_lock = threading.Lock()


def order_key(depth: int) -> str:
    """A new bundle key: sorts by depth, then by when it was made (strictly increasing within this process)."""
    global _last_micros
    if not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth {depth} does not fit the backlog's order key")
    with _order_lock:
        _last_micros = max(time.time_ns() // 1000, _last_micros + 1)
        micros = _last_micros
    return f"{depth:04d}#{micros:016d}#{secrets.token_hex(4)}"


def encode(tasks: Sequence[FetchTask]) -> bytes:
    """The tasks (at least one) as ``tasks`` stores them: shared fields once, the rest by column, compressed."""
    rows = [dataclasses.asdict(t) for t in tasks]
    first = rows[0]
    shared = {k: v for k, v in first.items() if all(r[k] == v for r in rows[1:])}
    columns = {k: [r[k] for r in rows] for k in first if k not in shared}
    doc = {"n": len(rows), "s": shared, "c": columns}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"), 6)


def decode(blob: bytes) -> tuple[FetchTask, ...]:
    doc = json.loads(zlib.decompress(blob))
    rows: list[dict[str, Any]] = [dict(doc["s"]) for _ in range(doc["n"])]
    for name, column in doc["c"].items():
        for row, value in zip(rows, column, strict=True):
            row[name] = value
    return tuple(FetchTask.from_dict(row) for row in rows)


def pack(tasks: Sequence[FetchTask], budget: int) -> list[tuple[Sequence[FetchTask], bytes]]:
    """``tasks`` in order, cut into runs whose encoding fits ``budget`` (a single task always fits).

    An over-long list is cut into as many equal runs as its size asks for,
    aiming at nine tenths of the budget (a run compresses a little worse
    than the whole); a run still too big is cut again.
    """
    blob = encode(tasks)
    if len(blob) <= budget or len(tasks) == 1:
        return [(tasks, blob)]
    parts = max(2, math.ceil(len(blob) / (0.9 * budget)))
    step = math.ceil(len(tasks) / parts)
    return [packed for i in range(0, len(tasks), step) for packed in pack(tasks[i : i + step], budget)]
