"""Sources: listings, feeds and APIs re-checked over time, each read with a mapping that has ``items``.

A source is a URL, a mapping and an id, with how to tell its items apart
(``identity``: the item field that names one), the bounds of its priority
in checks per day, how to page through it, and the scheduling strategy.
``source_from`` checks one against the rules and says what is wrong in one
line (``SourceError``); nothing here touches a store.

Settings: ``DEFAULT_PRIORITY_MIN``, ``DEFAULT_PRIORITY_MAX`` (seed 003's
0.07 and 1.75 checks a day), ``MAX_PRIORITY``, ``DEFAULT_MAX_PAGES``,
``MAX_PAGES_LIMIT`` (here).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from crawlstack.rules import RuleSet
from crawlstack.urls import InvalidURL, canonicalize

DEFAULT_PRIORITY_MIN = 0.07
DEFAULT_PRIORITY_MAX = 1.75
# Checks a day a source may ask for at most: one a minute.
MAX_PRIORITY = 1440.0
DEFAULT_MAX_PAGES = 5
MAX_PAGES_LIMIT = 100
PAGINATIONS = ("next", "page", "cursor")
# The query parameter a page number or a cursor goes in, unless the source names one.
DEFAULT_PARAMETER = {"page": "page", "cursor": "max_id"}
STRATEGIES = ("tokens", "velocity")
KEYS = frozenset(
    {
        "id",
        "url",
        "mapping",
        "identity",
        "priority_min",
        "priority_max",
        "pagination",
        "pagination_parameter",
        "max_pages",
        "strategy",
    }
)
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PARAMETER = re.compile(r"[A-Za-z0-9._~-]{1,64}")


class SourceError(ValueError):
    """A source that cannot be added, in one line."""


@dataclass(frozen=True)
class Source:
    id: str
    url: str
    mapping: str
    identity: str = "url"
    priority_min: float = DEFAULT_PRIORITY_MIN
    priority_max: float = DEFAULT_PRIORITY_MAX
    pagination: str | None = None  # next | page | cursor
    pagination_parameter: str | None = None
    max_pages: int = DEFAULT_MAX_PAGES
    strategy: str = "tokens"

    def to_item(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Source:
        return cls(**{k: v for k, v in item.items() if k in KEYS})


class SourceStore(Protocol):
    def add_all(self, sources: list[Source]) -> None:
        """Add every source, or none: ``DuplicateSource`` when an id is taken (or given twice)."""
        ...

    def get(self, source_id: str) -> Source | None: ...

    def list(self) -> list[Source]:
        """Every source, by id."""
        ...

    def remove(self, source_id: str) -> bool:
        """Whether there was such a source."""
        ...


class DuplicateSource(SourceError):
    def __init__(self, source_id: str) -> None:
        self.source_id = source_id
        super().__init__(f"a source with id {source_id!r} already exists")


def default_id(url: str, mapping: str) -> str:
    """A stable id for a source added without one: the same URL and mapping give the same id."""
    return "s-" + hashlib.sha256(f"{mapping}\n{url}".encode()).hexdigest()[:12]


def source_from(data: dict[str, Any], rules: RuleSet) -> Source:
    """A source from its fields (a line of a sources file, or the flags), checked against ``rules``."""
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise SourceError(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(KEYS))})")
    url = _url(data.get("url"))
    mapping = _mapping(data.get("mapping"), rules)
    fields = [f.name for m in rules if m.name == mapping for f in m.fields]
    identity = data.get("identity") or "url"
    if not isinstance(identity, str) or identity not in fields:
        names = ", ".join(fields) or "none"
        raise SourceError(f"identity: mapping {mapping!r} has no field {identity!r} to name items (fields: {names})")
    low = _priority(data, "priority_min", DEFAULT_PRIORITY_MIN)
    high = _priority(data, "priority_max", DEFAULT_PRIORITY_MAX)
    if low > high:
        raise SourceError(f"priority_min {low:g} is above priority_max {high:g}")
    pagination, parameter = _pagination(data.get("pagination"), data.get("pagination_parameter"))
    max_pages = data.get("max_pages", DEFAULT_MAX_PAGES)
    if isinstance(max_pages, bool) or not isinstance(max_pages, int) or not 1 <= max_pages <= MAX_PAGES_LIMIT:
        raise SourceError(f"max_pages must be a whole number from 1 to {MAX_PAGES_LIMIT}, not {max_pages!r}")
    strategy = data.get("strategy") or "tokens"
    if strategy not in STRATEGIES:
        raise SourceError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    source_id = data.get("id") or default_id(url, mapping)
    if not isinstance(source_id, str) or not _ID.fullmatch(source_id):
        raise SourceError(f"id must be 1-64 letters, digits, '.', '_' or '-', first a letter or digit: {source_id!r}")
    return Source(source_id, url, mapping, identity, low, high, pagination, parameter, max_pages, strategy)


def _url(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise SourceError("url: a source needs a URL")
    try:
        return canonicalize(raw.strip())
    except InvalidURL as exc:
        raise SourceError(f"url: invalid URL {raw!r}: {exc}") from exc


def _mapping(raw: Any, rules: RuleSet) -> str:
    names = [m.name for m in rules]
    if not isinstance(raw, str) or raw not in names:
        known = ", ".join(names) or "none: give --rules DIR"
        raise SourceError(f"mapping: no mapping named {raw!r} (mappings: {known})")
    if next(m for m in rules if m.name == raw).items is None:
        raise SourceError(f"mapping: {raw!r} has no items: a source's mapping must select its items")
    return raw


def _priority(data: dict[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SourceError(f"{key} must be a number of checks a day, not {value!r}")
    if not 0 < value <= MAX_PRIORITY:
        raise SourceError(f"{key} must be above 0 and at most {MAX_PRIORITY:g} checks a day, not {value:g}")
    return float(value)


def _pagination(kind: Any, parameter: Any) -> tuple[str | None, str | None]:
    if kind is None:
        if parameter is not None:
            raise SourceError("pagination_parameter needs pagination (page or cursor)")
        return None, None
    if kind not in PAGINATIONS:
        raise SourceError(f"pagination must be one of {', '.join(PAGINATIONS)}, not {kind!r}")
    if kind == "next":
        if parameter is not None:
            raise SourceError("pagination next follows the mapping's next link: it takes no parameter")
        return kind, None
    parameter = parameter if parameter is not None else DEFAULT_PARAMETER[kind]
    if not isinstance(parameter, str) or not _PARAMETER.fullmatch(parameter):
        raise SourceError(f"pagination_parameter must be a query parameter name, not {parameter!r}")
    return kind, parameter


def sources_from(entries: list[tuple[str, dict[str, Any]]], rules: RuleSet) -> list[Source]:
    """Each entry (where it came from, its fields) as a source; ``SourceError`` on the first bad one, where it is."""
    sources = []
    for where, entry in entries:
        try:
            sources.append(source_from(entry, rules))
        except SourceError as exc:
            raise SourceError(f"{where}: {exc}" if where else str(exc)) from None
    return sources


def duplicate_at(entries: list[tuple[str, dict[str, Any]]], sources: list[Source], exc: DuplicateSource) -> SourceError:
    """The store's refusal of a duplicate id, saying where it is: its second line in this batch, else its only one."""
    wheres = [where for (where, _), source in zip(entries, sources, strict=True) if source.id == exc.source_id]
    where = wheres[1] if len(wheres) > 1 else wheres[0] if wheres else ""
    return SourceError(f"{where}: {exc}" if where else str(exc))
