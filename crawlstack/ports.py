"""The stores every stage shares, each declared once here as the domain calls it.

Each is implemented on AWS (``crawlstack.aws``) and on local mode's SQLite
state (``crawlstack.local.sqlite``), and both run one conformance suite
(``tests/integration/test_*_port.py``); ``crawlstack.wiring.Stores`` holds one
of each, so mypy checks every implementation where it is wired.  A component
that needs less may declare a narrower Protocol under its own name
(``jobs.CrawlStates``, ``crawllog.ReadBlobs``).

The other ports are declared once beside the code that owns them:
``runs.ports.Runs`` and ``runs.ports.Backlog`` (host runs),
``dispatch.ports.ScopeRecords``, ``resolution.ResolvedRecords``,
``jobs.Held``, ``queueing.MessageQueue`` and the watch's
(``watch.scheduler.SourceList`` and ``PlanStore``).

Only typing here: every stage imports it, so it loads nothing at run time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from crawlstack.config import CrawlConfig
    from crawlstack.dispatch.ports import Claim
    from crawlstack.fetch.robots_txt import RobotsRecord
    from crawlstack.fetch.tries import UrlState


class Crawls(Protocol):
    """The crawls table: each crawl's config (with the defaults it was built with), seed hosts, state and budget."""

    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig: ...
    def put(self, config: CrawlConfig) -> None: ...

    def put_new(self, config: CrawlConfig, only: Collection[str] | None = None) -> bool:
        """Store a crawl's config unless it has one already; whether this call stored it.

        With ``only``, just those settings: the others follow the defaults where the crawl is read.
        """
        ...

    def add_seed_host(self, crawl_id: str, host: str) -> None: ...
    def set_state(self, crawl_id: str, state: str) -> None: ...
    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None: ...

    def count_logged(self, crawl_id: str, counts: dict[str, int]) -> None:
        """Add ``counts`` (outcome -> tries) to the crawl's counts of outcomes only the crawl log holds."""
        ...


class Urls(Protocol):
    """The urls table: one item per (crawl, URL fingerprint), its dedupe claim, its state and its outcome."""

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
    def depths(self, crawl_id: str, fps: Iterable[str]) -> dict[str, int]: ...

    def fetch_states(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], UrlState]:
        """Each (crawl, fingerprint)'s state, by consistent reads (batched); a key with no item is left out."""
        ...

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...
    def add_note(self, crawl_id: str, fp: str, note: str) -> None: ...
    def unclaim(self, crawl_id: str, fp: str, record_id: str, reason: str, stale_before: float) -> bool: ...
    def state(self, crawl_id: str, fp: str) -> str | None: ...
    def scan_crawl(self, crawl_id: str) -> Iterator[dict[str, Any]]: ...


class Hosts(Protocol):
    """The hosts table's robots.txt cache, by origin."""

    def get_robots(self, origin: str) -> RobotsRecord | None: ...
    def put_robots(self, record: RobotsRecord) -> None: ...


class Results(Protocol):
    """The results table: one item per extracted record."""

    def put(self, record: dict[str, Any]) -> None: ...


class Blobs(Protocol):
    """The pages bucket: WARCs, records and crawl-log objects, by key."""

    def put(self, key: str, data: bytes, content_type: str) -> None: ...
    def get(self, key: str, bucket: str | None = None) -> bytes: ...
    def keys(self, prefix: str, since: float | None = None) -> Iterator[str]: ...
