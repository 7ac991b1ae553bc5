"""One gzipped WARC file per fetch batch, written and read with warcio.

For each fetched URL the file holds a ``request`` record, a ``response``
record, and a ``metadata`` record (JSON: crawl id, depth, referrer, record id,
truncation) that refers to the response by its WARC-Record-ID.  Extract reads
the three back as one ``WarcPage``.

Reading is all or nothing: an object that is not a WARC, or is damaged
anywhere (bad gzip, a cut record, broken headers), raises ``WarcUnreadable``
with a one-line reason before any page is handed out.  Within a readable
file, odd records are taken as they come: a status line that is not a
number is status 0 (not extracted), metadata that is not a JSON object is
``{}``.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawlstack import settings
from crawlstack.fetch.headers import normalized_content_type

METADATA_TYPE = "application/vnd.crawlstack.metadata+json"


class WarcUnreadable(ValueError):
    """A WARC object that cannot be read; the message says why in one line."""


@dataclass
class Exchange:
    """One HTTP exchange to archive."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    status: int
    reason: str
    response_headers: list[tuple[str, str]]
    body: bytes
    protocol: str = "HTTP/1.1"
    ip_address: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class WarcPage:
    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    metadata: dict[str, Any]

    @property
    def content_type(self) -> str:
        """The archived Content-Type as parsed: ``media; charset=label``, ``media``, or "" when malformed."""
        return normalized_content_type(self.headers.get("content-type", ""))


def _ascii(text: str) -> str:
    """``text`` with its non-ASCII characters percent-encoded (as UTF-8), the rest as is."""
    return text if text.isascii() else quote(text, safe="".join(chr(c) for c in range(32, 127)))


def _ascii_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    # A WARC's header block is ASCII.  A server may send Latin-1 bytes in a
    # header name, value or reason phrase; warcio percent-encodes some values
    # itself but raises on the rest ("a=\x80; b", any name, the status line),
    # which would fail the whole batch.
    return [(_ascii(name), _ascii(value)) for name, value in headers]


def write_warc(exchanges: list[Exchange]) -> bytes:
    """Serialise a batch of exchanges as one gzipped WARC/1.1 file: each record its own gzip member.

    warcio compresses at zlib's level 9; each record is written plain and
    compressed here at ``settings.WARC_GZIP_LEVEL`` instead.
    """
    buf = io.BytesIO()
    writer = WARCWriter(io.BytesIO(), gzip=False, warc_version="1.1")

    def write(record: Any) -> None:
        writer.out = plain = io.BytesIO()
        writer.write_record(record)
        member = zlib.compressobj(settings.WARC_GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        buf.write(member.compress(plain.getvalue()) + member.flush())

    for ex in exchanges:
        path = ex.url.split("://", 1)[-1]
        path = "/" + path.split("/", 1)[1] if "/" in path else "/"
        req_headers = StatusAndHeaders(
            _ascii(f"{ex.method} {path} {ex.protocol}"), _ascii_headers(ex.request_headers), is_http_request=True
        )
        request = writer.create_warc_record(ex.url, "request", http_headers=req_headers)
        # Headers as received, but without transfer framing: the body stored is
        # the decoded entity, so Content-Encoding/Transfer-Encoding would lie.
        headers = [(k, v) for k, v in ex.response_headers if k.lower() not in ("content-encoding", "transfer-encoding")]
        resp_headers = StatusAndHeaders(
            _ascii(f"{ex.status} {ex.reason}"), _ascii_headers(headers), protocol=ex.protocol
        )
        warc_headers = {"WARC-IP-Address": ex.ip_address} if ex.ip_address else None
        response = writer.create_warc_record(
            ex.url, "response", payload=io.BytesIO(ex.body), http_headers=resp_headers, warc_headers_dict=warc_headers
        )
        response_id = response.rec_headers.get_header("WARC-Record-ID")
        request.rec_headers.add_header("WARC-Concurrent-To", response_id)
        meta = writer.create_warc_record(
            ex.url,
            "metadata",
            payload=io.BytesIO(json.dumps(ex.metadata).encode()),
            warc_content_type=METADATA_TYPE,
            warc_headers_dict={"WARC-Refers-To": response_id},
        )
        write(request)
        write(response)
        write(meta)
    return buf.getvalue()


def read_warc(data: bytes) -> Iterator[WarcPage]:
    """Yield each archived response with its metadata, in file order; raises WarcUnreadable."""
    try:
        pages = _read_pages(data)
    except WarcUnreadable:
        raise
    except Exception as exc:
        # warcio raises what its parsers meet (ArchiveLoadFailed, zlib.error,
        # EOFError, ValueError, even AttributeError on a record cut short):
        # all mean the same here.
        reason = " ".join(str(exc).split())[:200] or "malformed"
        raise WarcUnreadable(f"unreadable WARC ({type(exc).__name__}): {reason}") from exc
    yield from pages


def _status(http: StatusAndHeaders | None) -> int:
    try:
        return int(http.get_statuscode()) if http else 0
    except (ValueError, TypeError):
        return 0


def _metadata(raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _gunzip(data: bytes) -> bytes:
    """Every gzip member of ``data``, decompressed; a member cut short or junk between them raises.

    warcio reads a WARC cut inside a member as one that simply ends there, so
    a truncated object would lose its last pages without a word.
    """
    out = []
    rest = data
    while rest:
        member = zlib.decompressobj(wbits=31)
        out.append(member.decompress(rest))
        if not member.eof:
            raise EOFError("gzip member cut short")
        rest = member.unused_data
    return b"".join(out)


def _read_pages(data: bytes) -> list[WarcPage]:
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data)
    pending: dict[str, WarcPage] = {}
    order: list[str] = []
    records = 0
    for record in ArchiveIterator(io.BytesIO(data)):
        records += 1
        rtype = record.rec_type
        if rtype == "response":
            rid = record.rec_headers.get_header("WARC-Record-ID")
            http = record.http_headers
            headers = {k.lower(): v for k, v in http.headers} if http else {}
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            pending[rid] = WarcPage(url, _status(http), headers, record.content_stream().read(), {})
            order.append(rid)
        elif rtype == "metadata":
            ref = record.rec_headers.get_header("WARC-Refers-To")
            raw = record.content_stream().read()
            if ref in pending:
                pending[ref].metadata = _metadata(raw)
        else:
            record.raw_stream.read()
        if record.raw_stream.limit > 0:  # fewer bytes than its Content-Length: the file ends inside it
            raise EOFError(f"{rtype} record cut short")
    if data.strip() and not records:
        raise ValueError("no WARC record in it")
    return [pending[rid] for rid in order]
