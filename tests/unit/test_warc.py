"""One gzipped WARC per batch: round trip of responses with their metadata, and bad input."""

from __future__ import annotations

import gzip
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from crawlstack.warc import METADATA_TYPE, Exchange, WarcPage, read_warc, write_warc


def exchange(i: int, **overrides: object) -> Exchange:
    fields: dict[str, object] = {
        "url": f"http://example.com/p/{i}?q={i}",
        "method": "GET",
        "request_headers": [("User-Agent", "crawlstack/test"), ("Accept", "*/*")],
        "status": 200,
        "reason": "OK",
        "response_headers": [("Content-Type", "text/html; charset=utf-8"), ("X-Page", str(i))],
        "body": f"<html><body>page {i} \u00e9</body></html>".encode(),
        "ip_address": "93.184.216.34",
        "metadata": {"crawl_id": "c1", "depth": i, "referrer": None, "truncated": False, "want": ["a"]},
    }
    fields.update(overrides)
    return Exchange(**fields)  # type: ignore[arg-type]


def test_round_trip_keeps_order_status_headers_body_and_metadata() -> None:
    exchanges = [exchange(i) for i in range(3)]
    exchanges.append(exchange(3, status=404, reason="Not Found", body=b"", metadata={"depth": 9}))
    data = write_warc(exchanges)
    assert data[:2] == b"\x1f\x8b"  # gzipped
    pages = list(read_warc(data))
    assert [p.url for p in pages] == [e.url for e in exchanges]
    for page, ex in zip(pages, exchanges, strict=True):
        assert isinstance(page, WarcPage)
        assert page.status == ex.status
        assert page.body == ex.body
        assert page.metadata == ex.metadata
    assert pages[0].content_type == "text/html; charset=utf-8"
    assert pages[1].headers["x-page"] == "1"


def test_records_are_request_response_metadata_linked_by_record_id() -> None:
    records = list(ArchiveIterator(io.BytesIO(write_warc([exchange(1)]))))
    assert [r.rec_type for r in records] == ["request", "response", "metadata"]
    request, response, meta = records
    response_id = response.rec_headers.get_header("WARC-Record-ID")
    assert request.rec_headers.get_header("WARC-Concurrent-To") == response_id
    assert meta.rec_headers.get_header("WARC-Refers-To") == response_id
    assert meta.rec_headers.get_header("Content-Type") == METADATA_TYPE
    assert response.rec_headers.get_header("WARC-IP-Address") == "93.184.216.34"
    assert request.http_headers.protocol == "GET"
    assert request.http_headers.statusline.startswith("/p/1?q=1")


def test_transfer_framing_headers_are_not_archived() -> None:
    ex = exchange(
        1,
        response_headers=[
            ("Content-Type", "text/html"),
            ("Content-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
        ],
    )
    (page,) = read_warc(write_warc([ex]))
    assert "content-encoding" not in page.headers
    assert "transfer-encoding" not in page.headers
    assert page.body == ex.body


def test_url_without_path_and_no_ip() -> None:
    (page,) = read_warc(write_warc([exchange(0, url="http://example.com", ip_address=None)]))
    assert page.url == "http://example.com"


def test_empty_batch_and_empty_input() -> None:
    assert list(read_warc(write_warc([]))) == []
    assert list(read_warc(b"")) == []


def test_binary_body_round_trips() -> None:
    body = bytes(range(256)) * 10
    (page,) = read_warc(write_warc([exchange(0, body=body)]))
    assert page.body == body


def test_unreadable_metadata_is_empty() -> None:
    # A WARC written by another tool: metadata record that is not JSON.
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO(write_warc([exchange(0)]))
    records = list(ArchiveIterator(buf))
    response_id = records[1].rec_headers.get_header("WARC-Record-ID")
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for rec in ArchiveIterator(io.BytesIO(buf.getvalue())):
        if rec.rec_type == "metadata":
            rec = writer.create_warc_record(
                rec.rec_headers.get_header("WARC-Target-URI"),
                "metadata",
                payload=io.BytesIO(b"{not json"),
                warc_headers_dict={"WARC-Refers-To": response_id},
            )
        writer.write_record(rec)
    (page,) = read_warc(out.getvalue())
    assert page.metadata == {}


def test_metadata_without_a_response_is_ignored() -> None:
    from warcio.warcwriter import WARCWriter

    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for rec in ArchiveIterator(io.BytesIO(write_warc([exchange(5)]))):
        if rec.rec_type == "metadata":  # its response is not in this file
            writer.write_record(rec)
    pages = list(read_warc(write_warc([exchange(0)]) + out.getvalue()))
    assert len(pages) == 1 and pages[0].metadata["depth"] == 0


def test_uncompressed_garbage_raises_archive_load_failed() -> None:
    with pytest.raises(ArchiveLoadFailed):
        list(read_warc(b"garbage\r\n"))
    with pytest.raises(ArchiveLoadFailed):
        list(read_warc(gzip.compress(b"neither is this\r\n")))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_read_cleanly_or_raise_archive_load_failed(data: bytes) -> None:
    try:
        pages = list(read_warc(data))
    except ArchiveLoadFailed:
        return
    assert all(isinstance(p, WarcPage) for p in pages)
