"""LoopbackWeb: serving, the request log, 404s, several hosts, the bundled demo site."""

from __future__ import annotations

import threading
import time

import requests

from crawlstack.demo.server import (
    DEMO_HOSTS,
    RULES_DIR,
    LoopbackWeb,
    Request,
    Response,
    demo_seeds,
    demo_web,
)

UA = "demo-server-test/1.0"


def get(url: str, **kwargs: object) -> requests.Response:
    return requests.get(url, headers={"User-Agent": UA}, timeout=5, **kwargs)  # type: ignore[arg-type]


def test_serves_routes_on_several_hosts_and_logs_requests() -> None:
    hosts = {
        "127.0.0.2": {"/": "<a href='{{url:127.0.0.3}}/b'>b</a>", "/robots.txt": Response("User-agent: *\n")},
        "127.0.0.3": {
            "/b": Response(b"PNG", content_type="image/png", headers={"X-Test": "1"}),
            "/q?x=1": "with query",
            "/q": "without query",
        },
    }
    with LoopbackWeb(hosts) as web:
        a, b = web.port("127.0.0.2"), web.port("127.0.0.3")
        assert a > 0 and b > 0
        assert web.base_url("127.0.0.2") == f"http://127.0.0.2:{a}"

        root = get(web.url("127.0.0.2", "/"))
        assert root.status_code == 200
        assert root.headers["Content-Type"].startswith("text/html")
        # {{url:ADDRESS}} becomes the other host's base URL.
        assert root.text == f"<a href='http://127.0.0.3:{b}/b'>b</a>"

        png = get(web.url("127.0.0.3", "/b"))
        assert (png.status_code, png.content, png.headers["Content-Type"], png.headers["X-Test"]) == (
            200,
            b"PNG",
            "image/png",
            "1",
        )
        assert get(web.url("127.0.0.3", "/q?x=1")).text == "with query"
        assert get(web.url("127.0.0.3", "/q?y=2")).text == "without query"

        missing = get(web.url("127.0.0.3", "/robots.txt"))
        assert missing.status_code == 404
        assert get(web.url("127.0.0.2", "/nope")).status_code == 404

        # The server notes a response finished just after its last byte is
        # written, so the client may get there first: give it a moment.
        deadline = time.monotonic() + 2.0
        while any(e.finished is None for e in web.log) and time.monotonic() < deadline:
            time.sleep(0.01)
        log = web.log
        assert [(e.address, e.path) for e in log] == [
            ("127.0.0.2", "/"),
            ("127.0.0.3", "/b"),
            ("127.0.0.3", "/q?x=1"),
            ("127.0.0.3", "/q?y=2"),
            ("127.0.0.3", "/robots.txt"),
            ("127.0.0.2", "/nope"),
        ]
        assert all(e.user_agent == UA and e.method == "GET" for e in log)
        assert all(e.finished is not None and e.finished >= e.arrived for e in log)
        assert [e.status for e in log] == [200, 200, 200, 200, 404, 404]
        assert log[0].host == f"127.0.0.2:{a}"
        assert abs(log[0].arrived_wall - time.time()) < 60
        assert web.paths("127.0.0.2") == ["/", "/nope"]
        assert web.paths(f"127.0.0.3:{b}") == ["/b", "/q?x=1", "/q?y=2", "/robots.txt"]
        assert len(web.requests_for("127.0.0.3")) == 4
        assert web.requests_for("127.0.0.9") == []


def test_delay_callable_fallback_and_stop() -> None:
    seen: list[Request] = []

    def dynamic(req: Request) -> Response:
        seen.append(req)
        return Response(f"hello {req.query}", status=201, content_type="text/plain")

    web = LoopbackWeb()
    web.add_host("127.0.0.4", {"/slow": Response("zzz", delay=0.2), "/dyn": dynamic})
    with web:
        web.add_host("127.0.0.5", fallback=lambda req: f"fallback for {req.bare_path}" if "ok" in req.path else None)
        assert get(web.url("127.0.0.5", "/ok/1")).text == "fallback for /ok/1"
        assert get(web.url("127.0.0.5", "/nope")).status_code == 404

        t0 = time.monotonic()
        assert get(web.url("127.0.0.4", "/slow")).text == "zzz"
        assert time.monotonic() - t0 >= 0.19
        slow = web.requests_for("127.0.0.4")[-1]
        # The server stamps `finished` just after the last byte goes out, which
        # the client may already have read: give it a moment.
        deadline = time.monotonic() + 2
        while slow.finished is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert slow.finished is not None and slow.finished - slow.arrived >= 0.19

        dyn = get(web.url("127.0.0.4", "/dyn?a=1"))
        assert (dyn.status_code, dyn.text) == (201, "hello a=1")
        assert seen[0].bare_path == "/dyn" and seen[0].headers["User-Agent"] == UA

        web.set_route("127.0.0.4", "/late", "late")
        assert get(web.url("127.0.0.4", "/late")).text == "late"
        url = web.url("127.0.0.4", "/late")
    try:
        requests.get(url, timeout=1)
    except requests.ConnectionError:
        pass
    else:  # pragma: no cover
        raise AssertionError("server still answering after stop()")


def test_concurrent_requests_are_all_logged() -> None:
    with LoopbackWeb({"127.0.0.2": {"/x": Response("x", delay=0.05)}}) as web:
        threads = [threading.Thread(target=get, args=(web.url("127.0.0.2", f"/x?i={i}"),)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(web.paths("127.0.0.2")) == sorted(f"/x?i={i}" for i in range(20))
        assert web.wait_idle(quiet_seconds=0.05)


def test_bundled_demo_site() -> None:
    with demo_web() as web:
        seeds = demo_seeds(web)
        assert len(DEMO_HOSTS) == 4 and len(seeds) == 3  # no seed on the journal: the API's posts lead there
        robots = get(web.url("127.0.0.2", "/robots.txt"))
        assert robots.status_code == 200 and "Disallow: /private/" in robots.text
        assert get(web.url("127.0.0.3", "/robots.txt")).status_code == 404
        catalogue = get(seeds[0])
        assert catalogue.status_code == 200
        assert f"http://127.0.0.3:{web.port('127.0.0.3')}/authors/" in catalogue.text
        assert "{{url" not in catalogue.text
        book = get(web.url("127.0.0.2", "/books/emma.html"))
        assert book.status_code == 200 and "Emma" in book.text
        logo = get(web.url("127.0.0.2", "/images/logo.png"))
        assert logo.headers["Content-Type"] == "image/png" and logo.content.startswith(b"\x89PNG")
        assert get(seeds[1]).status_code == 200  # /authors/ -> index.html
        assert get(web.url("127.0.0.2", "/../../etc/passwd")).status_code == 404
        # The JSON API: served as JSON, its source_urls pointing at the journal's own port.
        api = get(web.url("127.0.0.4", "/v2/blog/bookish/posts/page-1.json"))
        assert api.headers["Content-Type"] == "application/json; charset=utf-8"
        sources = [post.get("source_url") for post in api.json()["response"]["posts"]]
        assert web.url("127.0.0.5", "/posts/reading-emma-again.html") in sources
        assert get(web.url("127.0.0.5", "/posts/reading-emma-again.html")).status_code == 200
    rules = sorted(p.name for p in RULES_DIR.glob("*.json"))
    assert rules == ["article.json", "author.json", "book.json", "reblogs.json"]
