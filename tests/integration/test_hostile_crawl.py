"""A local crawl of a hostile host, judged from the host's own request log and the crawl's outputs.

One host serves every case of issue 5's hostile web at once: an oversized
page, a gzip bomb, a corrupt gzip body, a server that drips its body, a
redirect chain longer than five hops, a redirect into robots.txt's
disallowed space, a link to the cloud metadata address, binary bodies
(declared and disguised as HTML), a link to an unseeded port, latin-1 pages (declared in the header, in a meta tag, and
nowhere), malformed hrefs and an
oversized robots.txt.  The crawl must end normally, each case must leave a
crawl-log line with its outcome and reason, and the server must never see
a request it should not.
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest
from webs import Crawl, host_pattern, mapping, page, robots

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Response

HOST = "127.0.0.2"
DEADLINE = 1.0
PNG = b"\x89PNG\r\n\x1a\n" + bytes(2048)
CAFE = "<html><head><title>t</title></head><body><h1>Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e</h1></body></html>"


def hostile_site() -> dict[str, Any]:
    links = [
        "/big.html",
        "/bomb.html",
        "/corrupt.html",
        "/drip.html",
        "/hop/1",
        "/to-private",
        "/image.png",
        "/fake.html",
        "/text/latin1-header.html",
        "/text/latin1-meta.html",
        "/text/latin1-guess.html",
        "http://169.254.169.254/latest/meta-data/",
        "javascript:alert(1)",
        "mailto:someone@example.com",
        "data:text/html,<h1>x</h1>",
        "http://[::1/broken",
        "http://127.0.0.2:99999/bad-port",
        "/bad%zzescape",
        "http://127.0.0.2:1/unseeded-port",
        "/" + "long/" * 600,
    ]
    site: dict[str, Any] = {
        # Larger than the 500 KiB robots.txt cap: the rule before the cap holds, the one after is never read.
        "/robots.txt": robots(
            "User-agent: *\nDisallow: /private\n" + "# padding\n" * (settings.ROBOTS_MAX_BYTES // 10) + "Disallow: /\n"
        ),
        "/": page("hostile", links),
        "/big.html": Response(("<p>" + "a" * 1000 + "</p>\n") * 11_000, content_type="text/html"),
        "/bomb.html": Response(gzip.compress(b"b" * (40 * 1024 * 1024)), headers={"Content-Encoding": "gzip"}),
        "/corrupt.html": Response(b"\x1f\x8b\x08\x00 not gzip at all" * 20, headers={"Content-Encoding": "gzip"}),
        "/drip.html": Response("<p>" + "d" * 400 + "</p>", drip=0.05),
        "/to-private": Response(b"", status=302, headers={"Location": "/private/secret.html"}),
        "/private/secret.html": page("secret"),
        "/image.png": Response(PNG, content_type="image/png"),
        "/fake.html": Response(PNG, content_type="text/html"),
        "/text/latin1-header.html": Response(CAFE.encode("latin-1"), content_type="text/html; charset=iso-8859-1"),
        "/text/latin1-meta.html": Response(
            CAFE.replace("<head>", '<head><meta charset="iso-8859-1">').encode("latin-1"), content_type="text/html"
        ),
        # Declared nowhere: detected.
        "/text/latin1-guess.html": Response(
            CAFE.replace("</h1>", "</h1><p>Cr\u00eapes, g\u00e2teau et p\u00e2t\u00e9 \u00e0 volont\u00e9.</p>").encode(
                "latin-1"
            ),
            content_type="text/html",
        ),
    }
    for i in range(1, 9):  # /hop/1 -> /hop/2 -> ... -> /hop/8: more than five redirects
        site[f"/hop/{i}"] = Response(b"", status=302, headers={"Location": f"/hop/{i + 1}"})
    return site


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The crawl runs in this process: a one-second deadline cuts the drip off without a long test.
    monkeypatch.setattr(settings, "TOTAL_DEADLINE_SECONDS", DEADLINE)


def test_a_hostile_host_is_crawled_to_the_end_and_every_case_leaves_a_reason(
    web: LoopbackWeb, crawl: Crawl, short_deadline: None
) -> None:
    web.add_host(HOST, hostile_site())
    rules = [mapping("text", host_pattern(HOST, "/text/.*"), {"title": "//h1"})]
    result = crawl(web.url(HOST, "/"), rules=rules, delay=0, max_depth=10, extra=["--allow", r"169\.254"])

    def entry(path: str) -> dict[str, Any]:
        return result.log_entry(web.url(HOST, path))

    paths = web.paths(HOST)
    # Never requested: robots.txt's disallowed space (not even through a redirect), hops past the fifth,
    # and whatever the malformed hrefs would have made.
    assert not [p for p in paths if p.startswith("/private")]
    assert paths.count("/robots.txt") == 1
    hops = [p for p in paths if p.startswith("/hop/")]
    assert hops == [f"/hop/{i}" for i in range(1, 7)], hops
    assert not [p for p in paths if "long/long" in p or "bad-port" in p or "broken" in p]
    assert len(paths) == len(set(paths)), "a page was requested twice"

    big, bomb = entry("/big.html"), entry("/bomb.html")
    for e in (big, bomb):
        assert (e["outcome"], e["truncated"]) == ("fetched", True), e
        assert e["reason"] == f"body truncated at {settings.MAX_BODY_BYTES} bytes"
    corrupt = entry("/corrupt.html")
    assert corrupt["outcome"] == "failed" and corrupt["reason"].startswith("corrupt compressed body"), corrupt
    drip = entry("/drip.html")
    assert drip["reason"] == f"deadline of {DEADLINE:g}s exceeded", drip
    assert drip["truncated"] is True, drip
    assert entry("/hop/6")["reason"] == "more than 5 redirects"
    assert entry("/image.png")["reason"] == "content-type image/png is not text"
    assert entry("/fake.html")["reason"] == "binary body claiming to be text/html"
    assert entry("/private/secret.html")["reason"] == "robots: disallowed by robots.txt"
    # In scope (--allow), so only the address guard stands between the crawl and the metadata service.
    metadata = result.log_entry("http://169.254.169.254/latest/meta-data/")
    assert metadata["reason"].startswith("address 169.254.169.254 is not public"), metadata

    # Malformed hrefs and a link to an unseeded port: dropped by dispatch, each with its reason.
    dropped = {e["url"]: e["reason"] for e in result.log if e["outcome"] == "dropped"}
    long_url = next(u for u in dropped if "/long/" in u)
    assert dropped == {
        "javascript:alert(1)": "invalid URL: scheme 'javascript' is not http or https",
        "mailto:someone@example.com": "invalid URL: scheme 'mailto' is not http or https",
        "data:text/html,<h1>x</h1>": "invalid URL: scheme 'data' is not http or https",
        "http://[::1/broken": "invalid URL: broken IPv6 literal",
        "http://127.0.0.2:99999/bad-port": "invalid URL: port 99999 out of range",
        web.url(HOST, "/bad%zzescape"): "invalid URL: bad percent-escape '%zz'",
        "http://127.0.0.2:1/unseeded-port": "port 1 is not allowed",
        long_url: f"invalid URL: longer than {settings.MAX_URL_LENGTH} characters",
    }

    titles = {r["url"]: r["fields"]["title"] for r in result.records}
    assert titles == {
        web.url(HOST, "/text/latin1-header.html"): "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e",
        web.url(HOST, "/text/latin1-meta.html"): "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e",
        web.url(HOST, "/text/latin1-guess.html"): "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e",
    }


def test_a_header_drip_is_a_failed_try_retried_as_a_timeout_not_a_truncated_200(
    web: LoopbackWeb, crawl: Crawl, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each byte of the status line and headers comes well within the read timeout; the headers never end
    # before the deadline.  Short deadline and backoff: the crawl runs in this process.
    monkeypatch.setattr(settings, "TOTAL_DEADLINE_SECONDS", 0.5)
    monkeypatch.setattr(settings, "RETRY_BASE_SECONDS", 0.05)
    drip_head = Response("<p>x</p>", drip_head=0.02)
    web.add_host(HOST, {"/": page("home", ["/drip-head.html"]), "/drip-head.html": drip_head})
    result = crawl(web.url(HOST, "/"), delay=0)

    assert web.paths(HOST).count("/drip-head.html") == settings.RETRY_MAX_ATTEMPTS, web.paths(HOST)
    drip = result.log_entry(web.url(HOST, "/drip-head.html"))
    expected = ("failed", None, 3, "header timeout: headers not finished in 0.5s after 3 attempts")
    assert (drip["outcome"], drip.get("status"), drip["attempts"], drip["reason"]) == expected, result.log_text()
    assert not drip.get("truncated"), drip
    assert result.summary is not None and result.summary["outcomes"] == {"fetched": 1, "failed": 1}
