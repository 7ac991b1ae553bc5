"""What a local crawl writes to ``OUT/`` at its end (``crawlstack.local.runner``), each file whole or not at all.

``crawl-log.jsonl`` is rewritten to one line per URL from the urls table
and the crawl log's objects; ``resolved.jsonl`` from the resolved table;
``records.jsonl`` and ``warc/`` are already in ``OUT/`` on the local backend
(streamed, ``LocalBlobs``) and copied from the bucket on AWS.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from crawlstack import settings
from crawlstack.fetch.crawllog import url_ends
from crawlstack.local.dead_letters import held_back_pages
from crawlstack.local.metrics import metric_total
from crawlstack.local.sqlite import LocalBlobs, SqliteQueue
from crawlstack.records.resolution import ResolvedRecord
from crawlstack.records.storable import OMITTED_PREFIX, json_safe
from crawlstack.report.endings import Endings
from crawlstack.urls import host_of

if TYPE_CHECKING:
    from crawlstack.local.options import LocalOptions, Seed
    from crawlstack.local.pump import EventPump
    from crawlstack.wiring import Stores


@contextlib.contextmanager
def replacing(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` whole or not at all: a Ctrl-C midway leaves no truncated file that looks complete."""
    part = path.with_name(path.name + ".part")
    try:
        with part.open("wb") if binary else part.open("w", encoding="utf-8") as fh:
            yield fh
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def json_lines(text: str) -> Iterator[Any]:
    """The values of a JSON Lines text, split at line feeds only.

    ``str.splitlines()`` also splits at U+0085, U+2028, U+2029, which a
    record's strings keep as they are (``ensure_ascii=False``): a page holding
    one would cut its record's line in two.
    """
    for line in text.split("\n"):
        if line.strip():
            yield json.loads(line)


def write_outputs(
    out: Path,
    crawl_id: str,
    started: float,
    pump: EventPump,
    stores: Stores,
    seeds: list[Seed],
    options: LocalOptions,
    interrupted: bool = False,
    refetched: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Write OUT/'s files; ``refetched``: the URLs a kill left in flight, fetched again on resume (the journal's)."""
    out.mkdir(parents=True, exist_ok=True)
    blobs = stores.blobs
    # The local backend streamed the WARCs and records into OUT/ as the crawl went (LocalBlobs).

    log_items = sorted(stores.urls.scan_crawl(crawl_id), key=lambda i: (i.get("seen_at", 0), i["url"]))
    outcomes: Counter[str] = Counter()
    per_host: dict[str, Counter[str]] = {}
    endings = Endings(off_site=int(metric_total(out / "metrics.jsonl", "HrefsSkippedOffSite")))
    held_back = _held_back(stores, crawl_id)
    with replacing(out / "crawl-log.jsonl") as fh:
        # A first try's page is fetched or skipped in the crawl log's objects alone.
        for item in url_ends(log_items, blobs, crawl_id):
            line = _log_line(item, interrupted)
            if line["outcome"] == "fetched" and item["url"] in held_back:
                # Fetched, but no record or link came of it: its WARC's extraction is in the DLQ.
                line["outcome"], line["reason"] = "failed", held_back[item["url"]]
            if item["url"] in refetched:
                line["refetched"] = True
            endings.add(line)
            outcomes[line["outcome"]] += 1
            per_host.setdefault(host_of(item["url"]), Counter())[line["outcome"]] += 1
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")

    if isinstance(blobs, LocalBlobs):
        blobs.rewritten("crawl-log.jsonl")
        warcs = sum(1 for _ in blobs.keys(settings.PAGES_PREFIX))
        records_path = out / "records.jsonl"
        records_path.touch()
        records = blobs.records_streamed
        pages = lambda: list(json_lines(records_path.read_text(encoding="utf-8")))  # noqa: E731
    else:
        warcs = _copy_warcs(out / "warc", blobs, started)
        lines = _records_from_objects(out / "records.jsonl", blobs, crawl_id)
        records = len(lines)
        pages = lambda: lines  # noqa: E731

    resolved = write_resolved(out / "resolved.jsonl", stores.resolved, crawl_id, seeds, pages)
    dlq = {key: queue.depth().visible for key, queue in stores.dead_letter.items()}

    # Every URL ends fetched, skipped or failed; a task still in a backlog (or
    # held) would be a URL the crawl never reached, and the summary says so.
    parked_left = stores.backlog.waiting()
    if parked_left and not interrupted:
        print(f"crawlstack: warning: {parked_left} URLs were left waiting, never fetched", file=sys.stderr)
    finished = time.time()
    return {
        "crawl_id": crawl_id,
        "seeds": [s.url for s in seeds],
        "started_at": datetime.fromtimestamp(started, tz=UTC).isoformat(),
        "finished_at": datetime.fromtimestamp(finished, tz=UTC).isoformat(),
        "elapsed_seconds": round(finished - started, 3),
        "urls": len(log_items),
        "outcomes": dict(outcomes),
        "pages_fetched": outcomes.get("fetched", 0),
        "records": records,
        "resolved_records": len(resolved),
        "resolved_complete": sum(1 for r in resolved if r.complete),
        "warc_files": warcs,
        "hosts": {h: dict(c) for h, c in sorted(per_host.items())},
        "dead_letter": dlq,
        "parked_left": parked_left,
        "handler_errors": pump.handler_errors[:20],
        "top_reasons": endings.top(),
        "guards": endings.guard_hints(),
        "invocations": {s.key: s.stats.invocations for s in pump.sources},
        "handler_seconds": {s.key: round(s.stats.handler_seconds, 3) for s in pump.sources},
        "settings": {
            "max_depth": options.config.max_depth,
            "max_pages": options.config.max_pages,
            "max_pages_per_host": options.config.max_pages_per_host,
            "allow_ports": list(options.config.allow_ports),
            "delay": options.config.delay,
            "user_agent": options.config.user_agent,
            "fetch_concurrency": options.fetch_concurrency,
            "extract_concurrency": options.extract_concurrency,
        },
    }


def _held_back(stores: Stores, crawl_id: str) -> dict[str, str]:
    """The pages whose WARC's extract message is dead-lettered, and why (local backend only: SQS has no peek)."""
    dead = stores.dead_letter.get("extract")
    if not isinstance(dead, SqliteQueue) or not isinstance(stores.blobs, LocalBlobs):
        return {}
    return held_back_pages(stores.blobs, dead, crawl_id)


