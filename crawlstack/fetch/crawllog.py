"""The crawl log in S3: what became of each fetch task, for Athena.

Per fetch batch and crawl, one gzipped JSON-lines object
``crawl-log/crawl_id=<id>/dt=<YYYY-MM-DD>/<batch hash>.jsonl.gz`` with one
line per task outcome (fetched, skipped, failed, and retry: a try that
failed and is tried again, ``crawlstack.fetch.outcomes``).  The key layout is what the
Glue table's partition projection expects (``infra/analytics.py``); the
name is a hash of the batch's tasks, never anything from a URL, so a
redelivered batch overwrites its own object instead of adding lines twice.

A page fetched or skipped on its first try has its outcome here alone: the
urls table keeps only its claim (``fetch_outcomes.logged_only``).  So a
URL's end is its urls-table item where that holds one, else the last line
here (``outcome_of``): local mode's ``OUT/crawl-log.jsonl`` is built so
(``crawlstack.local.runner``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from crawlstack import settings
from crawlstack.records.resolution import RECORD_COMPLETE

if TYPE_CHECKING:  # extract writes lines too, and need not import the fetcher for it
    from crawlstack.fetch.outcomes import Fetched
    from crawlstack.ports import Blobs

CONTENT_TYPE = "application/x-ndjson"


class ReadBlobs(Protocol):
    def keys(self, prefix: str) -> Iterable[str]: ...
    def get(self, key: str) -> bytes: ...


def partition_path(prefix: str, crawl_id: str, now: float) -> str:
    """``<prefix>crawl_id=<id>/dt=<day>/``: Hive-style, as the Glue tables' partition projection reads it.

    Ids of letters, digits, ``-``, ``_`` and ``.`` appear as they are; anything
    else is percent-encoded so a key never gains a ``/`` or ``=`` from an id.
    """
    day = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%d")
    return f"{crawl_prefix(prefix, crawl_id)}dt={day}/"


def crawl_prefix(prefix: str, crawl_id: str) -> str:
    """``<prefix>crawl_id=<id>/``: every day's objects of one crawl."""
    return f"{prefix}crawl_id={quote(crawl_id, safe='-_.')}/"


def iso_time(epoch: float) -> str:
    """``2026-11-27T17:50:06.123456+00:00``: ISO 8601 in UTC, to the microsecond."""
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="microseconds")


def log_line(item: Fetched, now: float, warc: str | None = None) -> dict[str, Any]:
    task = item.task
    fetched_at = item.finished_at or now
    if item.exchange is not None:
        fetched_at = item.exchange.metadata.get("fetched_at") or fetched_at
    return {
        "url": task.url,
        "outcome": item.outcome,
        "reason": item.reason or None,
        "status": item.status,
        "depth": task.depth,
        "crawl_id": task.crawl_id,
        "host": task.host,
        "fetched_at": fetched_at,
        # When the try's request began: per-host timelines (crawlstack report) come from these.
        "started_at": iso_time(item.started_at) if item.started_at else None,
        # As in local mode's crawl-log.jsonl: the body was cut at MAX_BODY_BYTES.
        "truncated": item.truncated or None,
        "attempt": task.attempt,
        # The WARC that holds the exchange, if there was one.
        "warc": warc if item.exchange is not None else None,
    }


def crawl_log_objects(fetched: Iterable[Fetched], now: float, warc: str | None = None) -> dict[str, bytes]:
    """Key -> gzipped JSON lines, one object per crawl in the batch (``warc``: the WARC of its exchanges)."""
    by_crawl: dict[str, list[Fetched]] = {}
    for item in fetched:
        by_crawl.setdefault(item.task.crawl_id, []).append(item)
    objects: dict[str, bytes] = {}
    for crawl_id, items in by_crawl.items():
        # A retry's attempt is in the hash, so its lines never replace an earlier try's.
        digest = hashlib.sha256("|".join(sorted(i.task.attempt_key for i in items)).encode())
        key = f"{partition_path(settings.CRAWL_LOG_PREFIX, crawl_id, now)}{digest.hexdigest()[:24]}.jsonl.gz"
        body = "".join(json.dumps(log_line(i, now, warc), ensure_ascii=False) + "\n" for i in items)
        # mtime=0: the same lines give the same bytes, so a redelivery is a true overwrite.
        objects[key] = gzip.compress(body.encode("utf-8"), mtime=0)
    return objects


def write_crawl_log(blobs: Blobs, fetched: Iterable[Fetched], now: float) -> list[str]:
    """Write the batch's crawl-log objects; returns their keys."""
    objects = crawl_log_objects(fetched, now)
    for key, data in objects.items():
        blobs.put(key, data, CONTENT_TYPE)
    return list(objects)


# The urls-table states that are a URL's end; any other (``queued``: only its
# claim) defers to the crawl log.
TABLE_ENDS = frozenset({"fetched", "skipped", "failed", "dropped"})


