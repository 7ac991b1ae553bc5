"""Full local crawls (``crawlstack crawl --local``) against multi-host loopback webs.

Every test builds a small web on 127.0.0.2, 127.0.0.3, ... with
:class:`LoopbackWeb`, crawls it and judges the crawl from the server's own
request log and from the output files (records.jsonl, crawl-log.jsonl,
warc/, summary.json).  Delays are kept small so the suite stays fast.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from webs import (
    UA,
    Crawl,
    allow_ports,
    assert_spacing,
    bare_paths,
    chain_site,
    check_spacing,
    describe,
    host_pattern,
    mapping,
    one,
    page,
    page_requests,
    robots,
    span,
    star_site,
)

from crawlstack.demo.server import RULES_DIR, LoopbackWeb, Response, demo_allow_ports, demo_seeds, demo_web

A, B, C, D = "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"
ROBOTS_REASON = re.compile(r"robots", re.IGNORECASE)
CONTENT_TYPE_REASON = re.compile(r"content[- _]?type", re.IGNORECASE)


def fetched_urls(result_log: list[dict[str, object]]) -> list[str]:
    return [str(e["url"]) for e in result_log if e.get("outcome") == "fetched"]


# --- the bundled demo ----------------------------------------------------------
DEMO_BOOKS = {
    "pride-and-prejudice": ("Pride and Prejudice", "Jane Austen", "£9.99", "978-0-14-143951-8", "1813"),
    "emma": ("Emma", "Jane Austen", "£8.50", "978-0-14-143958-7", "1815"),
    "great-expectations": ("Great Expectations", "Charles Dickens", "£10.25", "978-0-14-143956-3", "1861"),
    "bleak-house": ("Bleak House", "Charles Dickens", "£12.00", "978-0-14-143972-3", "1853"),
    "middlemarch": ("Middlemarch", "George Eliot", "£11.75", "978-0-14-143954-9", "1872"),
    "frankenstein": ("Frankenstein", "Mary Shelley", "£7.95", "978-0-14-143947-1", "1818"),
}
DEMO_AUTHORS = {
    "jane-austen": ("Jane Austen", "1775", "England"),
    "charles-dickens": ("Charles Dickens", "1812", "England"),
    "george-eliot": ("George Eliot", "1819", "England"),
    "mary-shelley": ("Mary Shelley", "1797", "England"),
}


def test_demo_site_end_to_end(crawl: Crawl) -> None:
    with demo_web() as web:
        extra = demo_allow_ports(web)
        result = crawl(*demo_seeds(web), rules=RULES_DIR, max_depth=3, delay=0.2, server=web, extra=extra)
        log = web.log

    # Every book and author page became one record with the right fields.
    books = {r["url"]: r for r in result.records_for("book")}
    assert set(books) == {web.url(A, f"/books/{slug}.html") for slug in DEMO_BOOKS}, result.records
    for slug, (title, author, price, isbn, year) in DEMO_BOOKS.items():
        fields = books[web.url(A, f"/books/{slug}.html")]["fields"]
        got = {k: one(fields.get(k)) for k in ("title", "author", "price", "isbn", "year")}
        assert got == {"title": title, "author": author, "price": price, "isbn": isbn, "year": year}
    authors = {r["url"]: r for r in result.records_for("author")}
    assert set(authors) == {web.url(B, f"/authors/{slug}.html") for slug in DEMO_AUTHORS}
    for slug, (name, born, country) in DEMO_AUTHORS.items():
        fields = authors[web.url(B, f"/authors/{slug}.html")]["fields"]
        assert (one(fields["name"]), one(fields["born"]), one(fields["country"])) == (name, born, country)
    # (The API and journal hosts are judged in test_rule_examples_crawl.py.)
    assert {r["mapping"] for r in result.records} == {"book", "author", "reblogs", "article"}, (
        "unmapped pages must not give records"
    )

    # robots.txt: fetched once per host, first; /private/ never fetched and logged as skipped by robots.
    for host in (A, B):
        paths = bare_paths(web, host)
        assert paths.count("/robots.txt") == 1, describe(web.requests_for(host))
        assert paths[0] == "/robots.txt", describe(web.requests_for(host))
    assert not any(p.startswith("/private/") for p in bare_paths(web, A)), describe(web.requests_for(A))
    private = result.log_entry(web.url(A, "/private/staff-picks.html"))
    assert private["outcome"] == "skipped" and ROBOTS_REASON.search(private.get("reason", "")), private

    # The logo is not HTML: skipped by content type.
    logo = result.log_entry(web.url(A, "/images/logo.png"))
    assert logo["outcome"] == "skipped" and CONTENT_TYPE_REASON.search(logo.get("reason", "")), logo

    # The user agent on every request, robots.txt included.
    assert {e.user_agent for e in log} == {UA}

    # The WARC files hold a response record for every book page.
    assert result.warc_files, "no WARC files written"
    warc_uris: set[str] = set()
    for path in result.warc_files:
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    warc_uris.add(rec.rec_headers.get_header("WARC-Target-URI"))
    assert set(books) <= warc_uris, sorted(warc_uris)

    assert isinstance(result.summary, dict), "summary.json missing or not an object"
    assert (result.out / "records.jsonl").exists() and (result.out / "crawl-log.jsonl").exists()


# --- robots.txt ----------------------------------------------------------------
def test_robots_404_allows_everything(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(A, star_site(4))
    result = crawl(web.url(A, "/"), delay=0.1)

    paths = bare_paths(web, A)
    assert paths[0] == "/robots.txt" and paths.count("/robots.txt") == 1, paths
    assert sorted(paths[1:]) == sorted(["/", "/p1.html", "/p2.html", "/p3.html", "/p4.html"])
    pages = ["/", "/p1.html", "/p2.html", "/p3.html", "/p4.html"]
    assert sorted(fetched_urls(result.log)) == sorted(web.url(A, p) for p in pages), result.log_text()


def test_robots_5xx_disallows_the_whole_host(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(A, {"/robots.txt": robots("oops", status=500), **star_site(3)})
    web.add_host(B, {"/": page("b", ["/b1.html", "{{url:127.0.0.2}}/p1.html"]), "/b1.html": page("b1")})
    result = crawl(web.url(A, "/"), web.url(B, "/"), delay=0.1)

    assert web.paths(A) == ["/robots.txt"], describe(web.requests_for(A))
    assert sorted(bare_paths(web, B)) == ["/", "/b1.html", "/robots.txt"]
    seed = result.log_entry(web.url(A, "/"))
    assert seed["outcome"] == "skipped" and ROBOTS_REASON.search(seed.get("reason", "")), seed
    assert web.url(A, "/p1.html") not in fetched_urls(result.log)


def test_robots_user_agent_groups(web: LoopbackWeb, crawl: Crawl) -> None:
    site = {
        "/": page("index", ["/x/page.html", "/y/page.html", "/private/page.html", "/ok.html"]),
        "/x/page.html": page("x"),
        "/y/page.html": page("y"),
        "/private/page.html": page("private"),
        "/ok.html": page("ok"),
    }
    # A group for our product token disallows /x/ while * allows everything.
    web.add_host(
        A, {**site, "/robots.txt": robots("User-agent: *\nAllow: /\n\nUser-agent: crawlstack\nDisallow: /x/\n")}
    )
    # Another bot's group disallows /x/; we fall under *, which disallows /private/ only.
    web.add_host(
        B,
        {**site, "/robots.txt": robots("User-agent: otherbot\nDisallow: /x/\n\nUser-agent: *\nDisallow: /private/\n")},
    )
    # * disallows /x/, but our own group (which replaces *) only disallows /y/.
    web.add_host(
        C,
        {**site, "/robots.txt": robots("User-agent: *\nDisallow: /x/\n\nUser-agent: crawlstack\nDisallow: /y/\n")},
    )
    result = crawl(web.url(A, "/"), web.url(B, "/"), web.url(C, "/"), delay=0.1)

    expected = {
        A: {"/robots.txt", "/", "/y/page.html", "/private/page.html", "/ok.html"},
        B: {"/robots.txt", "/", "/x/page.html", "/y/page.html", "/ok.html"},
        C: {"/robots.txt", "/", "/x/page.html", "/private/page.html", "/ok.html"},
    }
    disallowed = {A: "/x/page.html", B: "/private/page.html", C: "/y/page.html"}
    for host, paths in expected.items():
        got = bare_paths(web, host)
        assert Counter(got) == Counter(paths), f"{host}:\n{describe(web.requests_for(host))}"
        entry = result.log_entry(web.url(host, disallowed[host]))
        assert entry["outcome"] == "skipped" and ROBOTS_REASON.search(entry.get("reason", "")), entry


def test_robots_crawl_delay_raises_the_gap(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(A, {"/robots.txt": robots("User-agent: *\nCrawl-delay: 1\n"), **star_site(2)})
    web.add_host(B, star_site(4))
    crawl(web.url(A, "/"), web.url(B, "/"), delay=0.2)

    pages_a = page_requests(web, A)
    assert len(pages_a) == 3, describe(web.requests_for(A))
    problems = check_spacing(pages_a, 1.0)
    assert not problems, "Crawl-delay: 1 not honoured\n" + "\n".join(problems) + "\n" + describe(web.requests_for(A))
    assert_spacing(web, A, 0.2)
    assert_spacing(web, B, 0.2)
    assert len(page_requests(web, B)) == 5


# --- depth and scope -------------------------------------------------------------
@pytest.mark.parametrize("max_depth", [None, 1])
def test_max_depth(web: LoopbackWeb, crawl: Crawl, max_depth: int | None) -> None:
    web.add_host(A, chain_site(6))
    result = crawl(web.url(A, "/d0.html"), max_depth=max_depth, delay=0.1)

    depth = 2 if max_depth is None else max_depth  # the default is 2; the seed is depth 0
    expected = [f"/d{i}.html" for i in range(depth + 1)]
    assert [p for p in bare_paths(web, A) if p != "/robots.txt"] == expected, describe(web.requests_for(A))
    for i, path in enumerate(expected):
        entry = result.log_entry(web.url(A, path))
        assert entry["outcome"] == "fetched" and entry["depth"] == i, entry
    assert web.url(A, f"/d{depth + 1}.html") not in fetched_urls(result.log)


def test_scope_seed_hosts_and_mapped_urls(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(
        A,
        {
            "/": page("seed", ["/local.html", "{{url:127.0.0.3}}/elsewhere.html", "{{url:127.0.0.4}}/things/1.html"]),
            "/local.html": page("local"),
        },
    )
    web.add_host(B, {"/elsewhere.html": page("not in scope")})
    web.add_host(C, {"/things/1.html": page("Thing one")})
    rules = [mapping("thing", host_pattern(C, r"/things/\d+\.html"), {"title": "//h1/text()"})]
    # C is not seeded: its port needs allowing, as a user would.
    result = crawl(web.url(A, "/"), rules=rules, delay=0.1, extra=allow_ports(web, C))

    assert sorted(bare_paths(web, A)) == ["/", "/local.html", "/robots.txt"]
    assert web.requests_for(B) == [], "a host that is neither a seed host nor matched by a mapping was contacted"
    assert "/things/1.html" in bare_paths(web, C), describe(web.requests_for(C))
    assert web.url(B, "/elsewhere.html") not in fetched_urls(result.log)
    thing = result.record(web.url(C, "/things/1.html"))
    assert thing["mapping"] == "thing" and one(thing["fields"]["title"]) == "Thing one"


def test_each_page_fetched_once_despite_url_variants(web: LoopbackWeb, crawl: Crawl) -> None:
    # D listens on port 80 when it can (we usually run as root), so default-port spellings can be tested too.
    try:
        web.add_host(D, port=80)
    except OSError:
        web.add_host(D)
    variants_a = [
        "/p1.html",
        "/p1.html#frag",
        "./p1.html",
        "p1.html#x",
        "{{url}}/p1.html",
        "HTTP://127.0.0.2:{port}/p1.html#top",
        "/q.html?b=2&a=1",
        "/q.html?a=1&b=2",
        "/q.html?a=1&b=2#f",
        "{{url:127.0.0.5}}/r.html",
    ]
    pages = ["/", "/p1.html", "/p2.html", "/p3.html", "/q.html"]
    web.add_host(A)
    port_a = web.port(A)
    links = [v.replace("{port}", str(port_a)) for v in variants_a] + ["/p2.html", "/p3.html", "/p3.html#again"]
    for path in pages:
        web.set_route(A, path, page(f"A {path}", links))
    d_links = ["/r.html", "/r.html#x", "{{url}}/r.html", "{{url:127.0.0.2}}/p2.html#d"]
    if web.port(D) == 80:
        d_links += ["http://127.0.0.5:80/r.html", "HTTP://127.0.0.5:80/r.html#top", "http://127.0.0.5/s.html?z=1&y=2"]
        d_links += ["http://127.0.0.5:80/s.html?y=2&z=1"]
    for path in ["/", "/r.html", "/s.html"]:
        web.set_route(D, path, page(f"D {path}", d_links))
    seed_d = "http://127.0.0.5:80/" if web.port(D) == 80 else web.url(D, "/")
    result = crawl(web.url(A, "/"), seed_d, delay=0.05)

    for host in (A, D):
        counts = Counter(bare_paths(web, host))
        assert counts["/robots.txt"] == 1, describe(web.requests_for(host))
        dupes = {p: n for p, n in counts.items() if n > 1}
        assert not dupes, f"fetched more than once on {host}: {dupes}\n{describe(web.requests_for(host))}"
    assert set(bare_paths(web, A)) == {"/robots.txt", *pages}
    expected_d = {"/robots.txt", "/", "/r.html"} | ({"/s.html"} if web.port(D) == 80 else set())
    assert set(bare_paths(web, D)) == expected_d, describe(web.requests_for(D))
    urls = Counter(e["url"] for e in result.log)
    assert not {u: n for u, n in urls.items() if n > 1}, result.log_text()
    assert not any("#" in u for u in urls), result.log_text()
    if web.port(D) == 80:
        assert "http://127.0.0.5/r.html" in urls and not any(":80/" in u for u in urls), result.log_text()


# --- politeness ------------------------------------------------------------------
def test_per_host_gaps_no_overlap_and_hosts_in_parallel(web: LoopbackWeb, crawl: Crawl) -> None:
    delay = 0.3
    hosts = (A, B, C)
    for host in hosts:
        web.add_host(host, star_site(5, delay=0.1))  # each page takes 0.1 s to answer
    crawl(*(web.url(h, "/") for h in hosts), delay=delay)

    for host in hosts:
        assert len(web.requests_for(host)) == 7, describe(web.requests_for(host))  # robots.txt + 6 pages
        assert_spacing(web, host, delay)
    spans = {h: span(web.requests_for(h)) for h in hosts}
    total = span(web.log)
    assert total < 0.7 * sum(spans.values()), f"hosts not crawled in parallel: total {total:.2f}s, per host {spans}"
    # Every pair of hosts was being crawled at the same time for a while.
    for i, h1 in enumerate(hosts):
        for h2 in hosts[i + 1 :]:
            r1, r2 = web.requests_for(h1), web.requests_for(h2)
            overlap = min(r1[-1].arrived, r2[-1].arrived) - max(r1[0].arrived, r2[0].arrived)
            assert overlap > 0, f"{h1} and {h2} were crawled one after the other\n{describe(web.log)}"


def test_zero_delay_still_fetches_everything(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(A, star_site(6))
    crawl(web.url(A, "/"), delay=0)
    assert len(page_requests(web, A)) == 7
    assert bare_paths(web, A).count("/robots.txt") == 1


# --- extraction ------------------------------------------------------------------
def test_records_url_parsers_and_unmapped_pages(web: LoopbackWeb, crawl: Crawl) -> None:
    product = (
        "<div class='product'><h1>\n   {name}\n  </h1><span class='price'>  {price} </span>"
        "<a class='maker' href='{maker}'>maker</a></div>"
    )
    web.add_host(
        A,
        {
            "/": page("Shop", ["/products/1.html", "/hub.html"]),
            "/hub.html": page("Hub", ["/products/2.html"]),  # unmapped: its in-scope links are followed
            "/products/1.html": product.format(name="Widget", price="9.99", maker="{{url:127.0.0.4}}/makers/acme.html"),
            "/products/2.html": product.format(
                name="Gadget", price="19.50", maker="{{url:127.0.0.4}}/makers/globex.html?ref=2#top"
            ),
        },
    )
    maker = "<h1>{name}</h1><p class='country'>\t{country}\n</p>"
    web.add_host(
        C,
        {
            "/makers/acme.html": maker.format(name="Acme Corp", country="Freedonia"),
            "/makers/globex.html": maker.format(name="Globex", country="Sylvania"),
        },
    )
    rules = [
        mapping(
            "product",
            host_pattern(A, r"/products/\d+\.html"),
            {
                "name": "//h1/text()",
                "price": "//span[@class='price']/text()",
                "colour": "//span[@class='colour']/text()",
            },
            url_parsers=["//a[@class='maker']/@href"],
        ),
        mapping(
            "maker", host_pattern(C, r"/makers/[\w-]+\.html(\?.*)?"), {"name": "//h1/text()", "country": "//p/text()"}
        ),
    ]
    # index (0) -> hub (1) -> product 2 (2) -> globex (3)
    result = crawl(web.url(A, "/"), rules=rules, delay=0.1, max_depth=3, extra=allow_ports(web, C))

    assert {r["mapping"] for r in result.records} == {"product", "maker"}, result.records
    p1 = result.record(web.url(A, "/products/1.html"))
    assert p1["mapping"] == "product"
    assert (one(p1["fields"]["name"]), one(p1["fields"]["price"])) == ("Widget", "9.99")
    assert p1["fields"].get("colour") in (None, [], ""), p1
    p2 = result.record(web.url(A, "/products/2.html"))
    assert (one(p2["fields"]["name"]), one(p2["fields"]["price"])) == ("Gadget", "19.50")
    acme = result.record(web.url(C, "/makers/acme.html"))
    assert (acme["mapping"], one(acme["fields"]["name"]), one(acme["fields"]["country"])) == (
        "maker",
        "Acme Corp",
        "Freedonia",
    )
    globex = result.record(web.url(C, "/makers/globex.html?ref=2"))
    assert one(globex["fields"]["name"]) == "Globex"
    assert sorted(bare_paths(web, C)) == ["/makers/acme.html", "/makers/globex.html", "/robots.txt"]
    assert len(result.records) == 4


def test_non_html_and_error_pages(web: LoopbackWeb, crawl: Crawl) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    web.add_host(
        A,
        {
            "/": page("index", ["/img.png", "/missing.html", "/data.json", "/ok.html"]),
            "/img.png": Response(png, content_type="image/png"),
            "/data.json": Response('{"a": 1}', content_type="application/json"),
            "/ok.html": page("ok"),
        },
    )
    # The index stays unmapped (so all its links are followed); the PNG matches a mapping but is not HTML.
    rules = [mapping("leaf", host_pattern(A, r"/(ok\.html|img\.png|data\.json)"), {"title": "//h1/text()"})]
    result = crawl(web.url(A, "/"), rules=rules, delay=0.1)

    img = result.log_entry(web.url(A, "/img.png"))
    assert img["outcome"] == "skipped" and CONTENT_TYPE_REASON.search(img.get("reason", "")), img
    missing = result.log_entry(web.url(A, "/missing.html"))
    assert missing.get("status") == 404, missing
    assert result.log_entry(web.url(A, "/ok.html"))["outcome"] == "fetched"
    assert result.log_entry(web.url(A, "/data.json"))["outcome"] == "fetched"
    record_urls = {r["url"] for r in result.records}
    assert web.url(A, "/img.png") not in record_urls
    assert web.url(A, "/ok.html") in record_urls


# --- limits and inputs -----------------------------------------------------------
def test_max_pages(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(A, star_site(12))
    result = crawl(web.url(A, "/"), max_pages=4, delay=0.05)

    pages = page_requests(web, A)
    assert 1 <= len(pages) <= 4, describe(web.requests_for(A))
    assert len(fetched_urls(result.log)) <= 4, result.log_text()


def test_seeds_file(web: LoopbackWeb, crawl: Crawl, tmp_path: Path) -> None:
    web.add_host(A, {"/item/1.html": page("Item one"), "/item/2.html": page("Item two")})
    web.add_host(B, star_site(1))
    seeds = tmp_path / "seeds.jsonl"
    lines = [
        {"url": web.url(A, "/item/1.html"), "record_id": "rec-1"},
        {"url": web.url(A, "/item/2.html")},
        {"url": web.url(B, "/")},
    ]
    seeds.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    rules = [mapping("item", host_pattern(A, r"/item/\d+\.html"), {"title": "//h1/text()"})]
    result = crawl(seeds_file=seeds, rules=rules, delay=0.1, max_depth=1)

    assert sorted(bare_paths(web, A)) == ["/item/1.html", "/item/2.html", "/robots.txt"]
    assert sorted(bare_paths(web, B)) == ["/", "/p1.html", "/robots.txt"]
    titles = {r["url"]: one(r["fields"]["title"]) for r in result.records_for("item")}
    assert titles == {web.url(A, "/item/1.html"): "Item one", web.url(A, "/item/2.html"): "Item two"}
    assert result.log_entry(web.url(A, "/item/1.html"))["depth"] == 0


def test_subprocess_entry_point_and_user_agent(web: LoopbackWeb, crawl: Crawl) -> None:
    agent = "crawlstack-subprocess/2.0 (+https://example.invalid/sub)"
    web.add_host(A, {"/robots.txt": robots("User-agent: *\nDisallow: /nope/\n"), **star_site(2)})
    web.add_host(B, star_site(1))
    rules = [mapping("page", host_pattern(A, r"/p\d\.html"), {"title": "//h1/text()"})]
    result = crawl(web.url(A, "/"), web.url(B, "/"), rules=rules, delay=0.1, user_agent=agent, use_subprocess=True)

    log = web.log
    assert len(log) == 7, describe(log)  # 2 robots.txt + 3 pages on A + 2 on B
    assert {e.user_agent for e in log} == {agent}, describe(log)
    assert sorted(one(r["fields"]["title"]) for r in result.records) == ["page 1", "page 2"]
    assert isinstance(result.summary, dict)
    assert result.warc_files
    with gzip.open(result.warc_files[0], "rb") as fh:
        assert fh.read(5) == b"WARC/"


# --- redirects -----------------------------------------------------------------
def test_redirects_are_followed_through_the_frontier(web: LoopbackWeb, crawl: Crawl) -> None:
    web.add_host(
        A,
        {
            "/": page("home", ["/old.html", "/loop1.html", "{{url:" + D + "}}/away.html", "/new.html"]),
            "/old.html": Response(status=301, headers={"Location": "/new.html"}),
            "/new.html": page("new"),
            "/loop1.html": Response(status=302, headers={"Location": "/loop2.html"}),
            "/loop2.html": Response(status=302, headers={"Location": "/loop1.html"}),
        },
    )
    web.add_host(C, {"/start.html": page("start")})
    web.add_host(D, {"/away.html": page("away")})
    web.add_host(B, {"/": Response(status=301, headers={"Location": web.url(C, "/start.html")})})
    # A seed's redirect to another port needs it allowed (a redirect is not what the user seeded).
    result = crawl(web.url(A, "/"), web.url(B, "/"), delay=0.1, extra=allow_ports(web, C))

    # Each URL once, the redirect target among them, and a redirect loop ends.
    assert Counter(bare_paths(web, A)) == Counter(
        ["/robots.txt", "/", "/old.html", "/new.html", "/loop1.html", "/loop2.html"]
    )
    old = one([e for e in result.log if str(e["url"]).endswith("/old.html")])
    assert old["outcome"] == "fetched" and old["status"] == 301 and "redirect" in str(old.get("reason"))
    # A seed that redirects to another host makes that host a seed host too (its port allowed above);
    # a link from A to D is not followed (D is no seed host and no mapping matches).
    assert bare_paths(web, C) == ["/robots.txt", "/start.html"]
    assert bare_paths(web, D) == []
    assert_spacing(web, A, 0.1)


def test_the_handlers_loggers_outlive_a_tests_captured_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    # An in-process crawl imports the handlers here, in a test whose stdout closes when it ends.
    from functions.dispatch import handler as dispatch  # noqa: F401
    from functions.extract import handler as extract  # noqa: F401
    from functions.fetch import handler as fetch  # noqa: F401

    for function in ("dispatch", "fetch", "extract"):
        streams = [h.stream for h in logging.getLogger(function).handlers if isinstance(h, logging.StreamHandler)]
        assert streams and sys.stdout not in streams, (function, streams)
