"""Canonicalise: a URL that cannot be crawled is dropped with its reason.

The link's canonical URL is worked out once (``Link``: not at all for a
message that says it is canonical); here only the ones that have none stop,
noted under the fingerprint of what was sent ("invalid URL: bad
percent-escape '%zz'").

Settings: ``settings.MAX_URL_LENGTH`` (``crawlstack.urls``), and those of
``DropNotes``.
"""

from __future__ import annotations

from crawlstack.dispatch.drops import DropNotes
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox


class Canonicalise:
    def __init__(self, drops: DropNotes) -> None:
        self.drops = drops

    def __call__(self, link: Link, outbox: Outbox) -> Decision | None:
        if link.invalid is None:
            return None
        return self.drops.drop(link, f"invalid URL: {link.invalid}", "invalid")
