"""What dispatch's components use beside the shared ports (``crawlstack.ports``): a dedupe claim, and two stores.

``ScopeRecords`` is the scope port (``crawlstack.aws.ScopeStore``);
``RobotsCache`` is the part of the hosts port (``crawlstack.ports.Hosts``) dispatch reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from crawlstack.fetch.robots_txt import RobotsRecord


@dataclass(frozen=True)
class Claim:
    """A dedupe claim: truthy when won; when lost, the depth and state of the item already there."""

    won: bool
    depth: int | None = None
    state: str | None = None
    claimed_by: str | None = None  # the SQS message id that claimed it (``Urls.seen``)

    def __bool__(self) -> bool:
        return self.won


class ScopeRecords(Protocol):
    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool: ...
    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...


class RobotsCache(Protocol):
    def get_robots(self, origin: str) -> RobotsRecord | None: ...