def write_report(out: Path) -> None:
    """OUT/report.html from what OUT/ now holds; a report that cannot be drawn costs a warning, not the crawl."""
    from crawlstack.report import report_out

    try:
        report_out(out)
    except (OSError, ValueError, ImportError) as exc:
        print(f"crawlstack: warning: no report.html: {exc}", file=sys.stderr)


def _log_line(item: dict[str, Any], interrupted: bool) -> dict[str, Any]:
    """A URL's one line of OUT/crawl-log.jsonl, from its urls-table item merged with its crawl log."""
    state = item.get("state", "queued")
    line: dict[str, Any] = {"url": item["url"], "outcome": state, "depth": item.get("depth", 0)}
    if state not in ("fetched", "skipped", "failed", "dropped"):
        # Never reached an end: the crawl was interrupted, or a bug or a crash; the log says which.
        line["outcome"] = "failed"
        cause = "interrupted" if interrupted else "unfinished"
        line["reason"] = f"{cause}: left in state {state!r}"
    for key in ("reason", "status", "truncated", "note"):
        if item.get(key) is not None and key not in line:
            line[key] = item[key]
    if item.get("attempt", 1) > 1:
        # Tried more than once (retries of HTTP errors, crawlstack.fetch.outcomes).
        line["attempts"] = item["attempt"]
    *earlier, last = item.get("tries") or [None]
    if last is not None:
        line["started_at"], line["fetched_at"] = last
    if earlier:
        line["earlier_tries"] = [started for started, _ in earlier]
    return line


def _copy_warcs(warc_dir: Path, blobs: Any, started: float) -> int:
    warc_dir.mkdir(exist_ok=True)
    warcs = 0
    for key in blobs.keys(settings.PAGES_PREFIX, since=started - 1):
        data = blobs.get(key)
        with replacing(warc_dir / key.rsplit("/", 1)[-1], binary=True) as wh:
            wh.write(data)
        warcs += 1
    return warcs


def _records_from_objects(path: Path, blobs: Any, crawl_id: str) -> list[dict[str, Any]]:
    """OUT/records.jsonl from the bucket's records objects (on AWS); the records written."""
    lines = []
    for key in blobs.keys(settings.RECORDS_PREFIX):
        for record in json_lines(gzip.decompress(blobs.get(key)).decode("utf-8")):
            if record.get("crawl_id") == crawl_id:
                lines.append(record)
    lines.sort(key=lambda r: (r.get("fetched_at") or 0, r["url"]))
    with replacing(path) as fh:
        for record in lines:
            record.pop("fp", None)
            # The extractor's key order (fields in mapping order), strict JSON.
            fh.write(json.dumps(json_safe(record), ensure_ascii=False, allow_nan=False) + "\n")
    return lines


def write_resolved(
    path: Path,
    store: Any,
    crawl_id: str,
    seeds: list[Seed],
    pages: Callable[[], list[dict[str, Any]]],
) -> list[ResolvedRecord]:
    """OUT/resolved.jsonl: every record of the crawl, and a seed's record that found nothing yet.

    A value the resolved table holds as a marker (too large for its item)
    is the full one again here, from the record of the page it came from.
    """
    records = {r.record_id: r for r in store.scan_crawl(crawl_id)}
    for seed in seeds:
        if seed.record_id is not None and seed.record_id not in records:
            records[seed.record_id] = ResolvedRecord(crawl_id, seed.record_id, seed.want)
    ordered = [records[rid] for rid in sorted(records)]
    marked = any(isinstance(v, str) and v.startswith(OMITTED_PREFIX) for r in ordered for v in r.fields.values())
    # The records are read back only for a value the table holds as a marker.
    found = {(p.get("record_id"), p["url"]): p.get("fields") or {} for p in pages()} if marked else {}
    with replacing(path) as fh:
        for record in ordered:
            fields = dict(record.fields)
            for name, value in record.fields.items():
                if isinstance(value, str) and value.startswith(OMITTED_PREFIX):
                    fields[name] = found.get((record.record_id, record.sources.get(name)), {}).get(name, value)
            line = ResolvedRecord(crawl_id, record.record_id, record.want, fields, record.sources).to_line()
            fh.write(json.dumps(json_safe(line), ensure_ascii=False, allow_nan=False) + "\n")
    return ordered
