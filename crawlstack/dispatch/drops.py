"""Notes of URLs dropped before dedupe for what they are, once per container, for the crawl log.

A URL dropped for what it is (invalid, out of scope, a port not allowed, a
trap shape) is noted in the urls table as ``dropped`` with its reason, only
where the crawl has no item for it yet and taken over by a later claim
(``ScopeRecords.note_drop``).  Such URLs are never fetched, so they bring no
more links: the notes cost no more than the claims they stand in for.

Settings: ``settings.DROPPED_NOTE_CACHE_SIZE`` (URLs a container remembers
it noted: a link repeated on every page costs one write, not one per copy),
``settings.MAX_URL_LENGTH`` (an invalid URL is noted cut to it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from crawlstack import settings
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.ports import ScopeRecords


class NotedDrops:
    """A bounded, least-recently-used memory of the URLs this container noted as dropped."""

    def __init__(self, size: int = settings.DROPPED_NOTE_CACHE_SIZE) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()
        # Local mode runs two dispatch invocations at once on one container's state.
        self._lock = threading.Lock()

    def add(self, crawl_id: str, fp: str) -> bool:
        """Remember the URL; False if it was remembered already."""
        key = (crawl_id, fp)
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            while len(self._keys) > self.size:
                self._keys.popitem(last=False)
            return True


class DropNotes:
    """Drops a link, noting it once per container (no notes without ``scope_records``)."""

    def __init__(self, scope_records: ScopeRecords | None) -> None:
        self.scope_records = scope_records
        self._noted = NotedDrops()

    def drop(self, link: Link, reason: str, kind: str) -> Decision:
        if self.scope_records is not None and self._noted.add(link.msg.crawl_id, link.fp):
            url = link.url
            # The URL as noted is bounded: an invalid one may be any length.
            shown = url if len(url) <= settings.MAX_URL_LENGTH else url[: settings.MAX_URL_LENGTH] + "…"
            self.scope_records.note_drop(link.msg.crawl_id, link.fp, shown, link.msg.depth, reason)
        return Decision(link.url, "dropped", reason, kind)
