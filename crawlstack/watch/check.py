"""One check of a source, page by page: conditional GET, which items are new, the next page, the events.

A check asks for the source's URL with the validators of its last response
(``Validators``, sent by ``messages.CheckRef.request_headers``); a 304 is "nothing new".  Each page's items are
named by the source's ``identity`` field; the ones never seen for the
source are new (the caller decides that by a conditional write, and passes
the answer in).  ``next_page`` says where the check goes on.  It stops
where the page shows the check has reached what earlier checks saw, or the
listing's end (seeds 003 and 004):

* a page with no item, or with nothing new;
* a page holding any item an earlier check saw (an item first seen on an
  earlier page of this check is not one: the listing moved on meanwhile,
  or a cursor repeats its bound);
* ``page``: a page with fewer items than the check's first;
* ``cursor``: a page whose lowest identity is below the highest one the
  source's last check saw on its first page (``Validators.highest_id``);
  and a page whose mapping has ``url_parsers`` (a cursor field) that give
  no link, the cursor being null or missing;
* ``max_pages``.

Otherwise it follows the source's pagination:

* ``next``: the mapping's first link (its ``url_parsers``, e.g. ``a[rel=next]``);
* ``page``: the page URL with its page-number parameter one higher (2 after the first);
* ``cursor``: the mapping's first link when it has ``url_parsers``
  (``url_template``), else the page URL with the cursor parameter set to
  the lowest identity on the page (seed 004's "lowest ID from the previous
  request as the new max_id").

Identities compare as numbers when all are whole numbers (the ids of
social APIs), else as text.  Each new item is one event (``event_for``),
its ``event_id`` the sha256 of ``source_id#identity``, so a replay gives
the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from crawlstack.fetch.crawllog import iso_time
from crawlstack.watch.sources import Source

NOT_MODIFIED = 304


@dataclass(frozen=True)
class Validators:
    """What a check's first page said of the source's version, for the next check.

    ``etag`` and ``last_modified`` make its conditional GET; ``highest_id``,
    the highest identity on the page, is where a cursor check stops.
    """

    etag: str | None = None
    last_modified: str | None = None
    highest_id: str | None = None

    @classmethod
    def of(cls, headers: Sequence[tuple[str, str]], highest_id: str | None = None) -> Validators:
        found = {name.lower(): value for name, value in headers}
        return cls(found.get("etag") or None, found.get("last-modified") or None, highest_id)


def identity_of(source: Source, item: dict[str, Any]) -> str | None:
    """The item's name for the source: its identity field as text; None when it has none."""
    value = item.get(source.identity)
    if value is None or value == "" or isinstance(value, list | dict):
        return None
    return str(value)


@dataclass(frozen=True)
class PageSeen:
    """One page of a check: its URL, its number (1 first), its items by identity, the new ones, its links.

    ``earlier``: its items first seen on an earlier page of this check, not
    new and not seen before it either.  ``has_url_parsers``: the mapping
    gives the page's links, so no link is its answer.  ``first_items``: the
    check's first page's item count.  ``last_highest_id``: the highest
    identity the source's last check saw on its first page.
    """

    url: str
    number: int
    identities: tuple[str, ...]
    new: frozenset[str]
    links: tuple[str, ...] = ()
    earlier: frozenset[str] = frozenset()
    has_url_parsers: bool = False
    first_items: int | None = None
    last_highest_id: str | None = None


def next_page(source: Source, page: PageSeen) -> str | None:
    """Where the check goes on from ``page``, or None when it stops here."""
    if source.pagination is None or page.number >= source.max_pages or _caught_up(source, page):
        return None
    if source.pagination == "next":
        return page.links[0] if page.links else None
    parameter = source.pagination_parameter or ""
    if source.pagination == "page":
        current = _query(page.url).get(parameter)
        number = int(current) + 1 if current is not None and current.isascii() and current.isdigit() else 2
        return _with_query(page.url, parameter, str(number))
    if page.links or page.has_url_parsers:
        return page.links[0] if page.links else None  # a null cursor ends the check
    return _with_query(page.url, parameter, _lowest(page.identities))


def _caught_up(source: Source, page: PageSeen) -> bool:
    """The page reaches what an earlier check saw, or the listing's end."""
    if not page.identities or not page.new or len(page.new | page.earlier) < len(page.identities):
        return True
    if source.pagination == "page" and page.first_items is not None:
        return len(page.identities) < page.first_items
    if source.pagination == "cursor" and page.last_highest_id is not None:
        return _below(_lowest(page.identities), page.last_highest_id)
    return False


def _lowest(identities: Sequence[str]) -> str:
    """The smallest identity, numerically when all are whole numbers (ids of social APIs)."""
    return min(identities, key=_order_key(identities))


def highest_of(identities: Sequence[str]) -> str | None:
    """The largest identity, numerically when all are whole numbers; None for no identity."""
    return max(identities, key=_order_key(identities)) if identities else None


def _below(identity: str, bound: str) -> bool:
    key = _order_key((identity, bound))
    return key(identity) < key(bound)


def _order_key(identities: Sequence[str]) -> Callable[[str], Any]:
    """Numeric order when all are whole numbers (compared as digit strings: any length), else text order."""
    if all(i.isascii() and i.isdigit() for i in identities):
        return lambda i: (len(i.lstrip("0")), i.lstrip("0"))
    return lambda i: i


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
