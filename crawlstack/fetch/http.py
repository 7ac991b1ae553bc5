"""HTTP fetching for a hostile web: the address guard, caps, deadlines and sniffing.

Settings: ``settings.MAX_BODY_BYTES``, ``CONNECT_TIMEOUT_SECONDS``,
``READ_TIMEOUT_SECONDS``, ``TOTAL_DEADLINE_SECONDS``, ``TEXT_CONTENT_TYPES``,
``ROBOTS_MAX_BYTES``, ``ROBOTS_MAX_REDIRECTS``; per crawl, ``allow_private``
CIDRs.

* **Address guard** (``crawlstack.fetch.addresses``).  Every new connection
  resolves the host, refuses it unless every address is public by an
  allow-list kept from the IANA special-purpose registries (IPv4 wrapped in
  IPv6 judged as itself) or an ``allow_private`` CIDR holds it, and then
  connects to one of those same checked addresses.  The check
  and the connect share one DNS answer, so a name that re-resolves to an
  internal address between them (DNS rebinding) gains nothing.  TLS still
  verifies the certificate against the host name.
* **Bodies** are read raw and decompressed here (gzip, deflate; nothing else
  is offered), at most ``max_bytes`` of output however small the input, so a
  decompression bomb costs at most the cap.  A larger body is cut off and
  marked truncated; a corrupt compressed body is an error, not a crash.
* **Slow servers**: connect and read timeouts bound each wait, and a
  watchdog shuts the socket at the total deadline, so a server dripping a
  byte at a time is cut off too: in its body, what arrived is kept and
  marked truncated; in its status line or headers, there is no response
  (``HEADER_TIMEOUT``), and the stream's end is never taken for the end of
  the headers (``HeadersCut``).
* **Content**: a declared non-text type is not read at all; a body that
  claims to be text but whose first bytes are largely binary data bytes (the
  WHATWG MIME sniffing test, by share: ``BINARY_SHARE``; BOMs excepted) is
  dropped and marked ``binary``.

Page fetches do not follow redirects: a 3xx is recorded and its Location
goes back to the frontier, so every hop passes scope, dedupe, robots.txt and
politeness again.  robots.txt fetches follow up to five redirects here, as
RFC 9309 asks, each only if the crawl may fetch its target (``may_follow``).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urljoin, urlsplit

import certifi
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from crawlstack import settings
from crawlstack.fetch.addresses import AddressGuard, AddressRefused
from crawlstack.fetch.headers import parse_content_type, parse_location

ROBOTS_TIMEOUTS = (5.0, 10.0)
# The reason of a fetch whose status line and headers had not all arrived at the deadline.
HEADER_TIMEOUT = "header timeout"
ROBOTS_DEADLINE_SECONDS = 15.0
READ_CHUNK_BYTES = 64 * 1024
# Bytes the sniffer looks at, as in the WHATWG MIME sniffing standard.
SNIFF_BYTES = 512
ACCEPT_ENCODING = "gzip, deflate"

# Above this share of binary data bytes in the first SNIFF_BYTES, a text type's body is binary.
BINARY_SHARE = 0.05
# ...and above this many: a short page with a few stray control bytes is still text.
BINARY_FLOOR = 8
_BINARY_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_TEXT_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")
# The first bytes of binary formats a server may mislabel as text (WHATWG MIME sniffing's pattern tables).
_BINARY_SIGNATURES = (
    b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"\xff\xd8\xff", b"RIFF", b"%PDF-", b"PK\x03\x04", b"\x1f\x8b\x08",
    b"Rar!\x1a\x07", b"7z\xbc\xaf\x27\x1c", b"\xfd7zXZ\x00", b"\x1aE\xdf\xa3", b"OggS\x00", b"\x00\x00\x01\x00",
    b"\x00asm", b"\x7fELF", b"wOFF", b"wOF2", b"ID3",
)  # fmt: skip


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
    # When the response's status line and headers had arrived (0.0: none did):
    # by then the server had the request, so the host's delay counts from here.
    responded_at: float = 0.0
    finished_at: float = 0.0
    # The body claimed a text type but its first bytes are binary; it was not kept.
    binary: bool = False
    # The body could not be decompressed; ``error`` says how.
    corrupt: bool = False

    def header(self, name: str) -> str:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return ""

    @property
    def content_type(self) -> str:
        """The media type, lowercase; "" when absent or malformed (then the body is sniffed)."""
        parsed = parse_content_type(self.header("content-type"))
        return parsed[0] if parsed is not None else ""

    @property
    def charset(self) -> str | None:
        """The Content-Type's charset label, lowercase, or None."""
        parsed = parse_content_type(self.header("content-type"))
        return parsed[1] if parsed is not None else None


# --- the guarded connection ---------------------------------------------------


