"""One check of a source, page by page: conditional GET, which items are new, the next page, the events.

A check asks for the source's URL with the validators of its last response
(``Validators``, sent by ``messages.CheckRef.request_headers``); a 304 is "nothing new".  Each page's items are
named by the source's ``identity`` field; the ones never seen for the
source are new (the caller decides that by a conditional write, and passes
the answer in).  ``next_page`` says where the check goes on: it stops on a
page with no item, on a page whose items were all seen before
(stop-on-seen), or after ``max_pages``; otherwise it follows the source's
pagination:

* ``next``: the mapping's first link (its ``url_parsers``, e.g. ``a[rel=next]``);
* ``page``: the page URL with its page-number parameter one higher (2 after the first);
* ``cursor``: the mapping's first link when it gives one (``url_template``), else
  the page URL with the cursor parameter set to the lowest identity on the page
  (seed 004's "lowest ID from the previous request as the new max_id").

Each new item is one event (``event_for``), its ``event_id`` the sha256 of
``source_id#identity``, so a replay gives the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crawlstack.crawllog import iso_time
from crawlstack.watch.sources import Source

NOT_MODIFIED = 304


@dataclass(frozen=True)
class Validators:
    """What the last response said about its version, for the next check's conditional GET."""

    etag: str | None = None
    last_modified: str | None = None

    @classmethod
    def of(cls, headers: Sequence[tuple[str, str]]) -> Validators:
        found = {name.lower(): value for name, value in headers}
        return cls(found.get("etag") or None, found.get("last-modified") or None)


def identity_of(source: Source, item: dict[str, Any]) -> str | None:
    """The item's name for the source: its identity field as text; None when it has none."""
    value = item.get(source.identity)
    if value is None or value == "" or isinstance(value, list | dict):
        return None
    return str(value)


@dataclass(frozen=True)
class PageSeen:
    """One page of a check: its URL, its number (1 first), its items by identity, the new ones, its links."""

    url: str
    number: int
    identities: tuple[str, ...]
    new: frozenset[str]
    links: tuple[str, ...] = ()


def next_page(source: Source, page: PageSeen) -> str | None:
    """Where the check goes on from ``page``, or None when it stops here."""
    if not page.identities or not page.new or page.number >= source.max_pages or source.pagination is None:
        return None
    if source.pagination == "next":
        return page.links[0] if page.links else None
    parameter = source.pagination_parameter or ""
    if source.pagination == "page":
        current = _query(page.url).get(parameter)
        number = int(current) + 1 if current is not None and current.isdigit() else 2
        return _with_query(page.url, parameter, str(number))
    if page.links:
        return page.links[0]
    return _with_query(page.url, parameter, _lowest(page.identities))


def _lowest(identities: Sequence[str]) -> str:
    """The smallest identity, numerically when all are whole numbers (ids of social APIs)."""
    if all(i.isdigit() for i in identities):
        return min(identities, key=int)
    return min(identities)


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def _with_query(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != name]
    return urlunsplit(parts._replace(query=urlencode([*query, (name, value)])))


def event_id(source_id: str, identity: str) -> str:
    return hashlib.sha256(f"{source_id}#{identity}".encode()).hexdigest()


def event_for(
    source: Source, identity: str, item: dict[str, Any], page_url: str, checked_at: float, published_at: float
) -> dict[str, Any]:
    """One line of ``OUT/events.jsonl``: a new item of a source."""
    url = item.get("url") if isinstance(item.get("url"), str) else page_url
    return {
        "event_id": event_id(source.id, identity),
        "source_id": source.id,
        "mapping": source.mapping,
        "identity": identity,
        "url": url,
        "fields": item,
        "checked_at": iso_time(checked_at),
        "published_at": iso_time(published_at),
    }
