"""Record resolution: the fields of every page reached from one seed merged into one record.

A seed may carry ``record_id`` and ``want`` (field names); every URL found
from it carries them on (frontier message -> fetch task -> WARC metadata).
Extract merges the found fields of each mapped page into the record with
that id (``ResolvedRecords.merge``): per field the first value found wins,
and the URL it came from is kept beside it.  A record is **complete** once
every wanted field has a value; from then on no link is followed for it
(extract emits none; dispatch and fetch skip any already on the way, without
taking the URL from another record that reaches it later).  A seed without
``want`` never completes: its links are followed to the crawl's max depth
and everything found is merged.  A record's ``want`` is the one its first
merged page carried.

Settings: the ``resolved`` table in ``crawlstack.settings.TABLES`` (key
``pk`` = ``crawl_id#record_id``) and ``COMPLETED_RECORD_CACHE_SIZE``, how
many completed records a container remembers so they cost no reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawlstack import settings

# The reason logged for a URL not fetched because its record was already complete.
RECORD_COMPLETE = "record complete"


def found(value: Any) -> bool:
    """Whether a field value counts as found.

    None is "not found" by definition; an empty string or list comes from a
    chain that matched an empty element, and must not complete a record.
    """
    return value is not None and not (isinstance(value, str | list | dict) and not value)


def found_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of one page's record that were found, to merge."""
    return {name: value for name, value in fields.items() if found(value)}


@dataclass(frozen=True)
class ResolvedRecord:
    crawl_id: str
    record_id: str
    want: tuple[str, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    # field name -> URL of the page its value came from
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every wanted field found; never true without ``want``."""
        return bool(self.want) and all(name in self.fields for name in self.want)

    def to_line(self) -> dict[str, Any]:
        """The record as one line of ``OUT/resolved.jsonl``."""
        return {
            "record_id": self.record_id,
            "fields": dict(sorted(self.fields.items())),
            "sources": dict(sorted(self.sources.items())),
            "complete": self.complete,
        }


class ResolvedRecords(Protocol):
    """The resolved table (``crawlstack.aws.ResolvedStore``)."""

    def merge(
        self, crawl_id: str, record_id: str, want: Sequence[str], fields: Mapping[str, Any], source_url: str
    ) -> ResolvedRecord:
        """Add the fields one page found (only found values) where the record has none yet.

        Atomic per field, so concurrent merges never overwrite a value and a
        redelivered page changes nothing; the record exists afterwards even
        if ``fields`` is empty.  Returns the record as merged.
        """
        ...

    def get_many(self, crawl_id: str, record_ids: Iterable[str]) -> dict[str, ResolvedRecord]:
        """The records that exist among ``record_ids``, by id."""
        ...


class CompletedRecords:
    """A bounded, least-recently-used memory of (crawl_id, record_id) known complete.

    Completion never reverts (fields are never removed, ``want`` never
    changes), so a record once seen complete needs no further reads.
    """

    def __init__(self, size: int = settings.COMPLETED_RECORD_CACHE_SIZE) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return True
            return False

    def add(self, crawl_id: str, record_id: str) -> None:
        with self._lock:
            self._keys[(crawl_id, record_id)] = None
            self._keys.move_to_end((crawl_id, record_id))
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)


def read_complete(
    resolved: ResolvedRecords, completed: CompletedRecords, keys: Iterable[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The complete records among ``keys`` ((crawl_id, record_id) pairs).

    Records remembered complete cost nothing; the rest are read with one
    ``get_many`` per crawl, and those found complete are remembered.
    """
    found_complete: set[tuple[str, str]] = set()
    unknown: dict[str, set[str]] = {}
    for crawl_id, record_id in keys:
        if (crawl_id, record_id) in completed:
            found_complete.add((crawl_id, record_id))
        else:
            unknown.setdefault(crawl_id, set()).add(record_id)
    for crawl_id, record_ids in unknown.items():
        for record_id, record in resolved.get_many(crawl_id, sorted(record_ids)).items():
            if record.complete:
                completed.add(crawl_id, record_id)
                found_complete.add((crawl_id, record_id))
    return found_complete
