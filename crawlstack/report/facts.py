"""What a crawl report shows, gathered from a local crawl's ``OUT/`` or a deployed crawl's Athena tables.

``CrawlFacts`` takes each URL's end (``add_end``), each try's request
(``add_try``) and each record (``add_record``), and keeps what the plots
need: counts, the requests' times per host, and per mapping how many
records have each field non-empty.  Both sources feed it the same way, so
the report is one whatever the crawl ran on.

Settings: ``MAX_TIMELINE_HOSTS`` (here): the hosts drawn on the timeline, busiest first.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crawlstack.report.endings import Endings
from crawlstack.urls import host_of

MAX_TIMELINE_HOSTS = 40


@dataclass(frozen=True)
class Request:
    started: float  # epoch seconds
    seconds: float | None  # until the response ended; None if not known
    outcome: str  # the try's: "retry" for one tried again
    status: int | None


@dataclass
class MappingCoverage:
    records: int = 0
    filled: Counter[str] = field(default_factory=Counter)  # field -> records where it is non-empty


@dataclass
class CrawlFacts:
    crawl_id: str
    delay: float | None = None  # the crawl's --delay, drawn beside the gaps kept
    source: str = ""
    outcomes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    depths: Counter[int] = field(default_factory=Counter)
    endings: Endings = field(default_factory=Endings)
    ended_at: dict[str, list[float]] = field(default_factory=dict)  # outcome -> its URLs' last request starts
    requests: dict[str, list[Request]] = field(default_factory=dict)  # host -> its requests
    coverage: dict[str, MappingCoverage] = field(default_factory=dict)

    def add_end(self, line: dict[str, Any], at: float | None) -> None:
        """A URL's end (outcome, reason, status, depth) and when its last request began (``at``)."""
        outcome = str(line.get("outcome") or "unknown")
        self.outcomes[outcome] += 1
        if isinstance(line.get("status"), int):
            self.statuses[str(line["status"])] += 1
        self.depths[_integer(line.get("depth"))] += 1
        self.endings.add(line)
        if at is not None:
            self.ended_at.setdefault(outcome, []).append(at)

    def add_try(self, url: str, request: Request) -> None:
        self.requests.setdefault(host_of(url) or "?", []).append(request)

    def coverage_of(self, mapping: str) -> MappingCoverage:
        return self.coverage.setdefault(mapping, MappingCoverage())

    def add_record(self, mapping: str, fields: dict[str, Any]) -> None:
        cover = self.coverage_of(mapping)
        cover.records += 1
        for name, value in fields.items():
            cover.filled[name] += 0 if empty(value) else 1

    def timeline_hosts(self) -> list[str]:
        """The busiest hosts, at most ``MAX_TIMELINE_HOSTS``."""
        busiest = sorted(self.requests, key=lambda h: (-len(self.requests[h]), h))
        return busiest[:MAX_TIMELINE_HOSTS]


class UrlLines:
    """Crawl-log lines, in either form, to one end per URL and each request once.

    ``OUT/crawl-log.jsonl`` has a line per URL once a crawl has ended, and a
    line per try while it runs or after a kill (the S3 objects' form); a
    resumed crawl appends the second to the first.  Its lines are in the
    order they were decided, so a URL's end is its last line
    (``in_order=True``).  Athena returns the S3 form in no order: there a
    URL's end is its extraction's failure (a line with no try), else its
    latest try (``_end_order``).  A URL's requests are its lines'
    ``started_at`` and ``earlier_tries``.
    """

    def __init__(self, in_order: bool) -> None:
        self.in_order = in_order
        self.ends: dict[str, dict[str, Any]] = {}
        self.tries: dict[str, dict[float, Request]] = {}

    def add(self, line: dict[str, Any]) -> None:
        url = line.get("url")
        if not isinstance(url, str):
            return
        tries = self.tries.setdefault(url, {})
        earlier = line.get("earlier_tries")
        for start in earlier if isinstance(earlier, list) else ():
            if (at := epoch(start)) is not None and at not in tries:
                tries[at] = Request(at, None, "retry", None)
        at = epoch(line.get("started_at"))
        if at is not None:
            finished = _float(line.get("fetched_at"))
            seconds = finished - at if finished is not None else None
            status = line.get("status") if isinstance(line.get("status"), int) else None
            tries[at] = Request(at, seconds, str(line.get("outcome")), status)
        seen = self.ends.get(url)
        if seen is None or self.in_order or _end_order(line) >= _end_order(seen):
            self.ends[url] = line

    def into(self, facts: CrawlFacts) -> None:
        for url, line in self.ends.items():
            tries = self.tries.get(url) or {}
            facts.add_end(line, max(tries) if tries else None)
            for request in tries.values():
                facts.add_try(url, request)


def _end_order(line: dict[str, Any]) -> tuple[int, int, float]:
    """An S3-form line's rank among its URL's: every fetch line has its try's ``attempt``, an extraction's has none."""
    extract = line.get("attempt") is None
    return (1 if extract else 0, _integer(line.get("attempt")), _float(line.get("fetched_at")) or 0.0)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _integer(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def empty(value: Any) -> bool:
    """None, an empty or blank string, or an empty list or object (also as the JSON text Athena gives)."""
    if isinstance(value, str):
        return value.strip() in ("", "[]", "{}")
    return value is None or value == [] or value == {}


def epoch(iso: Any) -> float | None:
    """Epoch seconds of an ISO 8601 time; one without a zone is UTC, as the crawl log writes them."""
    if not isinstance(iso, str):
        return None
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def from_out(out: Path) -> CrawlFacts:
    """A local crawl's facts, from ``OUT/``'s summary.json, crawl-log.jsonl and records.jsonl."""
    summary: Any = {}
    # An interrupted crawl may have none: the report says what OUT/ holds.
    with contextlib.suppress(OSError, ValueError):
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    if not isinstance(summary, dict):
        summary = {}
    settings = summary.get("settings")
    delay = settings.get("delay") if isinstance(settings, dict) else None
    facts = CrawlFacts(str(summary.get("crawl_id") or out.name), _float(delay), f"{out}/")
    lines = UrlLines(in_order=True)
    for line in _json_lines(out / "crawl-log.jsonl"):
        lines.add(line)
    lines.into(facts)
    for record in _json_lines(out / "records.jsonl"):
        fields = record.get("fields")
        facts.add_record(str(record.get("mapping")), fields if isinstance(fields, dict) else {})
    return facts


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON-lines file; a line cut short or not an object (a killed crawl's last) is left out."""
    if not path.is_file():
        return
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n") or not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value
