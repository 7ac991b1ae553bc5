"""BudgetAndCaps: the per-host cap (``max_pages_per_host``) and the crawl's page budget (``max_pages``).

``known_spent``, before the claim: a URL of a crawl whose budget this
container saw spent, or of a host it saw at its cap, is dropped at no
write, not noted (every link of every page already fetched would cost a
write, more than the crawl).

``take``, after the claim: one page of the host's cap (one conditional
counter per crawl and host name), then one of the budget; the host's cap
first, so a trap host at its cap spends none of the budget.  The first URL
over a limit in each container is skipped with the reason as its outcome.

The per-host counter is taken ``settings.HOST_CAP_CHUNK`` pages at a time
(one conditional write per chunk, not per URL); the container admits the
rest of a chunk from memory, and a chunk cut short (near the cap) falls back
to one page at a time.  The page budget is taken the same way, sized by
what it has left: each take's reply gives the count admitted, and the next
take asks for at most 1/``settings.BUDGET_CHUNK_SHARE`` of the rest (at
most ``settings.BUDGET_CHUNK``; one page at first and near the end).

Pages a container took and never used (it was recycled) are lost: a crawl
or host may get a little less than its limit, never more.  The per-host
counter is not idempotent: a message redelivered after it was counted
counts again (less, never more).  Without ``scope_records`` there is no
per-host cap.

Settings: ``settings.HOST_CAP_CHUNK``, ``settings.BUDGET_CHUNK``,
``settings.BUDGET_CHUNK_SHARE``, ``settings.DROPPED_NOTE_CACHE_SIZE`` (the
bound of each memory here); the crawl's ``max_pages`` and
``max_pages_per_host``.
"""

from __future__ import annotations

import threading

from crawlstack import settings
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.dispatch.ports import ScopeRecords
from crawlstack.ports import Crawls, Urls


class BudgetAndCaps:
    def __init__(self, crawls: Crawls, urls: Urls, scope_records: ScopeRecords | None = None) -> None:
        self.crawls = crawls
        self.urls = urls
        self.scope_records = scope_records
        # Crawls whose budget, and crawl and host pairs whose cap, this container saw spent.
        self._budget_spent: set[str] = set()
        self._host_full: set[tuple[str, str]] = set()
        # Pages of a host's cap this container took ahead and has yet to admit.
        self._host_allowance: dict[tuple[str, str], int] = {}
        # Pairs whose last chunk did not fit under the cap: one page at a time from there.
        self._host_near_cap: set[tuple[str, str]] = set()
        # Per crawl: pages of the budget this container took ahead and has yet
        # to admit, and how many its next take asks for.
        self._budget_allowance: dict[str, int] = {}
        self._budget_chunk: dict[str, int] = {}
        # Local mode runs two dispatch invocations on this state at once: an
        # allowance read by both would be spent twice, or lost.
        self._lock = threading.Lock()

    def known_spent(self, link: Link, outbox: Outbox) -> Decision | None:
        """Before the claim: dropped, at no write, if this container saw the budget or the host's cap spent."""
        crawl_id, cap = link.msg.crawl_id, link.crawl.max_pages_per_host
        if crawl_id in self._budget_spent:
            return Decision(link.url, "dropped", "page budget spent", "budget")
        if cap is not None and (crawl_id, link.host) in self._host_full:
            return Decision(link.url, "dropped", f"host page cap of {cap} reached", "host-cap")
        return None

    def take(self, link: Link, outbox: Outbox) -> Decision | None:
        """After the claim: a page of the host's cap, then of the budget; else the claimed URL is skipped."""
        crawl_id, config = link.msg.crawl_id, link.crawl
        cap = config.max_pages_per_host
        if cap is not None and self.scope_records is not None and not self._take_host_page(crawl_id, link.host, cap):
            if len(self._host_full) > settings.DROPPED_NOTE_CACHE_SIZE:
                self._host_full.clear()
            self._host_full.add((crawl_id, link.host))
            reason = f"host page cap of {cap} reached"
            self.urls.set_outcome(crawl_id, link.fp, "skipped", reason=reason)
            return Decision(link.url, "skipped", reason, "host-cap")
        if config.max_pages is not None and not self._take_budget_page(crawl_id, config.max_pages):
            self._budget_spent.add(crawl_id)
            self.urls.set_outcome(crawl_id, link.fp, "skipped", reason=f"page budget of {config.max_pages} spent")
            return Decision(link.url, "skipped", "page budget spent", "budget")
        return None

    def _take_host_page(self, crawl_id: str, host: str, cap: int) -> bool:
        """One page of the host's cap: from what this container took ahead, else a chunk, else one."""
        assert self.scope_records is not None
        key = (crawl_id, host)
        with self._lock:
            left = self._host_allowance.pop(key, 0)
            if left:
                self._host_allowance[key] = left - 1
                return True
            chunk = 1 if key in self._host_near_cap else min(settings.HOST_CAP_CHUNK, cap)
            if chunk > 1:
                if self.scope_records.count_host_page(crawl_id, host, cap, chunk):
                    if len(self._host_allowance) >= settings.DROPPED_NOTE_CACHE_SIZE:
                        self._host_allowance.clear()  # forgotten pages are never admitted: less than the cap
                    self._host_allowance[key] = chunk - 1
                    return True
                if len(self._host_near_cap) >= settings.DROPPED_NOTE_CACHE_SIZE:
                    self._host_near_cap.clear()
                self._host_near_cap.add(key)
            return self.scope_records.count_host_page(crawl_id, host, cap)

    def _take_budget_page(self, crawl_id: str, max_pages: int) -> bool:
        """One page of the crawl's budget: from what this container took ahead, else a take sized by what is left.

        The first take is one page; each take's reply says how many pages the
        budget has left, and the next asks for at most 1/BUDGET_CHUNK_SHARE of
        them (at most BUDGET_CHUNK).  A take refused for its size falls back to
        one page.
        """
        with self._lock:
            left = self._budget_allowance.pop(crawl_id, 0)
            if left:
                self._budget_allowance[crawl_id] = left - 1
                return True
            chunk = self._budget_chunk.pop(crawl_id, 1)
            admitted = self.crawls.take_pages(crawl_id, max_pages, chunk)
            if admitted is None and chunk > 1:
                chunk = 1
                admitted = self.crawls.take_pages(crawl_id, max_pages, chunk)
            if admitted is None:
                return False
            if len(self._budget_chunk) >= settings.DROPPED_NOTE_CACHE_SIZE:
                # Forgotten pages are never admitted: less than the budget, never more.
                self._budget_chunk.clear()
                self._budget_allowance.clear()
            share = (max_pages - admitted) // settings.BUDGET_CHUNK_SHARE
            self._budget_chunk[crawl_id] = max(1, min(settings.BUDGET_CHUNK, share))
            if chunk > 1:
                self._budget_allowance[crawl_id] = chunk - 1
            return True
