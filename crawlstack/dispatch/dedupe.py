"""Dedupe: a conditional put on the urls table, so a URL goes to fetch once per crawl.

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

from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.ports import Urls

# States in which a URL's page has not been extracted yet.
UNFETCHED = frozenset({"queued", "retrying", "fetching"})


class Dedupe:
    def __init__(self, urls: Urls) -> None:
        self.urls = urls

    def __call__(self, link: Link, outbox: Outbox) -> Decision | None:
        msg = link.msg
        claim = self.urls.claim(
            msg.crawl_id, link.fp, link.url, msg.depth, claimer=link.message_id, record_id=msg.record_id
        )
        if claim:
            return None
        if claim.depth is not None and msg.depth < claim.depth and claim.state in UNFETCHED:
            # Found again along a shorter path before its fetch: the URL takes the
            # smaller depth, which extract reads, so its links go as far as they should.
            self.urls.lower_depth(msg.crawl_id, link.fp, msg.depth)
        return Decision(link.url, "deduped")
