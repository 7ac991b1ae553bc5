"""What dispatch's components use beside the shared ports (``crawlstack.ports``): a dedupe claim, and two stores.

``ScopeRecords`` is the scope port (``crawlstack.aws.ScopeStore``);
``RobotsCache`` is the part of the hosts port (``crawlstack.ports.Hosts``) dispatch reads.
"""

from __future__ import annotations

from typing import Protocol

from crawlstack.ports import RobotsRecord


class ScopeRecords(Protocol):
    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool: ...
    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...


class RobotsCache(Protocol):
    def get_robots(self, origin: str) -> RobotsRecord | None: ...
