"""The stores every stage shares, each declared once here as the domain calls it.

Each is implemented on AWS (``crawlstack.aws``) and on local mode's SQLite
state (``crawlstack.local.sqlite``), and both run one conformance suite
(``tests/integration/test_*_port.py``); ``crawlstack.wiring.Stores`` holds one
of each, so mypy checks every implementation where it is wired.  A component
that needs less may declare a narrower Protocol under its own name
(``jobs.CrawlStates``, ``fetch.crawllog.ReadBlobs``).

The other ports are declared once beside the code that owns them:
``runs.ports.Runs`` and ``runs.ports.Backlog`` (host runs),
``dispatch.ports.ScopeRecords``, ``records.resolution.ResolvedRecords``,
``jobs.Held``, ``queueing.MessageQueue`` and the watch's
(``watch.scheduler.SourceList`` and ``PlanStore``).

Beside the Protocols, the records they exchange: a dedupe ``Claim``, a URL's
``UrlState`` and a host's ``RobotsRecord``.  No stage's code lives here, so
every stage imports it and it imports none.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from crawlstack import settings

if TYPE_CHECKING:
    from crawlstack.config import CrawlConfig


# --- the shapes the ports exchange ------------------------------------------

ALLOW_ALL = "allow-all"
DISALLOW_ALL = "disallow-all"
PARSED = "parsed"
TOO_MANY_REQUESTS = 429
# A Retry-After on an unavailable robots.txt is waited at least this long: a
# "0" must not make every dispatch fetch it again.
RETRY_AFTER_MIN_SECONDS = 60.0


@dataclass(frozen=True)
class Claim:
    """A dedupe claim: truthy when won; when lost, the depth and state of the item already there."""

    won: bool
    depth: int | None = None
    state: str | None = None
    claimed_by: str | None = None  # the SQS message id that claimed it (``Urls.seen``)

    def __bool__(self) -> bool:
        return self.won


@dataclass(frozen=True)
class UrlState:
    """What the urls table says of a URL before its fetch: its state, its last try, and when the next may start."""

    state: str | None
    attempt: int = 1
    retry_at: float = 0.0


@dataclass(frozen=True)
class RobotsRecord:
    """A host's robots.txt as cached in DynamoDB: what was fetched and when."""

    origin: str
    kind: str  # ALLOW_ALL | DISALLOW_ALL | PARSED
    body: str
    status: int | None
    fetched_at: float
    expires_at: float
    reason: str = ""

    @classmethod
    def from_fetch(
        cls, origin: str, status: int | None, body: bytes, error: str = "", retry_after: float | None = None
    ) -> RobotsRecord:
        """The record of one robots.txt fetch; ``retry_after``: its Retry-After in seconds, if it had one."""
        now = time.time()
        if status is not None and 200 <= status < 300:
            if len(body) >= settings.ROBOTS_MAX_BYTES:
                # Parsed up to the limit, as RFC 9309 §2.5 allows: whole lines only.
                body = body[: body.rfind(b"\n", 0, settings.ROBOTS_MAX_BYTES) + 1]
            text = body.decode("utf-8", errors="replace")
            return cls(origin, PARSED, text, status, now, now + settings.ROBOTS_TTL_SECONDS)
        if status is not None and 300 <= status < 400:
            reason = f"robots.txt {status}: {error or 'redirect not followed'}"
            return cls(origin, ALLOW_ALL, "", status, now, now + settings.ROBOTS_TTL_SECONDS, reason)
        if status is not None and 400 <= status < 500 and status != TOO_MANY_REQUESTS:
            return cls(origin, ALLOW_ALL, "", status, now, now + settings.ROBOTS_TTL_SECONDS, f"robots.txt {status}")
        ttl = float(settings.ROBOTS_ERROR_TTL_SECONDS)
        if status is not None and retry_after is not None:
            ttl = min(max(retry_after, RETRY_AFTER_MIN_SECONDS), settings.ROBOTS_TTL_SECONDS)
        if status == TOO_MANY_REQUESTS:
            reason = f"robots.txt unavailable ({status})"
        elif status is not None:
            reason = f"robots.txt {status}"
        elif error.startswith("address "):
            reason = error  # the address guard refused the host: say so, not "unreachable"
        else:
            reason = f"robots.txt unreachable: {error}"
        return cls(origin, DISALLOW_ALL, "", status, now, now + ttl, reason)

    def expired(self, now: float | None = None) -> bool:
        return (now if now is not None else time.time()) >= self.expires_at


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
