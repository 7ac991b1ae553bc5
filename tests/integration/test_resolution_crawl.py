"""Record resolution in a full local crawl of a loopback web: OUT/resolved.jsonl and the links never followed.

Seeds carry ``record_id`` (and ``want``); the fields their pages give merge
into one record each.  Judged from resolved.jsonl, summary.json and the
server's own request log.
"""

from __future__ import annotations

import json
from pathlib import Path

from webs import (
    Crawl,
    CrawlResult,
    allow_ports,
    describe,
    host_pattern,
    mapping,
    one,
    page_requests,
    read_jsonl,
)

from crawlstack.demo.server import LoopbackWeb, Response

A, B, C = "127.0.0.2", "127.0.0.3", "127.0.0.4"


def item(a: str = "", b: str = "", c: str = "", links: tuple[str, ...] = ()) -> str:
    """A page with fields a, b and c (those given) and links for the mapping's url_parsers."""
    paras = "".join(f"<p class='{name}'>{value}</p>" for name, value in (("a", a), ("b", b), ("c", c)) if value)
    anchors = "".join(f"<a class='next' href='{href}'>next</a>" for href in links)
    return f"<!DOCTYPE html><html><head><title>item</title></head><body>{paras}{anchors}</body></html>"


def test_records_resolve_across_hosts_and_stop_following_once_complete(
    web: LoopbackWeb, crawl: Crawl, tmp_path: Path
) -> None:
    web.add_host(
        A,
        {
            # r-full wants a and b: a is here, b only on B.
            "/s/1.html": item(a="alpha-1", links=("{{url:127.0.0.3}}/d/1.html",)),
            # r-nowant wants nothing: it never completes, so everything reachable is merged.
            "/s/2.html": item(a="alpha-2", links=("{{url:127.0.0.3}}/d/4.html",)),
            # r-empty: a mapped page that finds nothing.  r-unmapped: no mapping at all.
            "/s/3.html": item(),
            "/plain.html": "<html><body><p>nothing mapped here</p></body></html>",
        },
    )
    web.add_host(
        B,
        {
            # Completes r-full (its a loses to the seed's: first value wins); its links are never followed.
            "/d/1.html": item(a="beta-a", b="beta-b", links=("{{url}}/d/2.html", "{{url:127.0.0.4}}/d/3.html")),
            "/d/2.html": item(c="never"),
            "/d/4.html": item(b="b-4", links=("{{url}}/d/5.html",)),
            "/d/5.html": item(a="a-5", c="c-5"),
        },
    )
    web.add_host(C, {"/d/3.html": item(c="never either")})
    fields = {name: f"//p[@class='{name}']/text()" for name in "abc"}
    rules = [
        mapping(
            "item",
            [host_pattern(A, r"/s/\d+\.html"), host_pattern(B, r"/d/\d+\.html"), host_pattern(C, r"/d/\d+\.html")],
            fields,
            url_parsers=["//a[@class='next']/@href"],
        )
    ]
    seeds = tmp_path / "seeds.jsonl"
    lines = [
        {"url": web.url(A, "/s/1.html"), "record_id": "r-full", "want": ["a", "b"]},
        {"url": web.url(A, "/s/2.html"), "record_id": "r-nowant"},
        {"url": web.url(A, "/s/3.html"), "record_id": "r-empty", "want": ["a"]},
        {"url": web.url(A, "/plain.html"), "record_id": "r-unmapped", "want": ["a"]},
    ]
    seeds.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    # Only A is seeded: B's and C's ports need allowing, as a user would.
    result = crawl(seeds_file=seeds, rules=rules, delay=0.05, max_depth=3, extra=allow_ports(web, B, C))

    resolved = read_jsonl(result.out / "resolved.jsonl")
    assert [r["record_id"] for r in resolved] == ["r-empty", "r-full", "r-nowant", "r-unmapped"], resolved
    by_id = {r["record_id"]: r for r in resolved}
    assert all(set(r) == {"record_id", "fields", "sources", "complete"} for r in resolved)

    full = by_id["r-full"]
    assert {k: one(v) for k, v in full["fields"].items()} == {"a": "alpha-1", "b": "beta-b"}, full
    assert full["sources"] == {"a": web.url(A, "/s/1.html"), "b": web.url(B, "/d/1.html")}
    assert full["complete"] is True

    nowant = by_id["r-nowant"]
    assert {k: one(v) for k, v in nowant["fields"].items()} == {"a": "alpha-2", "b": "b-4", "c": "c-5"}, nowant
    assert nowant["sources"] == {
        "a": web.url(A, "/s/2.html"),
        "b": web.url(B, "/d/4.html"),
        "c": web.url(B, "/d/5.html"),
    }
    assert nowant["complete"] is False
    for record_id in ("r-empty", "r-unmapped"):
        assert by_id[record_id] == {"record_id": record_id, "fields": {}, "sources": {}, "complete": False}

    # Pages linked only from the page that completed r-full were never requested, nor even queued.
    b_paths = sorted(p for p in web.paths(B) if p != "/robots.txt")
    assert b_paths == ["/d/1.html", "/d/4.html", "/d/5.html"], describe(web.requests_for(B))
    assert web.requests_for(C) == [], describe(web.requests_for(C))
    assert not result.log_entries(web.url(B, "/d/2.html")) and not result.log_entries(web.url(C, "/d/3.html"))

    # records.jsonl keeps its shape: one record per mapped page, with its record_id.
    assert {r["url"]: r.get("record_id") for r in result.records} == {
        web.url(A, "/s/1.html"): "r-full",
        web.url(A, "/s/2.html"): "r-nowant",
        web.url(A, "/s/3.html"): "r-empty",
        web.url(B, "/d/1.html"): "r-full",
        web.url(B, "/d/4.html"): "r-nowant",
        web.url(B, "/d/5.html"): "r-nowant",
    }
    assert result.summary is not None
    assert (result.summary["resolved_records"], result.summary["resolved_complete"]) == (4, 1)


