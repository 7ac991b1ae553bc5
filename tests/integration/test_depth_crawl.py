"""Depth is the shortest path from a seed, not the order links were found in.

A page first found at the end of a long path, then (before it was fetched)
from a page one hop from the seed, takes the smaller depth, and its links
are followed to the depth limit, as they would be had it been found the
short way first.  Judged from the server's request log and the outputs.
"""

from __future__ import annotations

from webs import Crawl, page

from crawlstack.demo.server import LoopbackWeb, Response

HOST = "127.0.0.2"
SLOW_HOST = "127.0.0.3"


def test_a_page_found_again_nearer_the_seed_before_its_fetch_takes_the_smaller_depth(
    web: LoopbackWeb, crawl: Crawl
) -> None:
    # / -> /long1 -> /long2 -> /long3 -> /target (depth 4), and / -> slow host's /short -> /target (depth 2).
    # Each host's run is sequential, so the slow page is on a host of its own: /short answers
    # after /target was found the long way and is being fetched (it answers slowly too), so its
    # link arrives while /target is in flight: depth 4 becomes 2.
    slow = web.add_host(SLOW_HOST, {"/": page("other seed")})
    short = web.url(SLOW_HOST, "/short")
    web.add_host(
        HOST,
        {
            "/": page("seed", ["/long1", short]),
            "/long1": page("long 1", ["/long2"]),
            "/long2": page("long 2", ["/long3"]),
            "/long3": page("long 3", ["/target"]),
            "/target": Response(page("target", ["/beyond"]), delay=10.0),
            "/beyond": page("beyond"),
        },
    )
    target = web.url(HOST, "/target")
    slow.routes["/short"] = Response(page("short", [target]), delay=6.0)
    result = crawl(web.url(HOST, "/"), web.url(SLOW_HOST, "/"), delay=0, max_depth=4)

    paths = web.paths(HOST)
    # The order the test relies on: /target was requested before /short answered.
    target_asked = next(e.arrived for e in web.requests_for(HOST) if e.path == "/target")
    short_answered = next(e.finished for e in web.requests_for(SLOW_HOST) if e.path == "/short")
    assert short_answered is not None and target_asked < short_answered, paths
    assert paths.count("/target") == 1
    assert result.log_entry(short)["depth"] == 1
    assert result.log_entry(target)["depth"] == 2
    # At depth 4 its link would have been past the limit of 4; at depth 2 it is followed.
    assert "/beyond" in paths
    assert result.log_entry(web.url(HOST, "/beyond"))["depth"] == 3
