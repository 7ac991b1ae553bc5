"""``crawlstack rules test --url`` fetches once, politely, judged from the loopback server's request log."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from crawlstack.cli import main
from crawlstack.demo.server import LoopbackWeb, Response

RULES = {
    "name": "article",
    "url_patterns": [{"type": "regex", "pattern": "/post/"}],
    "fields": [
        {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "h1::text"}}]},
        {"name": "price", "processors": [{"type": "css", "parameters": {"selector": ".price"}}, {"type": "to_number"}]},
    ],
}
ARTICLE = "<h1>Caf\u00e9</h1><p class='price'>1,234.50</p><a href='/post/2'>next</a><a href='/private/x'>p</a>"


@pytest.fixture
def rules(tmp_path: Path) -> str:
    path = tmp_path / "article.json"
    path.write_text(json.dumps(RULES), encoding="utf-8")
    return str(path)


def web() -> LoopbackWeb:
    return LoopbackWeb(
        {
            "127.0.0.2": {
                "/robots.txt": Response(
                    "User-agent: *\nDisallow: /private\nCrawl-delay: 1\n", content_type="text/plain"
                ),
                "/post/1": Response(ARTICLE.encode("latin-1"), content_type="text/html; charset=iso-8859-1"),
                "/old": Response(b"", status=301, headers={"Location": "/post/1"}),
                "/private/page": "<h1>secret</h1>",
                "/post/gone": Response("gone", status=404),
                "/post/fake": Response(b"\x89PNG\r\n\x1a\n" + bytes(600), content_type="text/html"),
            }
        }
    )


def run(rules: str, url: str, *extra: str) -> int:
    return main(["rules", "test", rules, "--url", url, "--allow-private", "127.0.0.0/8", "--delay", "0", *extra])


def test_robots_first_then_the_page_after_the_crawl_delay(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    with web() as w:
        assert run(rules, w.url("127.0.0.2", "/old")) == 0
        log = w.requests_for("127.0.0.2")
    out = json.loads(capsys.readouterr().out)
    assert out["mapping"] == "article"
    assert out["fields"] == {"title": "Caf\u00e9", "price": 1234.5}
    assert out["url"].endswith("/post/1") and out["status"] == 200
    # /private/x is out of robots.txt's reach here: links are what scope allows; robots is checked per link later.
    assert [link.split(":", 2)[-1].split("/", 1)[-1] for link in out["links"]] == ["post/2", "private/x"]
    assert [r.path for r in log] == ["/robots.txt", "/old", "/post/1"]
    assert all(r.user_agent and r.user_agent.startswith("crawlstack") for r in log)
    gaps = [b.arrived - a.arrived for a, b in itertools.pairwise(log)]
    assert min(gaps) >= 0.95  # Crawl-delay: 1, although --delay 0


def test_a_page_robots_txt_disallows_is_never_requested(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    with web() as w:
        assert run(rules, w.url("127.0.0.2", "/private/page")) == 2
        paths = w.paths("127.0.0.2")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "disallowed by robots.txt" in err[0]
    assert paths == ["/robots.txt"]


def test_http_errors_and_refused_addresses_are_one_line(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    with web() as w:
        assert run(rules, w.url("127.0.0.2", "/post/gone")) == 2
        assert "HTTP 404" in capsys.readouterr().err
        # Without --allow-private the address guard refuses loopback before any request.
        assert main(["rules", "test", rules, "--url", w.url("127.0.0.2", "/post/1")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not public" in err[0]
        assert w.paths("127.0.0.2") == ["/robots.txt", "/post/gone"]


def test_a_binary_body_claiming_html_is_one_line(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    with web() as w:
        assert run(rules, w.url("127.0.0.2", "/post/fake")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith("/post/fake: binary body claiming to be text/html"), err



def two_ports() -> LoopbackWeb:
    """127.0.0.2 and 127.0.0.3, each on a port of its own (not 80 or 443); 127.0.0.3 serves /post/1."""
    article = Response(ARTICLE, content_type="text/html; charset=utf-8")
    return LoopbackWeb({"127.0.0.2": {"/post/2": article}, "127.0.0.3": {"/post/1": article}})


def redirect(location: str) -> Response:
    return Response(b"", status=302, headers={"Location": location})


def test_a_redirect_to_another_port_is_refused_unless_allowed(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    with two_ports() as w:
        w.hosts["127.0.0.2"].routes["/post/moved"] = redirect(w.url("127.0.0.3", "/post/1"))
        other = w.port("127.0.0.3")
        assert run(rules, w.url("127.0.0.2", "/post/moved")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith(f"port {other} is not allowed (--allow-port {other} follows it)"), err
        assert w.paths("127.0.0.3") == []

        assert run(rules, w.url("127.0.0.2", "/post/moved"), "--allow-port", str(other)) == 0
        assert json.loads(capsys.readouterr().out)["fields"]["title"] == "Caf\u00e9"
        assert w.paths("127.0.0.3") == ["/robots.txt", "/post/1"]


def test_a_robots_txt_redirect_is_followed_only_to_a_robots_file_on_an_allowed_port(
    rules: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with two_ports() as w:
        other = w.port("127.0.0.3")
        routes = w.hosts["127.0.0.2"].routes

        def title(*extra: str) -> str:
            assert run(rules, w.url("127.0.0.2", "/post/2"), *extra) == 0
            return str(json.loads(capsys.readouterr().out)["fields"]["title"])

        # A page is never a robots file, on any port; a robots file on another port needs --allow-port.
        # robots.txt is unavailable then (a redirect not followed), as when the file reached is a 404: allow all.
        routes["/robots.txt"] = redirect(w.url("127.0.0.3", "/secret-admin?action=delete"))
        assert title() == "Caf\u00e9"
        assert w.paths("127.0.0.3") == []
        assert title("--allow-port", str(other)) == "Caf\u00e9"
        routes["/robots.txt"] = redirect(w.url("127.0.0.3", "/robots.txt"))
        assert title() == "Caf\u00e9"
        assert w.paths("127.0.0.3") == []
        assert title("--allow-port", str(other)) == "Caf\u00e9"
        assert w.paths("127.0.0.3") == ["/robots.txt"]
        assert w.paths("127.0.0.2") == ["/robots.txt", "/post/2"] * 4
