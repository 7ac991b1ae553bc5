"""``crawlstack status --local OUT``: a local crawl's queues and counts, read from its state without a lock.

The state is opened read-only (``backend.open_read_only``), so this works
while the crawl runs, and gives what ``crawlstack status`` gives for a
deployed stack: queue depths, then URLs per state and records per crawl,
then a watch's sources.  Any folder with a state reads, the one ``sources
add`` made too: what its state does not hold yet reads as empty
(``StateDb.ensure``).
A crawl's state is ``running`` while a crawl holds ``OUT/``'s lock,
``finished`` when its summary says it ran to its end, else ``interrupted``
(``crawl --local --resume`` goes on with it).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.local.backend import local_stores, open_read_only
from crawlstack.local.outdir import crawl_running
from crawlstack.local.sqlite.sources import SCHEMA as SOURCES_SCHEMA
from crawlstack.local.sqlite.watch import SCHEMA as WATCH_SCHEMA
from crawlstack.queueing import Depth
from crawlstack.watch.pages import WATCH_CRAWL_ID


@dataclass
class LocalStatus:
    queues: dict[str, tuple[Depth, Depth]]  # queue key -> (its depth, its dead-letter queue's)
    url_states: dict[str, Counter[str]]  # crawl -> state -> URLs (the urls table's)
    extracted: dict[str, int]  # crawl -> records
    crawls: dict[str, dict[str, Any]]  # crawl -> its item (state, budget, logged counters)
    # A watch's sources: id, priority, tokens, next check (epoch), checks ended, items seen.
    sources: list[tuple[str, float | None, float | None, float | None, int, int]] = field(default_factory=list)


def local_status(out: Path, crawl_id: str | None) -> LocalStatus:
    db = open_read_only(out)
    try:
        stores = local_stores(db, out)
        # A folder ``sources add`` made holds the sources' table alone: the others read as empty.
        db.ensure(SOURCES_SCHEMA, *WATCH_SCHEMA)
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
            watched = _sources(conn)
    finally:
        db.close()
    running = crawl_running(out)
    state = "running" if running else "finished" if _finished(out) else "interrupted"
    for crawl_id, item in items.items():
        # A watch has no end to reach: it runs, or it is stopped until run again.
        item["state"] = ("running" if running else "stopped") if crawl_id == WATCH_CRAWL_ID else state
    return LocalStatus(queues, states, extracted, items, watched)


def _sources(conn: Any) -> list[tuple[str, float | None, float | None, float | None, int, int]]:
    """A watch's sources and where each stands (one never checked yet has no priority, tokens or plan)."""
    rows = conn.execute(
        "SELECT s.id, json_extract(st.state, '$.priority'), json_extract(st.state, '$.tokens'),"
        " (SELECT min(at) FROM watch_plan p WHERE p.source_id = s.id AND p.sent = 0),"
        " (SELECT count(*) FROM checks_done d WHERE d.source_id = s.id),"
        " (SELECT count(*) FROM seen_items i WHERE i.source_id = s.id)"
        " FROM sources s LEFT JOIN source_state st ON st.id = s.id ORDER BY s.id"
    ).fetchall()
    return [tuple(row) for row in rows]


def _finished(out: Path) -> bool:
    """The crawl ran to its end: its summary is written and says it was not interrupted."""
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("interrupted") is False