class _Watchdog:
    """Shuts the request's socket down at the deadline, waking any blocked read."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.expired and sock is not None:
                _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shutdown(self._sock)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


_local = threading.local()


def _watchdog() -> _Watchdog | None:
    return getattr(_local, "watchdog", None)


# Header lines of one interim (1xx) response, and interim responses before the final one.
_MAX_INTERIM_HEADERS = 100
_MAX_INTERIM_RESPONSES = 10


class HeadersCut(http.client.HTTPException):
    """The connection ended before the response's headers did."""


class _HeadLines:
    """The response's stream while its head is read, remembering whether the last line read hit its end."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.ended = False

    def readline(self, limit: int = -1) -> bytes:
        line: bytes = self._stream.readline(limit)
        self.ended = line == b""
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _FinalResponse(http.client.HTTPResponse):
    """Skips every interim 1xx response, not only 100 Continue, to the final one (RFC 9110 §15.2).

    http.client skips 100 alone: a server sending ``103 Early Hints`` and then
    its page was recorded as a bodiless 103, the page and its links lost.
    101 Switching Protocols is final here (a GET never asks for it).

    A head that the stream's end cuts short is an error (``HeadersCut``):
    http.client reads the end as the blank line, so a server dripping its
    headers until the watchdog shut the socket passed for a whole response.
    """

    def begin(self) -> None:
        stream = self.fp
        head = _HeadLines(stream)
        self.fp = cast(Any, head)
        try:
            super().begin()
        finally:
            self.fp = stream
        if head.ended:
            raise HeadersCut("the connection ended before the headers did")

    def _read_status(self) -> tuple[str, int, str]:
        for _ in range(_MAX_INTERIM_RESPONSES):
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not (100 < status < 200) or status == 101:
                return version, status, reason
            for _ in range(_MAX_INTERIM_HEADERS + 1):
                line = self.fp.readline(http.client._MAXLINE + 1)  # type: ignore[attr-defined]
                if len(line) > http.client._MAXLINE:  # type: ignore[attr-defined]
                    raise http.client.LineTooLong("interim header line")
                if line in (b"\r\n", b"\n", b""):
                    break
            else:
                raise http.client.HTTPException(f"got more than {_MAX_INTERIM_HEADERS} interim headers")
        raise http.client.HTTPException(f"more than {_MAX_INTERIM_RESPONSES} interim responses")


class _GuardedConnectionMixin:
    """Connects only to addresses the guard checked, from the same DNS answer."""

    response_class: type[http.client.HTTPResponse] = _FinalResponse

    guard: AddressGuard
    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any
    sock: socket.socket | None

    def _new_conn(self) -> socket.socket:
        last: OSError | None = None
        for address in self.guard.resolve(self.host, self.port):
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                for level, option, value in self.socket_options or ():
                    sock.setsockopt(level, option, value)
                if isinstance(self.timeout, int | float):
                    sock.settimeout(self.timeout)
                if self.source_address:
                    sock.bind(self.source_address)
                sock.connect((address, self.port))
                return sock
            except TimeoutError as exc:
                sock.close()
                raise ConnectTimeoutError(self, f"connect timeout to {self.host}") from exc
            except OSError as exc:
                sock.close()
                last = exc
        raise NewConnectionError(cast(HTTPConnection, self), f"Failed to establish a new connection: {last}")

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        watchdog = _watchdog()
        if watchdog is not None:
            watchdog.watch(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        # A reused keep-alive connection never calls connect(): watch it here.
        watchdog = _watchdog()
        if watchdog is not None and self.sock is not None:
            watchdog.watch(self.sock)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


def _pool(guard: AddressGuard) -> urllib3.PoolManager:
    # urllib3 itself, not requests: one layer less, and nothing that mocks
    # requests (moto's ``responses`` patch in local mode answers AWS-looking
    # URLs, the metadata address among them) can stand in for a real fetch.
    # One pool manager per thread and guard: no pool shared across threads,
    # and a kept-alive connection only reused under the guard that checked it.
    pools: dict[tuple[str, ...], urllib3.PoolManager] | None = getattr(_local, "pools", None)
    if pools is None:
        pools = _local.pools = {}
    manager = pools.get(guard.key)
    if manager is None:
        manager = urllib3.PoolManager(num_pools=50, maxsize=1, ca_certs=certifi.where())
        http_conn = type("GuardedHTTPConnection", (_GuardedHTTPConnection,), {"guard": guard})
        https_conn = type("GuardedHTTPSConnection", (_GuardedHTTPSConnection,), {"guard": guard})
        manager.pool_classes_by_scheme = {
            "http": type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
            "https": type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
        }
        pools[guard.key] = manager
    return manager


# --- bodies ---------------------------------------------------------------------


def is_text_type(content_type: str) -> bool:
    return content_type in settings.TEXT_CONTENT_TYPES or content_type.endswith(("+xml", "+json"))


def looks_binary(head: bytes, charset: str | None = None) -> bool:
    """True for a binary file's signature, or binary data bytes over ``BINARY_SHARE`` of the first bytes.

    As the WHATWG MIME sniffing standard's tables: BOMs mean text; image,
    media, archive and font signatures mean binary.

    A share, not any one byte: a stray NUL or control byte in an href is a
    broken page, not an image, and its text and links are still worth having.
    Images, archives and compressed data show one in ten bytes or more.
    """
    if head.startswith(_TEXT_BOMS):
        return False
    if head.startswith(_BINARY_SIGNATURES) or head[4:8] == b"ftyp":  # ISO media: a size, then "ftyp"
        return True
    if charset is not None and charset.startswith(("utf-16", "utf-32")):
        return False  # declared: half its bytes are NULs
    sample = head[:SNIFF_BYTES]
    binary = len(sample) - len(sample.translate(None, _BINARY_BYTES))
    return binary > max(len(sample) * BINARY_SHARE, BINARY_FLOOR)


class CorruptBody(Exception):
    """A compressed body that cannot be decompressed."""


class _Decoder:
    """Content-Encoding decoding with the output capped, whatever the input ratio."""

    def __init__(self, encodings: list[str]) -> None:
        self._stages: list[Any] = []
        # Applied in reverse of the order the server listed them.
        for name in reversed(encodings):
            if name in ("gzip", "x-gzip"):
                self._stages.append(_Gzip())
            elif name == "deflate":
                self._stages.append(_Deflate())
            elif name not in ("identity", ""):
                raise CorruptBody(f"unsupported content-encoding {name!r}")

    def decode(self, data: bytes, limit: int) -> bytes:
        """Decode ``data``; at most ``limit`` bytes out (the rest of the input is dropped)."""
        try:
            for stage in self._stages:
                data = _bounded(stage, data, limit)
        except zlib.error as exc:
            raise CorruptBody(f"corrupt compressed body: {exc}") from exc
        return data[:limit]


class _Gzip:
    """``gzip`` with every member decoded: a body may be several gzip members in a row (RFC 1952).

    Bytes after a member that do not start another one are trailing garbage
    and ignored, as browsers and urllib3 do.
    """

    def __init__(self) -> None:
        self._obj: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b""  # a lone first byte of what may be the next member
        self._garbage = False
        self.unconsumed_tail = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        data, self._pending = self._pending + data, b""
        out = bytearray()
        while data and not self._garbage and len(out) < max_length:
            if self._obj.eof:
                if data == b"\x1f":
                    self._pending, data = data, b""
                    break
                if not data.startswith(b"\x1f\x8b"):
                    self._garbage, data = True, b""
                    break
                self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += self._obj.decompress(data, max_length - len(out))
            data = self._obj.unused_data if self._obj.eof else self._obj.unconsumed_tail
        # Only input left by the output cap goes back: garbage is never read again.
        self.unconsumed_tail = b"" if self._garbage else data
        return bytes(out)


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (wrongly, but often) raw."""

    def __init__(self) -> None:
        self._obj: Any = None
        self.unconsumed_tail = b""

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._obj is None:
            wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] * 256 + data[1]) % 31 == 0
            self._obj = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        out: bytes = self._obj.decompress(data, max_length)
        self.unconsumed_tail = self._obj.unconsumed_tail
        return out


