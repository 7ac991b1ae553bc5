"""Extract's side of a watch: what a checked page's items mean for its source.

For each page of a check (a WARC exchange whose metadata names a
``CheckRef``), ``CheckPages.page_seen``:

1. names each item by the source's identity and records the page's items as
   seen; the ones first seen on this page are new, and their events go to
   the outbox in the same write (``WatchStore.record_page``, which tells
   each item's first page: an item an earlier page of this check saw first
   is neither new nor seen before the check);
2. keeps the page's new items as records, and only them;
3. sends the check's next page to the frontier (``check.next_page``), or ends
   the check: its new items over its pages move the source's priority
   (``schedule.priority_after``), once even if the last page comes again.
   The next page's ``CheckRef`` carries the first page's item count and
   the highest identity of the source's last check, where paging stops.

A 304 (or any answer but a 2xx) has no items: the check ends there, having
found nothing new.  The first page's ``ETag`` and ``Last-Modified`` are kept
for the next check's conditional GET, and for a cursor source its highest
identity, where the next check stops (``Validators``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from crawlstack.messages import CheckRef, FrontierMessage
from crawlstack.watch.check import (
    NOT_MODIFIED,
    PageSeen,
    Validators,
    event_for,
    highest_of,
    identity_of,
    next_page,
)
from crawlstack.watch.schedule import SourceState, check_ended
from crawlstack.watch.sources import Source

WATCH_CRAWL_ID = "watch"


class SourceLookup(Protocol):
    def get(self, source_id: str) -> Source | None: ...


class WatchStore(Protocol):
    def record_page(
        self, source_id: str, page_key: str, identities: list[str], events: dict[str, dict[str, Any]], now: float
    ) -> dict[str, str]:
        """Each of the page's identities and the page key that first saw it: the new ones', ``page_key``."""
        ...

    def page_done(self, source_id: str, slot: str, page: int, new_items: int) -> None: ...

    def finish_check(
        self, source_id: str, slot: str, update: Callable[[SourceState, int], SourceState], first: SourceState
    ) -> bool: ...

    def set_validators(self, source_id: str, validators: Validators, first: SourceState) -> None: ...


class CheckPages:
    def __init__(
        self,
        sources: SourceLookup,
        store: WatchStore,
        send: Callable[[list[str]], object],
        clock: Callable[[], float],
        time_of: Callable[[float], float] = float,
    ) -> None:
        """``clock``: the watch's time (simulated in a simulation); ``time_of``: a fetch's wall time on that clock."""
        self.sources = sources
        self.store = store
        self.send = send
        self.clock = clock
        self.time_of = time_of
        # Pages read, 304s among them, and new items: the extract function's metrics (taken by ``take_counts``).
        self.counts: Counter[str] = Counter()

    def take_counts(self) -> dict[str, int]:
        """The counts since the last call."""
        taken, self.counts = dict(self.counts), Counter()
        return taken

    def mapping_of(self, ref: CheckRef) -> str | None:
        """The mapping that reads the check's pages: its source's, whatever else matches the URL."""
        source = self.sources.get(ref.source_id)
        return source.mapping if source is not None else None

    def page_seen(
        self,
        ref: CheckRef,
        url: str,
        status: int,
        headers: Sequence[tuple[str, str]],
        records: list[dict[str, Any]],
        links: Sequence[str],
        fetched_at: float,
        read: bool = True,
        has_url_parsers: bool = False,
    ) -> list[dict[str, Any]]:
        """The page's records to keep: its new items'.

        ``read``: the page was read whole; only then are its validators kept, or a
        page that failed would be answered 304 until it changed.  ``has_url_parsers``:
        the source's mapping has ``url_parsers``, so ``links`` are all the ways on (a
        cursor field); without, a cursor check pages on from the lowest identity.
        """
        source = self.sources.get(ref.source_id)
        if source is None:
            return []  # removed since the check was planned
        self.counts["pages"] += 1
        self.counts["not_modified"] += status == NOT_MODIFIED
        first = SourceState.first(source)
        by_identity: dict[str, dict[str, Any]] = {}
        for record in records:
            identity = identity_of(source, record.get("fields") or {})
            if identity is not None:
                by_identity.setdefault(identity, record)
        identities = tuple(by_identity)
        if ref.page == 1 and read and status != NOT_MODIFIED and 200 <= status < 300:
            # A cursor check stops below the highest identity its source's last check saw first.
            highest = (highest_of(identities) or ref.highest_id) if source.pagination == "cursor" else None
            self.store.set_validators(source.id, Validators.of(headers, highest), first)
        now, checked_at = self.clock(), self.time_of(fetched_at)
        events = {
            identity: event_for(source, identity, record.get("fields") or {}, url, checked_at, now)
            for identity, record in by_identity.items()
        }
        page_key = f"{ref.slot} p{ref.page}"
        first_pages = self.store.record_page(source.id, page_key, list(identities), events, now)
        new = frozenset(i for i, key in first_pages.items() if key == page_key)
        # Items an earlier page of this check saw first: the listing moved on, or a cursor repeats its bound.
        earlier = frozenset(i for i, key in first_pages.items() if _slot_of(key) == ref.slot) - new
        self.store.page_done(source.id, ref.slot, ref.page, len(new))
        self.counts["new_items"] += len(new)
        first_items = len(identities) if ref.page == 1 else ref.first_items
        seen = PageSeen(
            url,
            ref.page,
            identities,
            new,
            tuple(links),
            earlier=earlier,
            has_url_parsers=has_url_parsers,
            first_items=first_items,
            last_highest_id=ref.highest_id,
        )
        following = next_page(source, seen) if 200 <= status < 300 else None
        if following is not None:
            step = CheckRef(source.id, ref.slot, ref.page + 1, highest_id=ref.highest_id, first_items=first_items)
            self.send([FrontierMessage(following, 0, WATCH_CRAWL_ID, check=step).to_json()])
        else:
            self.store.finish_check(source.id, ref.slot, check_ended(source, checked_at), first)
        return [by_identity[i] for i in by_identity if i in new]


def _slot_of(page_key: str) -> str:
    """The check's slot in a page key (``<slot> p<page>``)."""
    return page_key.rpartition(" p")[0]
