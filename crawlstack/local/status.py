"""``crawlstack status --local OUT``: a local crawl's queues and counts, read from its state without a lock.

The state is opened read-only (``backend.open_read_only``), so this works
while the crawl runs, and gives what ``crawlstack status`` gives for a
deployed stack: queue depths, then URLs per state and records per crawl.
A crawl's state is ``running`` while a crawl holds ``OUT/``'s lock,
``finished`` when its summary says it ran to its end, else ``interrupted``
(``crawl --local --resume`` goes on with it).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.local.backend import crawl_running, local_stores, open_read_only
from crawlstack.queueing import Depth


@dataclass
class LocalStatus:
    queues: dict[str, tuple[Depth, Depth]]  # queue key -> (its depth, its dead-letter queue's)
    url_states: dict[str, Counter[str]]  # crawl -> state -> URLs (the urls table's)
    extracted: dict[str, int]  # crawl -> records
    crawls: dict[str, dict[str, Any]]  # crawl -> its item (state, budget, logged counters)


def local_status(out: Path, crawl_id: str | None) -> LocalStatus:
    db = open_read_only(out)
    try:
        stores = local_stores(db, out)
        queue_of = {"frontier": stores.frontier_queue, "fetch": stores.fetch_queue, "extract": stores.extract_queue}
        queues = {key: (queue_of[key].depth(), stores.dead_letter[key].depth()) for key in settings.QUEUES}
        where, args = ("WHERE crawl_id = ?", (crawl_id,)) if crawl_id else ("", ())
        with db.reading() as conn:
            states: dict[str, Counter[str]] = {}
            rows = conn.execute(
                f"SELECT crawl_id, json_extract(item, '$.state'), count(*) FROM urls {where} GROUP BY 1, 2", args
            )
            for crawl, state, count in rows:
                states.setdefault(crawl, Counter())[state or "queued"] += count
            extracted = dict(
                conn.execute(f"SELECT crawl_id, count(*) FROM results {where} GROUP BY 1", args).fetchall()
            )
            items = {c: json.loads(i) for c, i in conn.execute(f"SELECT crawl_id, item FROM crawls {where}", args)}
    finally:
        db.close()
    state = "running" if crawl_running(out) else "finished" if _finished(out) else "interrupted"
    for item in items.values():
        item["state"] = state
    return LocalStatus(queues, states, extracted, items)


def _finished(out: Path) -> bool:
    """The crawl ran to its end: its summary is written and says it was not interrupted."""
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("interrupted") is False
