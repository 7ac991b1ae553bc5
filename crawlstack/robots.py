"""robots.txt policy per RFC 9309, parsed with protego.

What a robots.txt fetch means:

* 2xx: parse the body (at most ``settings.ROBOTS_MAX_BYTES``);
* 4xx: no restrictions, allow all (RFC 9309 §2.3.1.3);
* 5xx or unreachable: disallow all (§2.3.1.4), cached for a shorter time
  (``settings.ROBOTS_ERROR_TTL_SECONDS``) so a passing outage heals;
* redirects are followed up to ``settings.ROBOTS_MAX_REDIRECTS`` by the fetcher.

The cache keeps the body gzipped (``pack_body``) so a 500 KiB robots.txt
fits one DynamoDB item (400 KB); a body that does not fit even compressed
(random text, in practice never a real robots.txt) keeps the whole lines
from its start that do.

Rules are matched on the user agent's product token (``crawlstack`` in
``crawlstack/0.1 (+https://...)``), as §2.2.1 asks.
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass

from protego import Protego

from crawlstack import settings

ALLOW_ALL = "allow-all"
DISALLOW_ALL = "disallow-all"
PARSED = "parsed"


def product_token(user_agent: str) -> str:
    """The product token robots.txt groups are matched on: letters, digits, _ and -."""
    token = user_agent.strip().split("/", 1)[0].split(" ", 1)[0]
    return "".join(ch for ch in token if ch.isalnum() or ch in "-_") or user_agent


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
    def from_fetch(cls, origin: str, status: int | None, body: bytes, error: str = "") -> RobotsRecord:
        now = time.time()
        if status is not None and 200 <= status < 300:
            if len(body) >= settings.ROBOTS_MAX_BYTES:
                # Parsed up to the limit, as RFC 9309 §2.5 allows: whole lines only.
                body = body[: body.rfind(b"\n", 0, settings.ROBOTS_MAX_BYTES) + 1]
            text = body.decode("utf-8", errors="replace")
            return cls(origin, PARSED, text, status, now, now + settings.ROBOTS_TTL_SECONDS)
        if status is not None and 400 <= status < 500:
            return cls(origin, ALLOW_ALL, "", status, now, now + settings.ROBOTS_TTL_SECONDS, f"robots.txt {status}")
        if status is not None:
            reason = f"robots.txt {status}"
        elif error.startswith("address "):
            reason = error  # the address guard refused the host: say so, not "unreachable"
        else:
            reason = f"robots.txt unreachable: {error}"
        return cls(origin, DISALLOW_ALL, "", status, now, now + settings.ROBOTS_ERROR_TTL_SECONDS, reason)

    def expired(self, now: float | None = None) -> bool:
        return (now if now is not None else time.time()) >= self.expires_at


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


class RobotsPolicy:
    """Answers "may this user agent fetch this URL?" and "what Crawl-delay?"."""

    def __init__(self, record: RobotsRecord) -> None:
        self.record = record
        self._parser = Protego.parse(record.body) if record.kind == PARSED else None

    def allows(self, url: str, user_agent: str) -> bool:
        if self.record.kind == ALLOW_ALL:
            return True
        if self.record.kind == DISALLOW_ALL or self._parser is None:
            return False
        return bool(self._parser.can_fetch(url, product_token(user_agent)))

    def crawl_delay(self, user_agent: str) -> float | None:
        if self._parser is None:
            return None
        delay = self._parser.crawl_delay(product_token(user_agent))
        if delay is None:
            return None
        return min(float(delay), settings.MAX_CRAWL_DELAY_SECONDS)

    def disallow_reason(self) -> str:
        if self.record.kind == DISALLOW_ALL:
            if self.record.reason.startswith("address "):
                return self.record.reason
            return f"robots: {self.record.reason}, host disallowed"
        return "robots: disallowed by robots.txt"
