"""crawlstack.fetch.http against hostile answers from a loopback host: caps, bombs, drips, binary, the guard."""

from __future__ import annotations

import gzip
import socket
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from crawlstack.demo.server import LoopbackWeb, Response
from crawlstack.fetch import http

UA = "crawlstack-test/1.0"
HOST = "127.0.0.2"
LOOPBACK = http.AddressGuard(["127.0.0.0/8"])
FAST = {"timeouts": (2.0, 5.0), "deadline_seconds": 10.0}


@pytest.fixture
def web() -> Iterator[LoopbackWeb]:
    with LoopbackWeb() as w:
        yield w


def serve(web: LoopbackWeb, path: str, response: Response) -> str:
    if HOST not in web.hosts:
        web.add_host(HOST, {})
    web.hosts[HOST].routes[path] = response
    return web.url(HOST, path)


def fetch(url: str, **kw: Any) -> http.FetchResult:
    return http.fetch(url, UA, LOOPBACK, **{**FAST, **kw})


def test_a_plain_page_is_read_whole(web: LoopbackWeb) -> None:
    r = fetch(serve(web, "/", Response("<p>hello</p>")))
    assert (r.status, r.body, r.truncated, r.error, r.binary) == (200, b"<p>hello</p>", False, "", False)
    assert r.ip_address == HOST
    assert ("Accept-Encoding", http.ACCEPT_ENCODING) in r.request_headers


def test_a_body_over_the_cap_is_cut_and_marked_truncated(web: LoopbackWeb) -> None:
    r = fetch(serve(web, "/big", Response(b"a" * 300_000, content_type="text/plain")), max_bytes=100_000)
    assert r.truncated and len(r.body) == 100_000 and r.status == 200


@pytest.mark.parametrize(
    "encoding, compress",
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
    ],
)
def test_a_decompression_bomb_stops_at_the_cap(web: LoopbackWeb, encoding: str, compress: Any) -> None:
    bomb = compress(b"a" * (64 * 1024 * 1024))  # 64 MiB of output from well under 1 MiB
    assert len(bomb) < 1024 * 1024
    url = serve(web, "/bomb", Response(bomb, headers={"Content-Encoding": encoding}, content_type="text/html"))
    r = fetch(url, max_bytes=1_000_000)
    assert r.truncated and r.body == b"a" * 1_000_000
    assert not r.error


def test_a_gzipped_page_is_decoded(web: LoopbackWeb) -> None:
    url = serve(web, "/gz", Response(gzip.compress(b"<p>zipped</p>"), headers={"Content-Encoding": "gzip"}))
    r = fetch(url)
    assert r.body == b"<p>zipped</p>" and not r.truncated and not r.error


def test_every_member_of_a_multi_member_gzip_body_is_decoded(web: LoopbackWeb) -> None:
    # RFC 1952 allows members in a row (what `cat a.gz b.gz` gives); a decoder that stops after
    # the first silently lost the rest of the page, its links included.  Trailing garbage is ignored.
    first, second = b"<p>one</p>" * 5000, b"<a href='/x'>two</a>" * 5000
    body = gzip.compress(first) + gzip.compress(second) + b"\x00\x00trailing garbage"
    r = fetch(serve(web, "/multi", Response(body, headers={"Content-Encoding": "gzip"})))
    assert r.body == first + second and not r.truncated and not r.error


@pytest.mark.parametrize("step", [1, 2, 7, 65536])
def test_gzip_members_split_anywhere_across_chunks_decode_whole(step: int) -> None:
    first, second = b"<p>one</p>" * 100, b"<p>two</p>" * 100
    body = gzip.compress(first) + gzip.compress(second) + b"junk"
    decoder = http._Decoder(["gzip"])
    out = b"".join(decoder.decode(body[i : i + step], 10**6) for i in range(0, len(body), step))
    assert out == first + second


def test_a_multi_member_gzip_bomb_stops_at_the_cap(web: LoopbackWeb) -> None:
    bomb = gzip.compress(b"a" * (8 * 1024 * 1024)) * 8
    url = serve(web, "/bombs", Response(bomb, headers={"Content-Encoding": "gzip"}, content_type="text/html"))
    r = fetch(url, max_bytes=1_000_000)
    assert r.truncated and r.body == b"a" * 1_000_000 and not r.error


