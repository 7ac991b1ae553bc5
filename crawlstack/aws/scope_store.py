"""Dispatch's scope bookkeeping: per-host page counters and notes of dropped URLs."""

from __future__ import annotations

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.aws.urls import note_url


class ScopeStore:
    """Dispatch's scope bookkeeping (``crawlstack.dispatch.ScopeRecords``).

    * Per-host page counters: one item per host name and crawl in the hosts
      table, ``kind`` = ``pages#<crawl_id>``, beside the host's run item.
    * Notes of dropped URLs in the urls table: state ``dropped``, a reason,
      ``claimable`` (like ``UrlStore.note_skip``), written only where the
      crawl has no item for the URL, so the crawl log says why it was dropped.
    """

    def __init__(self, hosts_table: str, urls_table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.hosts_table = hosts_table
        self.urls_table = urls_table

    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool:
        """Take ``pages`` of the host's ``cap`` pages for the crawl at once; False if fewer are left.

        Guarded against a retried call as ``CrawlStore.count_page`` is: the
        token refuses a second add by the same call.
        """
        key = clients.key(host=host, kind=f"pages#{crawl_id}")
        return clients.take_from_counter(self.connection, self.hosts_table, key, pages, cap) is not None

    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        """Record a URL dropped before dedupe, only if the crawl has no item for it yet."""
        return note_url(self.connection, self.urls_table, crawl_id, fp, url, depth, "dropped", reason)
