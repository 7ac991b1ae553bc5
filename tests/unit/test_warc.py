"""One gzipped WARC per batch: round trip of responses with their metadata, and bad input."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.warcwriter import WARCWriter

from crawlstack.fetch.warc import METADATA_TYPE, Exchange, WarcPage, WarcUnreadable, read_warc, write_warc


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


def test_uncompressed_garbage_raises_warc_unreadable() -> None:
    with pytest.raises(WarcUnreadable, match=r"^unreadable WARC \(ArchiveLoadFailed\): Unknown archive format"):
        list(read_warc(b"garbage\r\n"))
    with pytest.raises(WarcUnreadable):
        list(read_warc(gzip.compress(b"neither is this\r\n")))


def _member_ends(data: bytes) -> set[int]:
    ends, offset, rest = set(), 0, data
    while rest:
        member = zlib.decompressobj(wbits=31)
        member.decompress(rest)
        offset += len(rest) - len(member.unused_data)
        ends.add(offset)
        rest = member.unused_data
    return ends


def test_a_warc_cut_anywhere_inside_a_member_is_unreadable() -> None:
    # Regressions (fuzz): warcio raised AttributeError on a member cut inside the record
    # headers, and read a member cut inside its body as a file that ends there, silently
    # dropping the rest of the batch.  Each record is its own gzip member, so only a cut
    # exactly between two members goes unnoticed (S3 never stores part of an object).
    data = write_warc([exchange(0), exchange(1)])
    ends = _member_ends(data)
    assert len(ends) == 6
    for cut in range(1, len(data)):
        if cut in ends:
            continue
        with pytest.raises(WarcUnreadable) as info:
            list(read_warc(data[:cut]))
        assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_an_uncompressed_record_cut_short_is_unreadable() -> None:
    text = b"".join(gzip.decompress(write_warc([exchange(0)])).split(b"\x00"))
    with pytest.raises(WarcUnreadable, match="record cut short"):
        list(read_warc(text[:-5]))


def test_unreadable_is_all_or_nothing() -> None:
    # Two good batches, then garbage: no page is handed out, so none is half-extracted.
    data = write_warc([exchange(0)]) + write_warc([exchange(1)]) + b"\x1f\x8b\x08\x00garbage"
    gen = read_warc(data)
    with pytest.raises(WarcUnreadable):
        next(gen)


def _rewritten(data: bytes, change: Callable[[Any], Any]) -> bytes:
    """``data`` with each record passed through ``change`` (which returns the record to write, or None)."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for rec in ArchiveIterator(io.BytesIO(data)):
        rec = change(rec)
        if rec is not None:
            writer.write_record(rec)
    return out.getvalue()


@pytest.mark.parametrize("payload", [b"[1, 2]", b'"text"', b"null", b"1e999", b"[" * 100_000])
def test_metadata_that_is_not_an_object_is_empty(payload: bytes) -> None:
    def change(rec: Any) -> Any:
        if rec.rec_type != "metadata":
            return rec
        return WARCWriter(io.BytesIO()).create_warc_record(
            rec.rec_headers.get_header("WARC-Target-URI"),
            "metadata",
            payload=io.BytesIO(payload),
            warc_headers_dict={"WARC-Refers-To": rec.rec_headers.get_header("WARC-Refers-To")},
        )

    (page,) = read_warc(_rewritten(write_warc([exchange(0)]), change))
    assert page.metadata == {}


def test_a_status_line_without_a_number_is_status_0() -> None:
    def change(rec: Any) -> Any:
        if rec.rec_type == "response":
            rec.http_headers.statusline = "OK"
        return rec

    (page,) = read_warc(_rewritten(write_warc([exchange(0)]), change))
    assert page.status == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_read_cleanly_or_raise_warc_unreadable(data: bytes) -> None:
    try:
        pages = list(read_warc(data))
    except WarcUnreadable as exc:
        assert "\n" not in str(exc)
        return
    assert all(isinstance(p, WarcPage) for p in pages)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(0, 2000))
def test_bytes_spliced_into_a_valid_warc_read_cleanly_or_raise_warc_unreadable(junk: bytes, at: int) -> None:
    data = write_warc([exchange(0), exchange(1)])
    at = at % len(data)
    try:
        pages = list(read_warc(data[:at] + junk + data[at:]))
    except WarcUnreadable:
        return
    assert all(isinstance(p, WarcPage) for p in pages)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([("Content-Type", ";\x80=0")], "OK"),  # warcio's own encoding leaves the \x80
        ([("X-\xe9", "a")], "OK"),  # a header name
        ([("Content-Type", "text/html")], "\xd6K"),  # the reason phrase
    ],
)
def test_latin_1_response_heads_are_archived_not_a_unicode_error(headers: list[tuple[str, str]], reason: str) -> None:
    # Regression (fuzz): http.client hands a server's Latin-1 bytes over as they are, and
    # warcio raised UnicodeEncodeError writing them, failing the whole fetch batch.
    (page,) = read_warc(write_warc([exchange(0, response_headers=headers, reason=reason)]))
    assert page.status == 200 and page.body == exchange(0).body
    assert all(k.isascii() and v.isascii() for k, v in page.headers.items())


_LATIN_1 = st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f")
_NAMES = st.text(_LATIN_1.filter(lambda c: c not in ": "), min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(_NAMES, st.text(_LATIN_1, max_size=40)), max_size=6),
    st.text(_LATIN_1, max_size=20),
    st.lists(st.tuples(_NAMES, st.text(_LATIN_1, max_size=40)), max_size=3),
)
def test_any_latin_1_head_round_trips_its_body(
    headers: list[tuple[str, str]], reason: str, request_headers: list[tuple[str, str]]
) -> None:
    ex = exchange(1, response_headers=headers, reason=reason, request_headers=request_headers)
    (page,) = read_warc(write_warc([ex]))
    assert (page.url, page.status, page.body, page.metadata) == (ex.url, ex.status, ex.body, ex.metadata)