def read_lines(data: bytes) -> list[dict[str, Any]]:
    """One crawl-log object's lines."""
    return [json.loads(line) for line in gzip.decompress(data).decode("utf-8").splitlines() if line.strip()]


def _keep_last(last: dict[str, dict[str, Any]], line: dict[str, Any]) -> None:
    """Keep ``line`` as its URL's latest that only the crawl log holds (``log_only``): a refetch's, after a crash."""
    url = line.get("url")
    if not isinstance(url, str) or not log_only(line):
        return
    seen = last.get(url)
    if seen is None or (line.get("fetched_at") or 0.0) >= (seen.get("fetched_at") or 0.0):
        last[url] = line


def log_only(line: dict[str, Any]) -> bool:
    """Whether only the crawl log holds this line's outcome (``fetch_outcomes.logged_only``).

    A first try fetched or skipped; not a record's skip, which ``unclaim``
    wrote to the urls table (and which a later claim may have taken over).
    """
    return (
        (line.get("attempt") or 1) <= 1
        and line.get("outcome") in settings.LOGGED_OUTCOMES
        and line.get("reason") != RECORD_COMPLETE
    )


def outcome_of(item: dict[str, Any], logged: dict[str, Any] | None) -> dict[str, Any]:
    """A URL's end, as its urls-table ``item`` and its crawl log's last line only the log holds (``logged``) say.

    The table's state where it holds an end (it is written after the log,
    and extract's failures land there only); else the crawl log's outcome,
    with its status, reason, truncation and try.  Neither: ``state`` as the
    table has it (``queued``, ``retrying``: never ended).
    """
    state = item.get("state", "queued")
    if state in TABLE_ENDS or logged is None or not log_only(logged):
        return item
    merged = {**item, "state": logged["outcome"], "attempt": logged.get("attempt") or item.get("attempt", 1)}
    for key in ("status", "reason", "truncated", "warc"):
        if logged.get(key) is not None:
            merged[key] = logged[key]
    return merged


def url_ends(items: Iterable[dict[str, Any]], blobs: ReadBlobs, crawl_id: str) -> list[dict[str, Any]]:
    """The crawl's urls-table ``items``, each with its last crawl-log line only the log holds (``outcome_of``).

    Each also gains ``tries``: when each of its tries' requests began (ISO
    8601) and its response ended (epoch seconds), in order, from every
    crawl-log line of the URL.
    """
    # One pass, keeping per URL only its last line and its tries' times: a crawl's log may not fit in memory.
    logged: dict[str, dict[str, Any]] = {}
    times: dict[str, dict[str, float | None]] = {}
    for key in blobs.keys(crawl_prefix(settings.CRAWL_LOG_PREFIX, crawl_id)):
        for line in read_lines(blobs.get(key)):
            _keep_last(logged, line)
            _keep_try(times, line)
    tries = {url: sorted(starts.items()) for url, starts in times.items()}
    ends = []
    for item in items:
        end = dict(outcome_of(item, logged.get(item.get("url", ""))))
        end["tries"] = tries.get(item.get("url", ""), [])
        ends.append(end)
    return ends


def _keep_try(times: dict[str, dict[str, float | None]], line: dict[str, Any]) -> None:
    """Note the try's start and end; a redelivered line, with the same start, counts once."""
    if isinstance(line.get("url"), str) and isinstance(line.get("started_at"), str):
        times.setdefault(line["url"], {})[line["started_at"]] = line.get("fetched_at")


@dataclass(frozen=True)
class PageFailure:
    """A fetched page whose extraction failed: no record, no links; its crawl-log line says why."""

    url: str
    crawl_id: str
    fp: str | None
    depth: int
    reason: str


def failure_objects(failures: Iterable[PageFailure], warc_key: str, now: float) -> dict[str, bytes]:
    """Key -> gzipped JSON lines: pages fetched whose extraction failed, one object per crawl and WARC.

    Named after the WARC, so a redelivered S3 event overwrites its own lines;
    each says ``failed`` with the extraction's reason, after the fetch's own
    ``fetched`` line for the same URL.
    """
    by_crawl: dict[str, list[PageFailure]] = {}
    for failure in failures:
        by_crawl.setdefault(failure.crawl_id, []).append(failure)
    name = hashlib.sha256(warc_key.encode()).hexdigest()[:24]
    objects: dict[str, bytes] = {}
    for crawl_id, items in by_crawl.items():
        key = f"{partition_path(settings.CRAWL_LOG_PREFIX, crawl_id, now)}extract-{name}.jsonl.gz"
        lines = (
            {"url": f.url, "outcome": "failed", "reason": f.reason, "depth": f.depth, "crawl_id": f.crawl_id}
            for f in items
        )
        body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        objects[key] = gzip.compress(body.encode("utf-8"), mtime=0)
    return objects
