"""URL canonicalisation, fingerprints and host keys.

Canonical form follows w3lib's ``canonicalize_url``: lowercase scheme and
host, default port and fragment dropped, query arguments sorted, path case
kept, percent-escapes normalised.  Two spellings of one page get one
fingerprint, so dedupe sees them as one URL.

A URL the crawler cannot fetch raises ``InvalidURL`` with a short reason
("bad percent-escape '%zz'", "broken IPv6 literal", "port 99999 out of
range", ...) and a ``kind`` (``REASON_KINDS``) that metrics count by.  Which
ports a crawl may fetch is scope's business (``crawlstack.scope``); here a
port only has to be a number from 1 to 65535.

Settings: ``settings.MAX_URL_LENGTH``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from urllib.parse import urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from crawlstack import settings

ALLOWED_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}


# The classes of reasons, for metrics (one count per kind) and log samples.
REASON_KINDS = ("empty", "too-long", "scheme", "no-host", "port", "ipv6", "host", "percent-escape", "malformed")


class InvalidURL(ValueError):
    """A URL the crawler will not fetch; the message says why in a few words, ``kind`` is its class (REASON_KINDS)."""

    def __init__(self, reason: str, kind: str = "malformed") -> None:
        super().__init__(reason)
        self.kind = kind


# "%" not followed by two hex digits.  Browsers pass such a URL on as it is;
# the crawler refuses it rather than guess which bytes were meant.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
# A host name once w3lib has IDNA-encoded it: letters, digits, "-", "_" and dots.
_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}")


def _short(text: str, limit: int = 40) -> str:
    """``text`` cut for a reason: reasons are one short line, whatever the URL."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_port(netloc: str) -> int | None:
    """The port of ``netloc`` (None when it has none), or InvalidURL saying what is wrong with it.

    Split as urlsplit splits it: after a bracketed IPv6 literal, else after the first colon.
    """
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        rest = hostport.partition("]")[2]
        if rest and not rest.startswith(":"):
            raise InvalidURL("broken IPv6 literal", "ipv6")
        text = rest[1:]
    else:
        text = hostport.partition(":")[2]
    if text == "":
        return None
    if not text.isascii() or not text.isdigit():
        raise InvalidURL(f"port {_short(text)!r} is not a number", "port")
    port = int(text)
    if not 1 <= port <= 65535:
        raise InvalidURL(f"port {_short(text)} out of range", "port")
    return port


def _check_host(hostname: str) -> None:
    """A canonical host name must be an IP literal or dot-separated labels of [a-z0-9_-], at most 253 characters."""
    if ":" in hostname:
        return  # a bracketed IPv6 literal, already checked by urlsplit
    labels = hostname[:-1].split(".") if hostname.endswith(".") else hostname.split(".")
    if len(hostname) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise InvalidURL(f"bad host name {_short(hostname)!r}", "host")


def canonicalize(url: str) -> str:
    """Return the canonical form of an absolute http(s) URL, or raise InvalidURL."""
    url = url.strip()
    if len(url) > settings.MAX_URL_LENGTH:
        raise InvalidURL(f"longer than {settings.MAX_URL_LENGTH} characters", "too-long")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        # urlsplit's only complaints are about brackets: "Invalid IPv6 URL",
        # "'zz::1' does not appear to be an IPv4 or IPv6 address".
        raise InvalidURL("broken IPv6 literal", "ipv6") from exc
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise InvalidURL(f"scheme {_short(scheme) or '(none)'!r} is not http or https", "scheme")
    if not parts.hostname:
        raise InvalidURL("no host", "no-host")
    port = _check_port(parts.netloc)
    bad = _BAD_ESCAPE.search(url.split("#", 1)[0])
    if bad is not None:
        raise InvalidURL(f"bad percent-escape {_short(url[bad.start() : bad.start() + 3])!r}", "percent-escape")
    try:
        canonical = canonicalize_url(url, keep_fragments=False)
    except UnicodeError as exc:  # IDNA could not encode the host
        raise InvalidURL(f"bad host name {_short(parts.hostname)!r}", "host") from exc
    except ValueError as exc:
        raise InvalidURL(_short(str(exc), 80) or "malformed") from exc
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
    _check_host(urlsplit(canonical).hostname or "")
    if not (canonical.isascii() and canonical.isprintable()):
        raise InvalidURL("characters that cannot be percent-encoded", "malformed")
    if len(canonical) > settings.MAX_URL_LENGTH:  # percent-encoding lengthened it past the cap
        raise InvalidURL(f"longer than {settings.MAX_URL_LENGTH} characters once percent-encoded", "too-long")
    return canonical


def looks_canonical(url: str) -> bool:
    """Whether ``url`` has the shape ``canonicalize`` gives, checked cheaply (no parsing, no w3lib).

    For a URL its sender says is canonical: an http(s) URL of printable
    ASCII, within the length cap, with a lowercase host (and port) followed
    by a path, no fragment and no bad percent-escape.  Passing it does not
    make a URL canonical; failing it sends the URL to ``canonicalize``.
    """
    if len(url) > settings.MAX_URL_LENGTH or not (url.isascii() and url.isprintable()) or " " in url or "#" in url:
        return False
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ALLOWED_SCHEMES:
        return False
    netloc, slash, _ = rest.partition("/")
    hostport = netloc.rpartition("@")[2]
    if not slash or not hostport or hostport != hostport.lower() or "?" in netloc:
        return False
    return _BAD_ESCAPE.search(url) is None


def fingerprint(canonical_url: str) -> str:
    """A short stable hash of a canonical URL (dedupe keys, S3-safe names)."""
    return hashlib.sha256(canonical_url.encode("utf-8")).hexdigest()[:32]


def host_of(url: str) -> str:
    """The host name, lowercase, without port: the unit of politeness ("" for a URL with none, or a broken one)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:  # a broken IPv6 literal in a dropped URL the crawl log still shows
        return ""


def url_port(url: str) -> int:
    """The port a URL is fetched on: its explicit port, else its scheme's default."""
    parts = urlsplit(url)
    return parts.port or _DEFAULT_PORTS.get(parts.scheme.lower(), 80)


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
        raise InvalidURL("empty href", "empty")
    try:
        absolute = urljoin(base_url, href)
    except ValueError as exc:
        # urljoin splits the href first: its only complaints are about brackets.
        raise InvalidURL("broken IPv6 literal", "ipv6") from exc
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