def _bounded(stage: Any, data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data and len(out) < limit:
        out += stage.decompress(data, limit - len(out))
        data = stage.unconsumed_tail
    return bytes(out)


# --- fetching -------------------------------------------------------------------


def fetch(
    url: str,
    user_agent: str,
    guard: AddressGuard,
    *,
    max_bytes: int | None = None,
    text_only: bool = True,
    timeouts: tuple[float, float] | None = None,
    deadline_seconds: float | None = None,
    extra_headers: Sequence[tuple[str, str]] = (),
) -> FetchResult:
    """GET ``url`` once.  Never raises for network or body trouble: see ``error``.

    Limits left out are read from ``settings`` at call time.  ``extra_headers``
    are sent too (a watch's conditional GET: ``If-None-Match``, ``If-Modified-Since``).
    """
    if max_bytes is None:
        max_bytes = settings.MAX_BODY_BYTES
    if timeouts is None:
        timeouts = (settings.CONNECT_TIMEOUT_SECONDS, settings.READ_TIMEOUT_SECONDS)
    if deadline_seconds is None:
        deadline_seconds = settings.TOTAL_DEADLINE_SECONDS
    result = FetchResult(url=url, started_at=time.time())
    headers = {
        "User-Agent": user_agent,
        "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        "Accept-Encoding": ACCEPT_ENCODING,
        **dict(extra_headers),
    }
    result.request_headers = [("Host", urlsplit(url).netloc.rsplit("@", 1)[-1]), *headers.items()]
    with _Watchdog(deadline_seconds) as watchdog:
        _local.watchdog = watchdog
        try:
            _get(url, headers, guard, result, max_bytes, text_only, timeouts)
        except AddressRefused as exc:
            result.error = str(exc)
        except CorruptBody as exc:
            result.error, result.corrupt = str(exc), True
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            result.error = _describe(exc)
        finally:
            _local.watchdog = None
        if watchdog.expired:
            # Whatever the read reported when its socket was shut: the deadline did it.
            if result.status is None:
                # A timeout (so retried), not a response: the headers never ended, however many bytes came.
                result.error = f"{HEADER_TIMEOUT}: headers not finished in {deadline_seconds:g}s"
            else:
                result.error = f"deadline of {deadline_seconds:g}s exceeded"
        if result.error and result.status is not None and not result.corrupt:
            # The body was cut short (deadline, reset, a Content-Length or chunk the
            # server never finished): what arrived is kept, and said to be partial.
            result.truncated = True
    result.finished_at = time.time()
    return result


def _get(
    url: str,
    headers: dict[str, str],
    guard: AddressGuard,
    result: FetchResult,
    max_bytes: int,
    text_only: bool,
    timeouts: tuple[float, float],
) -> None:
    resp = _pool(guard).request(
        "GET",
        url,
        headers=headers,
        redirect=False,
        retries=False,
        preload_content=False,
        decode_content=False,
        timeout=urllib3.Timeout(connect=timeouts[0], read=timeouts[1]),
    )
    read_to_the_end = False
    try:
        result.responded_at = time.time()
        result.status = resp.status
        result.reason = resp.reason or ""
        result.headers = list(resp.headers.items())
        result.ip_address = _peer_address(resp)
        if text_only and result.content_type and not is_text_type(result.content_type):
            return
        encodings = [e.strip().lower() for e in result.header("content-encoding").split(",") if e.strip()]
        decoder = _Decoder(encodings)
        body = bytearray()
        sniffed = not text_only
        # What arrived is kept in ``body`` before anything can fail, so a body
        # cut short by the deadline or a reset keeps what it had.
        try:
            for raw in resp.stream(READ_CHUNK_BYTES, decode_content=False):
                body += decoder.decode(raw, max_bytes + 1 - len(body))
                if not sniffed and len(body) >= SNIFF_BYTES:
                    sniffed = True
                    if looks_binary(bytes(body[:SNIFF_BYTES]), result.charset):
                        result.binary = True
                        return  # not read further
                if len(body) > max_bytes:
                    result.truncated = True
                    break
            else:
                read_to_the_end = True
        finally:
            if result.binary:
                body.clear()
            elif not sniffed and looks_binary(bytes(body[:SNIFF_BYTES]), result.charset):
                result.binary = True
                body.clear()
            result.body = bytes(body[:max_bytes])
    finally:
        if read_to_the_end:
            resp.release_conn()  # read to the end: the connection may be reused
        else:
            resp.close()  # unread bytes would poison a reused connection


def _peer_address(resp: urllib3.BaseHTTPResponse) -> str | None:
    try:
        sock = resp.connection.sock  # type: ignore[union-attr]
        return str(sock.getpeername()[0])
    except (AttributeError, OSError):
        return None


def fetch_robots(
    origin: str, user_agent: str, guard: AddressGuard, may_follow: Callable[[str], str | None]
) -> FetchResult:
    """GET origin/robots.txt, following up to ROBOTS_MAX_REDIRECTS redirects that ``may_follow`` allows.

    ``may_follow(url)`` is None for a redirect target the crawl may fetch,
    else why not (``crawlstack.scope.robots_redirect_refusal``).  A redirect
    not followed ends the fetch with its 3xx, ``error`` saying why.
    """
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
        location = parse_location(result.header("location"))
        if result.status in (301, 302, 303, 307, 308) and location:
            try:
                target = urljoin(url, location)
            except ValueError:  # e.g. a broken IPv6 literal: a redirect that cannot be followed
                result.error = f"redirect to {location[:200]!r} not followed: invalid URL"
                return result
            refused = may_follow(target)
            if refused is not None:
                result.error = f"redirect to {target[:200]} not followed: {refused}"
                return result
            url = target
            continue
        return result
    result.status = None
    result.error = f"more than {settings.ROBOTS_MAX_REDIRECTS} redirects"
    return result


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return "connect timeout"
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError | TimeoutError):
        return "read timeout"
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return "connection closed mid-response"
    if isinstance(exc, urllib3.exceptions.LocationValueError | urllib3.exceptions.URLSchemeUnknown | ValueError):
        return f"invalid URL: {exc}"
    if isinstance(exc, urllib3.exceptions.SSLError):
        return f"TLS error: {exc}"
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return "connection failed"
    return type(exc).__name__
