"""The stores ``Extractor`` uses: the crawls, results and urls tables, and the bucket."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from crawlstack.config import CrawlConfig


class Crawls(Protocol):
    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig: ...


class Results(Protocol):
    def put(self, record: dict[str, Any]) -> None: ...


class Blobs(Protocol):
    def get(self, key: str, bucket: str | None = None) -> bytes: ...
    def put(self, key: str, data: bytes, content_type: str) -> None: ...


class PageOutcomes(Protocol):
    """The urls table, where a page's crawl-log line comes from."""

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...
    def add_note(self, crawl_id: str, fp: str, note: str) -> None: ...
    def depths(self, crawl_id: str, fps: Iterable[str]) -> dict[str, int]: ...
