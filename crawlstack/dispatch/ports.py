"""The stores dispatch's components use, as the domain sees them (``crawlstack.aws`` implements them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from crawlstack.config import CrawlConfig
from crawlstack.robots import RobotsRecord


class Crawls(Protocol):
    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig: ...
    def add_seed_host(self, crawl_id: str, host: str) -> None: ...
    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None: ...


@dataclass(frozen=True)
class Claim:
    """A dedupe claim: truthy when won; when lost, the depth and state of the item already there."""

    won: bool
    depth: int | None = None
    state: str | None = None
    claimed_by: str | None = None  # the SQS message id that claimed it (``Urls.seen``)

    def __bool__(self) -> bool:
        return self.won


class Urls(Protocol):
    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> Claim: ...
    def seen(self, crawl_id: str, fp: str) -> Claim | None:
        """A read (eventually consistent): the URL's lost claim if the crawl has it and it may not be claimed again.

        None when there is no item, or it is ``claimable``; a read may miss a
        claim just written, which the conditional claim then finds.
        """
        ...

    def seen_many(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Claim | None]:
        """``seen`` of each (crawl, fingerprint), in batched reads (eventually consistent)."""
        ...

    def lower_depth(self, crawl_id: str, fp: str, depth: int) -> bool: ...
    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...
    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...


class ScopeRecords(Protocol):
    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool: ...
    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool: ...


class RobotsCache(Protocol):
    def get_robots(self, origin: str) -> RobotsRecord | None: ...
