"""HTTP fetching: streamed bodies with a size cap, timeouts, and the address guard.

Settings: ``settings.MAX_BODY_BYTES``, ``CONNECT_TIMEOUT_SECONDS``,
``READ_TIMEOUT_SECONDS``, ``TOTAL_DEADLINE_SECONDS``, ``TEXT_CONTENT_TYPES``,
``ROBOTS_MAX_REDIRECTS``; per crawl, ``allow_private`` CIDRs.

Page fetches do not follow redirects: a 3xx is recorded and its Location
goes back to the frontier, so every hop passes scope, dedupe, robots.txt and
politeness again.  robots.txt fetches follow up to five redirects here, as
RFC 9309 asks.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import requests

from crawlstack import settings

ROBOTS_TIMEOUTS = (5.0, 10.0)
ROBOTS_DEADLINE_SECONDS = 15.0


class AddressRefused(Exception):
    """The host resolves to an address the crawl may not reach."""


class AddressGuard:
    """Refuses loopback, private, link-local, reserved and unspecified addresses.

    Unless a CIDR in ``allow_private`` contains the address.
    """

    def __init__(self, allow_private: Iterable[str] = ()) -> None:
        self.allowed = [ipaddress.ip_network(c.strip(), strict=False) for c in allow_private if c.strip()]

    def check(self, host: str, port: int) -> str:
        """Resolve ``host`` and return the first address, or raise AddressRefused."""
        try:
            infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise AddressRefused(f"DNS lookup failed: {exc}") from exc
        addresses = [str(info[4][0]) for info in infos]
        for addr in addresses:
            ip = ipaddress.ip_address(addr.split("%", 1)[0])
            if self._refused(ip) and not any(ip in net for net in self.allowed):
                raise AddressRefused(f"address {ip} is not public (use --allow-private to allow it)")
        return addresses[0]

    @staticmethod
    def _refused(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return (
            ip.is_private
            or ip.is_loopback
            or ip.is_link_local
            or ip.is_unspecified
            or ip.is_reserved
            or ip.is_multicast
        )


@dataclass
class FetchResult:
    url: str
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    truncated: bool = False
    error: str = ""
    ip_address: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0

    def header(self, name: str) -> str:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return ""

    @property
    def content_type(self) -> str:
        return self.header("content-type").split(";", 1)[0].strip().lower()


_local = threading.local()


def _session() -> requests.Session:
    # One session per thread: connection reuse without sharing a pool across
    # threads, which requests does not promise to be safe.
    session = getattr(_local, "session", None)
    if session is None:
        session = requests.Session()
        session.trust_env = False
        _local.session = session
    return session


def is_text_type(content_type: str) -> bool:
    return content_type in settings.TEXT_CONTENT_TYPES or content_type.endswith(("+xml", "+json"))


def fetch(
    url: str,
    user_agent: str,
    guard: AddressGuard,
    *,
    max_bytes: int = settings.MAX_BODY_BYTES,
    text_only: bool = True,
    timeouts: tuple[float, float] = (settings.CONNECT_TIMEOUT_SECONDS, settings.READ_TIMEOUT_SECONDS),
    deadline_seconds: float = settings.TOTAL_DEADLINE_SECONDS,
) -> FetchResult:
    """GET ``url`` once.  Never raises for network trouble: see ``error``."""
    result = FetchResult(url=url, started_at=time.time())
    parts = urlsplit(url)
    try:
        result.ip_address = guard.check(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    except AddressRefused as exc:
        result.error = str(exc)
        result.finished_at = time.time()
        return result
    headers = {"User-Agent": user_agent, "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    result.request_headers = list(headers.items())
    deadline = result.started_at + deadline_seconds
    try:
        with _session().get(
            url,
            headers=headers,
            stream=True,
            allow_redirects=False,
            timeout=timeouts,
        ) as resp:
            result.status = resp.status_code
            result.reason = resp.reason or ""
            result.headers = list(resp.headers.items())
            result.request_headers = [(k, str(v)) for k, v in resp.request.headers.items()]
            if text_only and result.content_type and not is_text_type(result.content_type):
                result.finished_at = time.time()
                return result
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_content(64 * 1024):
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    result.truncated = True
                    break
                if time.time() > deadline:
                    result.error = f"deadline of {deadline_seconds:.0f}s exceeded"
                    break
            result.body = b"".join(chunks)[:max_bytes]
    except requests.RequestException as exc:
        result.error = _describe(exc)
    result.finished_at = time.time()
    return result


def fetch_robots(origin: str, user_agent: str, guard: AddressGuard) -> FetchResult:
    """GET origin/robots.txt, following up to ROBOTS_MAX_REDIRECTS redirects."""
    url = origin + "/robots.txt"
    for _ in range(settings.ROBOTS_MAX_REDIRECTS + 1):
        # Short timeouts: dispatch waits for this, inside its own Lambda timeout.
        result = fetch(
            url,
            user_agent,
            guard,
            max_bytes=settings.ROBOTS_MAX_BYTES,
            text_only=False,
            timeouts=ROBOTS_TIMEOUTS,
            deadline_seconds=ROBOTS_DEADLINE_SECONDS,
        )
        location = result.header("location")
        if result.status in (301, 302, 303, 307, 308) and location:
            url = urljoin(url, location)
            continue
        return result
    result.status = None
    result.error = f"more than {settings.ROBOTS_MAX_REDIRECTS} redirects"
    return result


def _describe(exc: requests.RequestException) -> str:
    if isinstance(exc, requests.ConnectTimeout):
        return "connect timeout"
    if isinstance(exc, requests.ReadTimeout):
        return "read timeout"
    if isinstance(exc, requests.ConnectionError):
        return "connection failed"
    if isinstance(exc, requests.exceptions.ContentDecodingError):
        return "corrupt compressed body"
    return type(exc).__name__
