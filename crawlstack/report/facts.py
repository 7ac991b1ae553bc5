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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from crawlstack.endings import Endings
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
    ended_at: dict[str, list[float]] = field(default_factory=dict)  # outcome -> its URLs' last try starts
    requests: dict[str, list[Request]] = field(default_factory=dict)  # host -> its requests
    coverage: dict[str, MappingCoverage] = field(default_factory=dict)

    def add_end(self, line: dict[str, Any]) -> None:
        """A URL's end: a line of ``OUT/crawl-log.jsonl`` (outcome, reason, status, depth, started_at)."""
        outcome = str(line.get("outcome") or "unknown")
        self.outcomes[outcome] += 1
        if line.get("status") is not None:
            self.statuses[str(line["status"])] += 1
        self.depths[int(line.get("depth") or 0)] += 1
        self.endings.add(line)
        started = epoch(line.get("started_at"))
        if started is not None:
            self.ended_at.setdefault(outcome, []).append(started)

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


def empty(value: Any) -> bool:
    """None, an empty or blank string, or an empty list or object (also as the JSON text Athena gives)."""
    if isinstance(value, str):
        return value.strip() in ("", "[]", "{}")
    return value is None or value == [] or value == {}


def epoch(iso: Any) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def from_out(out: Path) -> CrawlFacts:
    """A local crawl's facts, from ``OUT/``'s summary.json, crawl-log.jsonl and records.jsonl."""
    summary: dict[str, Any] = {}
    # An interrupted crawl may have none: the report says what OUT/ holds.
    with contextlib.suppress(OSError, ValueError):
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    if not isinstance(summary, dict):
        summary = {}
    settings = summary.get("settings")
    delay = settings.get("delay") if isinstance(settings, dict) else None
    if not isinstance(delay, int | float):
        delay = None
    facts = CrawlFacts(str(summary.get("crawl_id") or out.name), delay, f"{out}/")
    for line in _json_lines(out / "crawl-log.jsonl"):
        facts.add_end(line)
        url = str(line.get("url") or "")
        for started in line.get("earlier_tries") or ():
            if (at := epoch(started)) is not None:
                facts.add_try(url, Request(at, None, "retry", None))
        at = epoch(line.get("started_at"))
        if at is not None:
            finished = line.get("fetched_at")
            seconds = finished - at if isinstance(finished, int | float) else None
            facts.add_try(url, Request(at, seconds, str(line.get("outcome")), line.get("status")))
    for record in _json_lines(out / "records.jsonl"):
        facts.add_record(str(record.get("mapping")), record.get("fields") or {})
    return facts


def _json_lines(path: Path) -> Any:
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            # A line a running crawl is still writing is left out, as is one that is not JSON.
            if line.endswith("\n") and line.strip():
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    yield value
