"""Dedupe: a conditional put on the urls table, so a URL goes to fetch once per crawl.

A read comes first (``Urls.seen``, eventually consistent): a URL the crawl
has already is dropped on that read, for a tenth of what a refused
conditional write is billed (half a read unit against a write unit), and
most links dispatch sees are such duplicates: every extract container
sends each link it finds once.  The batch's reads are made together
before it is dispatched (``prepare``: ``Urls.seen_many``, a call per 100
URLs rather than one each); a URL the batch names twice is read once
there, for whichever of its links comes first, and the others read again
when their turn comes, after its claim.  Links that an earlier component
drops (out of scope, over a spent budget) are read there too, a half read
unit each, to no use: the frontier gets few such links, since extract
drops off-site ones.  Only a URL the read does not find, or one
its own message claimed (a redelivery), or one found again at a smaller
depth, goes on to the conditional put.

However many dispatchers race, one claim wins.  A redelivered message may
claim its own URL again (the claimer is its SQS message id), and any
message a URL that a complete record passed over unfetched.  The record id
goes with the claim: fetch gives the claim back only while this record
still holds it.  A URL found again at a smaller depth before its page is
extracted takes that depth (``lower_depth``): depth is the shortest path
from a seed, not the order of discovery.  Every outcome of a URL past this point is written to the
urls table.

Settings: none.
"""

from __future__ import annotations

from collections.abc import Iterable

from crawlstack.dispatch.link import Decision, Link, Prefetched
from crawlstack.dispatch.outbox import Outbox
from crawlstack.ports import Claim, Urls

# States in which a URL's page has not been extracted yet.
UNFETCHED = frozenset({"queued", "retrying", "fetching"})


class Dedupe:
    def __init__(self, urls: Urls) -> None:
        self.urls = urls

    def prepare(self, links: Iterable[Link]) -> None:
        """Read, in one go, what the crawl has of the batch's URLs; each answer serves the first of its links to go."""
        by_key: dict[tuple[str, str], list[Link]] = {}
        for link in links:
            if link.invalid is None:
                by_key.setdefault((link.msg.crawl_id, link.fp), []).append(link)
        if not by_key:
            return
        for key, claim in self.urls.seen_many(by_key).items():
            answer = Prefetched(claim)
            for link in by_key.get(key, ()):
                link.prefetched = answer

    def __call__(self, link: Link, outbox: Outbox) -> Decision | None:
        msg = link.msg
        # Read with the batch (``prepare``) for the URL's first link to come here, or now.
        read, seen = link.prefetched.take() if link.prefetched is not None else (False, None)
        if not read:
            seen = self.urls.seen(msg.crawl_id, link.fp)
        redelivered = bool(link.message_id) and seen is not None and seen.claimed_by == link.message_id
        if seen is not None and not redelivered and not _nearer(msg.depth, seen):
            return Decision(link.url, "deduped")
        claim = self.urls.claim(
            msg.crawl_id, link.fp, link.url, msg.depth, claimer=link.message_id, record_id=msg.record_id
        )
        if claim:
            return None
        if _nearer(msg.depth, claim):
            # Found again along a shorter path before its fetch: the URL takes the
            # smaller depth, which extract reads, so its links go as far as they should.
            self.urls.lower_depth(msg.crawl_id, link.fp, msg.depth)
        return Decision(link.url, "deduped")


def _nearer(depth: int, claim: Claim) -> bool:
    """Whether ``depth`` is smaller than the URL's, found before its fetch."""
    return claim.depth is not None and depth < claim.depth and claim.state in UNFETCHED
