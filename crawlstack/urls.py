"""URL canonicalisation, fingerprints and host keys.

Canonical form follows w3lib's ``canonicalize_url``: lowercase scheme and
host, default port and fragment dropped, query arguments sorted, path case
kept, percent-escapes normalised.  Two spellings of one page get one
fingerprint, so dedupe sees them as one URL.

Settings: ``settings.MAX_URL_LENGTH``.
"""

from __future__ import annotations

import hashlib
import ipaddress
from urllib.parse import urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from crawlstack import settings

ALLOWED_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidURL(ValueError):
    """A URL the crawler will not fetch; the message says why in a few words."""


def canonicalize(url: str) -> str:
    """Return the canonical form of an absolute http(s) URL, or raise InvalidURL."""
    url = url.strip()
    if len(url) > settings.MAX_URL_LENGTH:
        raise InvalidURL(f"longer than {settings.MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ALLOWED_SCHEMES:
            raise InvalidURL(f"scheme {scheme or '(none)'!r} is not http or https")
        if not parts.hostname:
            raise InvalidURL("no host")
        port = parts.port  # raises ValueError on a bad port
        canonical = canonicalize_url(url, keep_fragments=False)
    except InvalidURL:
        raise
    except (ValueError, UnicodeError) as exc:
        raise InvalidURL(str(exc) or "malformed") from exc
    # w3lib keeps an explicit default port (http://h:80/); RFC 3986 says it is
    # the same resource, so drop it.
    cparts = urlsplit(canonical)
    if port is not None and port == _DEFAULT_PORTS[scheme]:
        host = cparts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if cparts.username is not None:
            netloc = f"{cparts.netloc.rsplit('@', 1)[0]}@{netloc}"
        canonical = urlunsplit((cparts.scheme, netloc, cparts.path or "/", cparts.query, ""))
    elif not cparts.path:
        canonical = urlunsplit((cparts.scheme, cparts.netloc, "/", cparts.query, ""))
    # A host w3lib dropped ("\x1b") or IDNA left as it was ("\x80"): not a URL to fetch or key.
    if not urlsplit(canonical).hostname or not (canonical.isascii() and canonical.isprintable()):
        raise InvalidURL("bad host name")
    if len(canonical) > settings.MAX_URL_LENGTH:  # percent-encoding lengthened it past the cap
        raise InvalidURL(f"longer than {settings.MAX_URL_LENGTH} characters")
    return canonical


def fingerprint(canonical_url: str) -> str:
    """A short stable hash of a canonical URL (dedupe keys, S3-safe names)."""
    return hashlib.sha256(canonical_url.encode("utf-8")).hexdigest()[:32]


def host_of(url: str) -> str:
    """The host name, lowercase, without port: the unit of politeness."""
    return (urlsplit(url).hostname or "").lower()


def origin_of(url: str) -> str:
    """scheme://host[:port]: the unit robots.txt applies to (RFC 9309 §2.3)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], "", "", ""))


def robots_url(url: str) -> str:
    return origin_of(url) + "/robots.txt"


def resolve_link(base_url: str, href: str) -> str:
    """Resolve an href found on a page against the page's base URL.

    Raises InvalidURL for hrefs that cannot be crawled (javascript:, mailto:,
    data:, malformed), so the caller can log the reason.
    """
    href = href.strip()
    if not href:
        raise InvalidURL("empty href")
    try:
        absolute = urljoin(base_url, href)
    except ValueError as exc:
        raise InvalidURL(str(exc)) from exc
    return canonicalize(absolute)


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def url_correlation_id(url: str) -> str | None:
    """The fingerprint of ``url``'s canonical form (the urls table's key), or None for a URL that has none."""
    try:
        return fingerprint(canonicalize(url))
    except InvalidURL:
        return None