def test_a_corrupt_compressed_body_fails_cleanly(web: LoopbackWeb) -> None:
    url = serve(web, "/bad", Response(b"\x1f\x8b\x08\x00not really gzip" * 10, headers={"Content-Encoding": "gzip"}))
    r = fetch(url)
    assert r.status == 200 and r.corrupt
    assert r.error.startswith("corrupt compressed body")


def test_an_unknown_content_encoding_is_an_error_not_garbage(web: LoopbackWeb) -> None:
    r = fetch(serve(web, "/br", Response(b"\x0b\x02\x80hello", headers={"Content-Encoding": "br"})))
    assert r.corrupt and r.error == "unsupported content-encoding 'br'" and r.body == b""


def test_a_dripping_body_is_cut_off_at_the_total_deadline(web: LoopbackWeb) -> None:
    # Each byte arrives well within the read timeout; only the deadline can stop it.
    url = serve(web, "/drip", Response("x" * 200, drip=0.05, content_type="text/plain"))
    r = fetch(url, timeouts=(2.0, 5.0), deadline_seconds=0.6)
    assert r.status == 200
    assert r.error == "deadline of 0.6s exceeded"
    assert 0 < len(r.body) < 200 and r.truncated  # what arrived is kept, and said to be partial


def raw_fetch(answer: bytes) -> http.FetchResult:
    """Fetch from a one-shot socket server that sends ``answer`` (any bytes, valid HTTP or not) and closes."""
    import threading

    listener = socket.socket()
    listener.bind((HOST, 0))
    listener.listen(1)

    def serve_once() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(answer)
        conn.close()

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    try:
        return fetch(f"http://{HOST}:{listener.getsockname()[1]}/")
    finally:
        thread.join(5)
        listener.close()


