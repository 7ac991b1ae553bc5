"""Each link canonicalised at most once: a seed once, a link extract found (canonical already) not again."""

from __future__ import annotations

from typing import Any

import pytest
from dispatching import build_dispatcher
from fakes import FakeBlobs, FakeClock, FakeCrawls, FakeHosts, FakeResults, FakeUrls

from crawlstack.config import CrawlConfig
from crawlstack.dispatch import Link, Outbox, dispatch_in_turns
from crawlstack.dispatch import link as link_module
from crawlstack.extract import Extractor
from crawlstack.fetch import http
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.messages import FrontierMessage, frontier_messages, pack_links
from crawlstack.ports import RobotsRecord
from crawlstack.rules import RuleSet
from crawlstack.urls import canonicalize, fingerprint, looks_canonical


def config(**kw: Any) -> CrawlConfig:
    return CrawlConfig(crawl_id="c", delay=1.0, user_agent="crawlstack/test", **kw)


def link(url: str, **kw: Any) -> Link:
    return Link(FrontierMessage(url=url, depth=1, crawl_id="c", **kw), message_id="m1")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "fetch_robots", lambda *a: pytest.fail("unexpected robots.txt fetch"))


@pytest.fixture
def canonicalisations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs dispatch canonicalises (the one call it makes, in ``Link``)."""
    calls: list[str] = []

    def counted(url: str) -> str:
        calls.append(url)
        return canonicalize(url)

    monkeypatch.setattr(link_module, "canonicalize", counted)
    return calls


def test_a_link_is_canonicalised_once_however_often_it_is_asked(canonicalisations: list[str]) -> None:
    made = link("HTTP://Example.com:80/a?b=1&a=2#x")
    assert made.url == "http://example.com/a?a=2&b=1"
    assert (made.fp, made.host, made.correlation_id) == (fingerprint(made.url), "example.com", made.fp)
    assert made.url and made.fp and made.invalid is None
    assert canonicalisations == ["HTTP://Example.com:80/a?b=1&a=2#x"]


def test_a_link_said_canonical_is_trusted_only_in_a_canonical_shape(canonicalisations: list[str]) -> None:
    assert link("http://example.com/a?a=2&b=1", canonical=True).url == "http://example.com/a?a=2&b=1"
    assert canonicalisations == []
    # Said canonical, but not in the shape canonicalize gives: canonicalised all the same.
    for url in ("HTTP://Example.com/", "http://example.com/#x", "http://example.com", "ftp://example.com/"):
        made = link(url, canonical=True)
        assert made.url != url or made.invalid is not None
    assert len(canonicalisations) == 4
    # Its fingerprint is always the hash of the URL it carries.
    assert link("http://example.com/", canonical=True).fp == fingerprint("http://example.com/")


@pytest.mark.parametrize(
    "url",
    [
        "http://Example.COM/a b?z=1&a=%7e",
        "https://user:Pass@host.example:8443/x/../y",
        "http://[::1]:8080/",
        "http://xn--bcher-kva.example/é",
        "http://example.com/?q=a#frag",
        "http://example.com:80",
    ],
)
def test_what_canonicalize_gives_looks_canonical(url: str) -> None:
    assert looks_canonical(canonicalize(url))


@pytest.mark.parametrize(
    "url",
    [
        "http://Example.com/",
        "http://example.com",
        "http://example.com/#f",
        "http://example.com/a b",
        "file:///x",
        "http://example.com/%zz",
        "http://example.com?x=1",
        "http://example.com/é",
        "http:///x",
        "https//x.example/",
    ],
)
def test_what_canonicalize_would_change_does_not_look_canonical(url: str) -> None:
    assert not looks_canonical(url)


# --- canonicalised once, end to end -----------------------------------------------------------


def dispatch_env() -> Any:
    clock = FakeClock()
    crawls, urls, hosts = FakeCrawls(config(seed_hosts=frozenset({"example.com"}))), FakeUrls(), FakeHosts(clock)
    hosts.put_robots(RobotsRecord.from_fetch("http://example.com", 404, b""))
    return build_dispatcher(crawls, urls, hosts, clock=clock), crawls


def run(dispatcher: Any, bodies: list[str]) -> list[tuple[str, str | None]]:
    """Bodies through dispatch as the handler takes them: (action, correlation id) per link.

    Each link queued is in the batch's outbox under the fingerprint its correlation id said.
    """
    ids: list[str | None] = []
    actions: list[str] = []
    outbox = Outbox()
    dispatch_in_turns(
        dispatcher,
        [(i, f"m{i}", frontier_messages(body)) for i, body in enumerate(bodies)],
        outbox,
        on_decision=lambda msg, decision: actions.append(decision.action),
        before=lambda link: ids.append(link.correlation_id),
    )
    decided = list(zip(actions, ids, strict=True))
    queued = [task.fp for _, depths in outbox.runs for _, tasks in depths for task in tasks]
    assert queued == [fp for action, fp in decided if action == "queued"]
    return decided


def test_links_from_extract_are_not_canonicalised_again(canonicalisations: list[str]) -> None:
    dispatcher, crawls = dispatch_env()
    blobs = FakeBlobs()
    page = b'<html><body><a href="/a?b=1&a=2">a</a><a href="HTTP://EXAMPLE.com/b#x">b</a></body></html>'
    exchange = Exchange(
        "http://example.com/",
        "GET",
        [],
        200,
        "OK",
        [("Content-Type", "text/html")],
        page,
        metadata={"crawl_id": "c", "depth": 0, "fp": fingerprint("http://example.com/"), "want": []},
    )
    blobs.put("pages/x.warc.gz", write_warc([exchange]), "application/warc")
    out = Extractor(crawls, FakeResults(), blobs, RuleSet()).extract_object(blobs.bucket, "pages/x.warc.gz")
    assert all(m.canonical for m in out.outlinks)
    bodies = pack_links(out.outlinks)
    assert len(bodies) == 1 and '"canonical":true' in bodies[0]  # said once for the bundle
    decided = run(dispatcher, bodies)
    assert decided == [
        ("queued", fingerprint("http://example.com/a?a=2&b=1")),
        ("queued", fingerprint("http://example.com/b")),
    ]
    assert canonicalisations == []


def test_a_seed_is_canonicalised_exactly_once(canonicalisations: list[str]) -> None:
    dispatcher, _ = dispatch_env()
    seed = FrontierMessage(url="HTTP://Example.com/s?b=1&a=2", crawl_id="c").to_json()
    assert run(dispatcher, [seed]) == [("queued", fingerprint("http://example.com/s?a=2&b=1"))]
    assert canonicalisations == ["HTTP://Example.com/s?b=1&a=2"]