def test_a_crawl_without_record_ids_writes_an_empty_resolved_file(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(A, {"/": item(a="x")})
    result = crawl(web.url(A, "/"), delay=0.05)
    assert (result.out / "resolved.jsonl").read_text(encoding="utf-8") == ""
    assert result.summary is not None and result.summary["resolved_records"] == 0


# --- links already on their way when the record completes --------------------------------
# Record r's chain: its seed on B, then one page on C that completes r.  Meanwhile A's run is
# busy with a slow page of a seed without record_id: a host's run is sequential, so every page
# of r admitted to A's backlog waits behind it until after r is complete, and the run's next
# look at its backlog finds r complete.  (B's and C's runs are their own: a fetch invocation
# works its hosts side by side, each flushing its own pages, so A's slow page holds up neither.)
BUSY_SECONDS = 5.0


def item_rules() -> list[dict[str, object]]:
    """Every page of the three hosts is mapped: fields a, b, c and links of class 'next'."""
    fields = {name: f"//p[@class='{name}']/text()" for name in "abc"}
    return [mapping("item", [host_pattern(h) for h in (A, B, C)], fields, url_parsers=["//a[@class='next']/@href"])]


def record_chain(web: LoopbackWeb, *a_paths: str) -> None:
    """r's pages on B and C: the seed (field a) links to C's page (field b) and to ``a_paths`` on A."""
    web.add_host(
        B,
        {"/s.html": item(a="alpha", links=(f"{{{{url:{C}}}}}/done.html", *(f"{{{{url:{A}}}}}{p}" for p in a_paths)))},
    )
    web.add_host(C, {"/done.html": item(b="beta")})


def crawl_with_busy_host(crawl: Crawl, web: LoopbackWeb, tmp_path: Path) -> CrawlResult:
    seeds = tmp_path / "seeds.jsonl"
    lines = [
        {"url": web.url(A, "/busy.html")},
        {"url": web.url(B, "/s.html"), "record_id": "r", "want": ["a", "b"]},
    ]
    seeds.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = crawl(seeds_file=seeds, rules=item_rules(), delay=0.3, max_depth=2, extra=allow_ports(web, C))
    [record] = read_jsonl(result.out / "resolved.jsonl")
    assert (record["record_id"], record["complete"]) == ("r", True), record
    assert record["sources"] == {"a": web.url(B, "/s.html"), "b": web.url(C, "/done.html")}
    # The scene held: r completed while A was still busy.
    [done] = page_requests(web, C)
    busy = next(e for e in web.requests_for(A) if e.bare_path == "/busy.html")
    assert done.finished is not None and busy.finished is not None and done.finished < busy.finished - 1.0, describe(
        web.log
    )
    return result


def test_pages_waiting_in_a_busy_hosts_backlog_are_never_requested_once_their_record_is_complete(
    web: LoopbackWeb, crawl: Crawl, tmp_path: Path
) -> None:
    queued = [f"/q/{n}.html" for n in range(1, 13)]
    web.add_host(
        A,
        {"/busy.html": Response(item(c="busy"), delay=BUSY_SECONDS), **{p: item(c=f"never {p}") for p in queued}},
    )
    record_chain(web, *queued)
    result = crawl_with_busy_host(crawl, web, tmp_path)

    # Judged from the server: A served its robots.txt and the slow page, none of r's twelve.
    assert [e.bare_path for e in page_requests(web, A)] == ["/busy.html"], describe(web.log)
    # Each was queued (it has a crawl-log line) and then skipped by A's run, at no request.
    for path in queued:
        entry = result.log_entry(web.url(A, path))
        assert (entry["outcome"], entry.get("reason")) == ("skipped", "record complete"), result.log_text()
    assert result.summary is not None and result.summary["pages_fetched"] == 3


def test_a_page_given_up_by_a_complete_record_is_fetched_for_a_seed_that_reaches_it_later(
    web: LoopbackWeb, crawl: Crawl, tmp_path: Path
) -> None:
    shared = "/p/new.html"
    web.add_host(
        A,
        {
            # The slow page of the seed without record_id links to the shared page: it gets there late.
            "/busy.html": Response(item(c="busy", links=(shared,)), delay=BUSY_SECONDS),
            shared: item(a="new-a", c="new-c"),
        },
    )
    record_chain(web, shared)
    result = crawl_with_busy_host(crawl, web, tmp_path)

    # r gave the shared page up unfetched; the other seed's link still got it requested, once, after the slow page.
    requests = page_requests(web, A)
    assert [e.bare_path for e in requests] == ["/busy.html", shared], describe(web.log)
    assert requests[0].finished is not None and requests[1].arrived > requests[0].finished
    new = result.record(web.url(A, shared))
    assert new.get("record_id") is None and one(new["fields"]["c"]) == "new-c", new
    assert result.log_entry(web.url(A, shared))["outcome"] == "fetched"
