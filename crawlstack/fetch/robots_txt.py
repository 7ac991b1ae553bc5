"""robots.txt policy per RFC 9309, parsed with protego.

What a robots.txt fetch means:

* 2xx: parse the body (at most ``settings.ROBOTS_MAX_BYTES``);
* 4xx but 429: no restrictions, allow all (RFC 9309 §2.3.1.3);
* a 3xx the fetcher did not follow (``redirect_refusal``, or no usable
  Location): unavailable, allow all, as §2.3.1.2 lets a crawler treat a
  redirect chain it gives up on (Google reads one as a 404).  The server
  could have answered 404 itself, so a hostile redirect gains it nothing;
  a site whose robots.txt redirects to its home page is crawled, as a page
  with no rules would have let it be, without that request;
* 429 (the server is overloaded, as a 5xx says), 5xx or unreachable:
  disallow all (§2.3.1.4), cached for a shorter time
  (``settings.ROBOTS_ERROR_TTL_SECONDS``) so a passing outage heals, or
  until the response's ``Retry-After`` (at least ``RETRY_AFTER_MIN_SECONDS``,
  at most ``settings.ROBOTS_TTL_SECONDS``);
* redirects are followed up to ``settings.ROBOTS_MAX_REDIRECTS`` by the
  fetcher (more than that: unreachable), each only as ``redirect_refusal``
  allows: RFC 9309 §2.3.1.2 follows redirects to a robots.txt file "even
  across authorities", so any host will do (the address guard still judges
  every connection), but only a path ending in ``/robots.txt`` with no
  query, on a port the crawl allows (``CrawlConfig.port_allowed``), matching
  none of its deny patterns.  A redirect to a page, a query or another port
  is a request the crawl never chose (``/secret-admin?action=delete``).

protego ignores the lines it cannot read, as §2.2 asks.  Should it raise on
a hostile file all the same, the file is read as empty, allow all (what
Google does with robots.txt content it cannot parse); should it raise on
one URL, that URL is disallowed (the answer is unknown, and not fetching is
the polite side); a Crawl-delay it raises on, or that is not finite and
non-negative, is none (``crawlstack.fetch.headers.parse_crawl_delay``).

The cache keeps the body gzipped (``pack_body``) so a 500 KiB robots.txt
fits one DynamoDB item (400 KB); a body that does not fit even compressed
(random text, in practice never a real robots.txt) keeps the whole lines
from its start that do.

Rules are matched on the user agent's product token (``crawlstack`` in
``crawlstack/0.1 (+https://...)``), as §2.2.1 asks.
"""

from __future__ import annotations

import gzip
import logging
from typing import TypeVar
from urllib.parse import urlsplit

from protego import Protego

from crawlstack.config import CrawlConfig
from crawlstack.fetch.headers import parse_crawl_delay
from crawlstack.ports import ALLOW_ALL, DISALLOW_ALL, PARSED, RobotsRecord
from crawlstack.urls import InvalidURL, canonicalize, host_of, url_port

log = logging.getLogger(__name__)


def product_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched on: letters, digits, _ and -."""
    token = user_agent.strip().split("/", 1)[0].split(" ", 1)[0]
    return "".join(ch for ch in token if ch.isalnum() or ch in "-_") or user_agent


# Room for the packed body in one DynamoDB item (400 KB), the item's other attributes besides.
STORED_BODY_MAX_BYTES = 380_000


def pack_body(text: str, limit: int = STORED_BODY_MAX_BYTES) -> bytes:
    """``text`` gzipped in at most ``limit`` bytes: all of it, or the whole lines from its start that fit."""
    data = text.encode("utf-8")
    while True:
        packed = gzip.compress(data, mtime=0)
        if len(packed) <= limit:
            return packed
        keep = int(len(data) * limit / len(packed) * 0.95)
        data = data[: data.rfind(b"\n", 0, keep) + 1]


def unpack_body(packed: bytes) -> str:
    return gzip.decompress(packed).decode("utf-8", errors="replace")


def redirect_refusal(url: str, config: CrawlConfig) -> str | None:
    """None when a robots.txt fetch of ``config``'s crawl may follow a redirect to ``url``, else why not."""
    try:
        canonical = canonicalize(url)
    except InvalidURL as exc:
        return f"invalid URL: {exc}"
    parts = urlsplit(url)
    if not parts.path.endswith("/robots.txt") or parts.query:
        return "not a robots.txt file"
    port = url_port(canonical)
    if not config.port_allowed(host_of(canonical), port):
        return f"port {port} is not allowed"
    if config.deny:
        from crawlstack.scope import denied  # the rules and regex modules load only for a crawl that needs them

        if denied(canonical, config):
            return "matches a deny pattern"
    return None


class RobotsPolicy:
    """Answers "may this user agent fetch this URL?" and "what Crawl-delay?"."""

    def __init__(self, record: RobotsRecord) -> None:
        self.record = record
        self._parser = _parse(record) if record.kind == PARSED else None

    def allows(self, url: str, user_agent: str) -> bool:
        if self.record.kind == ALLOW_ALL:
            return True
        if self.record.kind == DISALLOW_ALL or self._parser is None:
            return False
        try:
            return bool(self._parser.can_fetch(url, product_token(user_agent)))
        except Exception as exc:
            log.warning("robots.txt of %s: protego failed on %.200r, disallowed: %r", self.record.origin, url, exc)
            return False

    def crawl_delay(self, user_agent: str) -> float | None:
        if self._parser is None:
            return None
        try:
            delay = self._parser.crawl_delay(product_token(user_agent))
        except Exception as exc:
            log.warning("robots.txt of %s: protego failed on Crawl-delay, none: %r", self.record.origin, exc)
            return None
        return parse_crawl_delay(delay)

    def disallow_reason(self) -> str:
        if self.record.kind == DISALLOW_ALL:
            if self.record.reason.startswith(("address ", "robots.txt unavailable")):
                return self.record.reason
            return f"robots: {self.record.reason}, host disallowed"
        return "robots: disallowed by robots.txt"


def _parse(record: RobotsRecord) -> Protego:
    """protego's reading of the body; a body it raises on is read as empty (allow all)."""
    try:
        return Protego.parse(record.body)
    except Exception as exc:
        log.warning("robots.txt of %s: protego failed, read as empty: %r", record.origin, exc)
        return Protego.parse("")


T = TypeVar("T")


def remember(memory: dict[str, T], origin: str, value: T, limit: int) -> None:
    """Keep ``value`` for ``origin`` in a container's memory of origins, forgetting the oldest past ``limit``."""
    memory.pop(origin, None)
    memory[origin] = value
    while len(memory) > limit:
        del memory[next(iter(memory))]
