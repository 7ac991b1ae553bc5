"""One gzipped WARC file per fetch batch, written and read with warcio.

For each fetched URL the file holds a ``request`` record, a ``response``
record, and a ``metadata`` record (JSON: crawl id, depth, referrer, record id,
truncation) that refers to the response by its WARC-Record-ID.  Extract reads
the three back as one ``WarcPage``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

METADATA_TYPE = "application/vnd.crawlstack.metadata+json"


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
        return self.headers.get("content-type", "")


def write_warc(exchanges: list[Exchange]) -> bytes:
    """Serialise a batch of exchanges as one gzipped WARC/1.1 file."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True, warc_version="1.1")
    for ex in exchanges:
        path = ex.url.split("://", 1)[-1]
        path = "/" + path.split("/", 1)[1] if "/" in path else "/"
        req_headers = StatusAndHeaders(f"{ex.method} {path} {ex.protocol}", ex.request_headers, is_http_request=True)
        request = writer.create_warc_record(ex.url, "request", http_headers=req_headers)
        # Headers as received, but without transfer framing: the body stored is
        # the decoded entity, so Content-Encoding/Transfer-Encoding would lie.
        headers = [(k, v) for k, v in ex.response_headers if k.lower() not in ("content-encoding", "transfer-encoding")]
        resp_headers = StatusAndHeaders(f"{ex.status} {ex.reason}", headers, protocol=ex.protocol)
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
        writer.write_record(request)
        writer.write_record(response)
        writer.write_record(meta)
    return buf.getvalue()


def read_warc(data: bytes) -> Iterator[WarcPage]:
    """Yield each archived response with its metadata, in file order."""
    pending: dict[str, WarcPage] = {}
    order: list[str] = []
    for record in ArchiveIterator(io.BytesIO(data)):
        rtype = record.rec_type
        if rtype == "response":
            rid = record.rec_headers.get_header("WARC-Record-ID")
            http = record.http_headers
            headers = {k.lower(): v for k, v in http.headers} if http else {}
            status = int(http.get_statuscode()) if http else 0
            pending[rid] = WarcPage(
                record.rec_headers.get_header("WARC-Target-URI"), status, headers, record.content_stream().read(), {}
            )
            order.append(rid)
        elif rtype == "metadata":
            ref = record.rec_headers.get_header("WARC-Refers-To")
            if ref in pending:
                try:
                    pending[ref].metadata = json.loads(record.content_stream().read() or b"{}")
                except json.JSONDecodeError:
                    pending[ref].metadata = {}
    for rid in order:
        yield pending[rid]
