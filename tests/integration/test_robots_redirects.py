"""robots.txt redirects in a local crawl: followed only to a robots file the crawl may fetch.

RFC 9309 §2.3.1.2 follows a robots.txt redirect to a robots file, on any
host; a 302 to a page, a query or a port the crawl does not allow must not
make the crawler request it.  Judged from the target server's request log
(what it never saw) and from the crawl log (the redirecting host is crawled,
its robots.txt unavailable, so allow all).
"""

from __future__ import annotations

from typing import Any

from webs import Crawl, page, robots

from crawlstack.demo.server import LoopbackWeb, Response

# The server the redirects point at: loopback, inside --allow-private 127.0.0.0/8, on a port no seed uses.
ADMIN = "127.0.0.1"
ADMIN_ROUTES: dict[str, Any] = {
    "/secret-admin": page("deleted everything"),
    "/robots.txt": robots("User-agent: *\nDisallow: /private\n"),
}


def redirect(location: str) -> Response:
    return Response(b"", status=302, headers={"Location": location})


def site(robots_location: str) -> dict[str, Any]:
    return {
        "/robots.txt": redirect(robots_location),
        "/": page("home", ["/private/page.html"]),
        "/private/page.html": page("private"),
    }


def test_a_robots_txt_redirect_to_a_page_or_a_port_not_allowed_is_never_requested(
    web: LoopbackWeb, crawl: Crawl
) -> None:
    admin = web.add_host(ADMIN, ADMIN_ROUTES)
    web.add_host("127.0.0.2", site(f"http://{admin.netloc}/secret-admin?action=delete"))
    web.add_host("127.0.0.3", site(f"http://{admin.netloc}/robots.txt"))  # a robots file, on a port not allowed
    result = crawl(web.url("127.0.0.2", "/"), web.url("127.0.0.3", "/"), delay=0)

    assert web.requests_for(ADMIN) == [], web.paths(ADMIN)
    # Each host's robots.txt is unavailable (a redirect not followed): the host is crawled, allow all.
    for host in ("127.0.0.2", "127.0.0.3"):
        assert web.paths(host) == ["/robots.txt", "/", "/private/page.html"], web.paths(host)
        assert result.log_entry(web.url(host, "/private/page.html"))["outcome"] == "fetched"


def test_a_robots_txt_redirect_to_an_allowed_robots_txt_is_followed_and_a_page_is_not(
    web: LoopbackWeb, crawl: Crawl
) -> None:
    admin = web.add_host(ADMIN, ADMIN_ROUTES)
    web.add_host("127.0.0.2", site(f"http://{admin.netloc}/secret-admin?action=delete"))
    web.add_host("127.0.0.3", site(f"http://{admin.netloc}/robots.txt?action=delete"))
    web.add_host("127.0.0.4", site(f"http://{admin.netloc}/robots.txt"))
    seeds = [web.url(host, "/") for host in ("127.0.0.2", "127.0.0.3", "127.0.0.4")]
    # The port is allowed now: only the path and the query keep the first two redirects from being followed.
    result = crawl(*seeds, delay=0, extra=["--allow-port", str(admin.port)])

    assert web.paths(ADMIN) == ["/robots.txt"], web.paths(ADMIN)
    # The robots file reached applies to the host that redirected to it (RFC 9309 §2.3.1.2).
    assert web.paths("127.0.0.4") == ["/robots.txt", "/"], web.paths("127.0.0.4")
    private = result.log_entry(web.url("127.0.0.4", "/private/page.html"))
    assert (private["outcome"], private["reason"]) == ("skipped", "robots: disallowed by robots.txt"), private
    for host in ("127.0.0.2", "127.0.0.3"):
        assert web.paths(host) == ["/robots.txt", "/", "/private/page.html"], web.paths(host)