def test_a_body_shorter_than_its_content_length_is_kept_and_marked_truncated() -> None:
    # The server promises 100000 bytes, sends a page and closes: the links on it are kept,
    # but records from it must not pass for a whole page.
    r = raw_fetch(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n<p>part</p>")
    assert (r.status, r.body, r.error, r.truncated) == (200, b"<p>part</p>", "connection closed mid-response", True)


def test_slow_headers_are_cut_off_at_the_total_deadline(web: LoopbackWeb) -> None:
    url = serve(web, "/slow", Response("late", delay=3.0))
    r = fetch(url, timeouts=(2.0, 10.0), deadline_seconds=0.5)
    assert r.status is None and r.error == "header timeout: headers not finished in 0.5s"


def test_a_header_drip_is_no_response_but_a_header_timeout(web: LoopbackWeb) -> None:
    # Each byte of the status line and headers arrives well within the read timeout; the headers never end
    # before the deadline, so there is no response at all: not a 200 whose body was cut short.
    url = serve(web, "/drip-head", Response("<p>never</p>", drip_head=0.02))
    r = fetch(url, timeouts=(2.0, 5.0), deadline_seconds=0.5)
    assert (r.status, r.headers, r.body, r.truncated) == (None, [], b"", False)
    assert r.error == "header timeout: headers not finished in 0.5s"
    assert r.responded_at == 0.0


def test_headers_the_connection_cuts_short_are_no_response() -> None:
    # http.client reads the end of the stream as the blank line that ends the headers.
    r = raw_fetch(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Cut: a")
    assert (r.status, r.body, r.truncated, r.error) == (None, b"", False, "connection closed mid-response")


def test_a_read_timeout_is_reported(web: LoopbackWeb) -> None:
    r = fetch(serve(web, "/slow", Response("late", delay=2.0)), timeouts=(2.0, 0.3))
    assert r.status is None and r.error == "read timeout"


@pytest.mark.parametrize(
    "body",
    [
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 600,
        b"%PDF-1.7\n\x00\x01\x02" + b"x" * 600,
        b"GIF89a\x01\x00\x01\x00\x00\x00\x00" + b"y" * 600,
        b"\x00\x00\x00\x18ftypmp42" + b"z" * 10,
    ],
)
def test_a_binary_body_claiming_html_is_not_kept(web: LoopbackWeb, body: bytes) -> None:
    r = fetch(serve(web, "/img.html", Response(body, content_type="text/html")))
    assert r.binary and r.body == b"" and r.status == 200


@pytest.mark.parametrize(
    "body",
    [
        "<p>caf\u00e9 \u2014 ok</p>".encode("utf-16"),  # a BOM, then NULs: still text
        "<p>caf\u00e9</p>\t\r\n\x0c".encode("latin-1"),
        b"",
    ],
)
def test_text_with_a_bom_or_control_whitespace_is_kept(web: LoopbackWeb, body: bytes) -> None:
    r = fetch(serve(web, "/t", Response(body, content_type="text/html")))
    assert not r.binary and r.body == body


@pytest.mark.parametrize(
    ("head", "charset", "binary"),
    [
        (b'<h1>x</h1><a href="/a\x00b">', None, False),  # one stray NUL: a broken page, still text
        (b"<h1>\x1b]0;title\x07</h1>" + b"\x00" * 3, None, False),  # a few control bytes in a short page
        (b"<p>" + b"\x00\x01" * 40 + b"</p>" * 20, None, True),  # over a twentieth of the bytes
        ("<h1>no BOM</h1>".encode("utf-16-le"), "utf-16", False),  # declared UTF-16: NULs are its ASCII
        ("<h1>no BOM</h1>".encode("utf-16-le"), None, True),
        (b"%PDF-1.7\n" + b"x" * 600, "utf-16", True),  # a signature is binary whatever is declared
    ],
)
def test_binary_means_a_signature_or_a_share_of_binary_bytes(head: bytes, charset: str | None, binary: bool) -> None:
    assert http.looks_binary(head, charset) is binary


def test_a_declared_binary_type_is_not_read(web: LoopbackWeb) -> None:
    r = fetch(serve(web, "/x.png", Response(b"\x89PNG" + b"\x00" * 100_000, content_type="image/png")))
    assert r.status == 200 and r.content_type == "image/png" and r.body == b"" and not r.binary


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "169.254.169.254", "0.0.0.0", "::1", "::ffff:127.0.0.1"])
def test_the_guard_refuses_addresses_that_are_not_public(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", _resolver([address]))
    r = http.fetch("http://internal.example/", UA, http.AddressGuard(), **FAST)
    assert r.status is None
    assert r.error.startswith("address ") and " is not public (use --allow-private to allow it): " in r.error


def test_the_connection_goes_to_the_checked_address(web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(web, "/", Response("<p>by name</p>"))
    port = web.hosts[HOST].port
    lookups = _resolver([HOST])
    monkeypatch.setattr(socket, "getaddrinfo", lookups)
    r = http.fetch(f"http://named.example:{port}/", UA, LOOPBACK, **FAST)
    assert r.body == b"<p>by name</p>" and r.ip_address == HOST
    assert web.log[-1].headers["Host"] == f"named.example:{port}"  # the name is kept for the server
    assert lookups.calls == 1  # one DNS answer: checked, then connected to


def test_dns_rebinding_gains_nothing(web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name answers public first, then loopback: the request never reaches loopback."""
    serve(web, "/", Response("<p>internal</p>"))
    port = web.hosts[HOST].port
    rebinding = _resolver(["8.8.8.8"], then=[HOST])
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    r = http.fetch(f"http://rebind.example:{port}/", UA, http.AddressGuard(), timeouts=(0.5, 1.0), deadline_seconds=3)
    assert r.status is None  # 8.8.8.8 is unreachable here; the point is where it did not go
    assert not web.log
    assert rebinding.calls == 1


class _Resolver:
    def __init__(self, first: list[str], then: list[str] | None) -> None:
        self.first, self.then, self.calls = first, then or first, 0

    def __call__(self, host: str, port: Any, *args: Any, **kw: Any) -> list[Any]:
        answer = self.first if self.calls == 0 else self.then
        self.calls += 1
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, int(port or 80)))
            for a in answer
        ]


def _resolver(first: list[str], then: list[str] | None = None) -> _Resolver:
    return _Resolver(first, then)


def test_interim_1xx_responses_are_skipped_to_the_final_one() -> None:
    # 103 Early Hints (and 102) before the page: http.client skips 100 alone, so the page was
    # recorded as a bodiless 103 and its links lost.
    page = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 11\r\n\r\n<p>page</p>"
    r = raw_fetch(b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + page)
    assert (r.status, r.body, r.error) == (200, b"<p>page</p>", "")


def test_endless_interim_responses_fail_cleanly() -> None:
    r = raw_fetch(b"HTTP/1.1 103 Early Hints\r\n\r\n" * 50)
    assert r.status is None and r.error
