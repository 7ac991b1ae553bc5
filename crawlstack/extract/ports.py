"""What ``Extractor`` uses of the urls table; the crawls and results tables and the bucket are ``crawlstack.ports``'."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class PageOutcomes(Protocol):
    """The urls table, where a page's crawl-log line comes from."""

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...
    def add_note(self, crawl_id: str, fp: str, note: str) -> None: ...
    def depths(self, crawl_id: str, fps: Iterable[str]) -> dict[str, int]: ...
