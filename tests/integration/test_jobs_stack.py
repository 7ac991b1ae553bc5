"""Crawl jobs on the emulated stack (moto): two crawls on one host, stop and resume through the handlers.

Dispatch puts a crawl's URLs in their host's backlog, which the host's run
(one run message on the fetch queue) works through whatever crawl a task is of.
"""

from __future__ import annotations

from typing import Any

import pytest
from outcomes import crawl_outcomes
from test_handlers import ADDRESS, UA, Site, context, drain, sqs_event
from test_handlers import site as web_site  # noqa: F401 (fixtures are found by the name they are bound to)
from test_handlers import stack as emulated  # noqa: F401

from crawlstack import aws, jobs, wiring
from crawlstack.config import CrawlConfig
from crawlstack.messages import FetchTask, FrontierMessage, RunMessage
from crawlstack.urls import canonicalize, fingerprint
from functions import container
from functions.dispatch import handler as dispatch
from functions.fetch import handler as fetch


@pytest.fixture
def stack_names(emulated: dict[str, str]) -> aws.StackNames:  # noqa: F811
    return aws.StackNames.from_env(emulated)


def put_crawl(names: aws.StackNames, crawl_id: str, **kw: Any) -> None:
    aws.CrawlStore(names.crawls).put(
        CrawlConfig(crawl_id=crawl_id, delay=0.0, user_agent=UA, max_depth=2, allow_private=("127.0.0.0/8",), **kw)
    )


def dispatch_urls(names: dict[str, str], crawl_id: str, *urls: str) -> None:
    bodies = [FrontierMessage(url=u, crawl_id=crawl_id).to_json() for u in urls]
    assert dispatch.handler(sqs_event(names, "frontier", *bodies), context("dispatch")) == {"batchItemFailures": []}


def fetch_bodies(names: dict[str, str], bodies: list[str]) -> None:
    assert fetch.handler(sqs_event(names, "fetch", *bodies), context("fetch")) == {"batchItemFailures": []}


def waiting(names: aws.StackNames) -> list[FetchTask]:
    """The tasks in the test host's backlog."""
    return [t for bundle in aws.BacklogStore(names.parked).peek(ADDRESS, 100) for t in bundle.tasks]


def page_requests(web_site: Site) -> list[str]:  # noqa: F811
    return [path for path, _ in web_site.requests if path != "/robots.txt"]


def test_two_crawls_on_one_host_fetch_the_same_url_once_each(
    emulated: dict[str, str],  # noqa: F811
    web_site: Site,  # noqa: F811
    stack_names: aws.StackNames,
) -> None:
    put_crawl(stack_names, "c1")
    put_crawl(stack_names, "c2")
    url = web_site.page("/same.html", "same")
    dispatch_urls(emulated, "c1", url)
    dispatch_urls(emulated, "c2", url)
    # One run for the host: the second crawl's URL joins the backlog the first one's run works.
    [message] = drain(emulated, "fetch")
    assert RunMessage.from_json(message["Body"]).host == ADDRESS
    tasks = waiting(stack_names)
    assert sorted(t.crawl_id for t in tasks) == ["c1", "c2"]
    # Both wait, each under its crawl: the same fingerprint does not collide.
    fp = fingerprint(canonicalize(url))
    assert {t.fp for t in tasks} == {fp}
    fetch_bodies(emulated, [message["Body"]])
    assert page_requests(web_site) == ["/same.html", "/same.html"]
    url_key = canonicalize(url)
    assert crawl_outcomes(stack_names, "c1")[url_key]["state"] == crawl_outcomes(stack_names, "c2")[url_key]["state"]
    assert crawl_outcomes(stack_names, "c1")[url_key]["state"] == "fetched"
    assert waiting(stack_names) == []
    assert aws.RunStore(stack_names.hosts).get(ADDRESS).run_id is None


def test_stop_holds_work_and_resume_sends_it_back_once(
    emulated: dict[str, str],  # noqa: F811
    web_site: Site,  # noqa: F811
    stack_names: aws.StackNames,
) -> None:
    put_crawl(stack_names, "c1")
    put_crawl(stack_names, "c2")
    a, b, c = (web_site.page(f"/{n}.html", n) for n in "abc")
    dispatch_urls(emulated, "c1", a, b)
    queued = [m["Body"] for m in drain(emulated, "fetch")]
    assert len(queued) == 1 and len(waiting(stack_names)) == 2

    wiring.stop_crawl("c1")
    assert aws.CrawlStore(stack_names.crawls).get("c1", max_age=0).stopped
    container.services().crawls._cache.clear()  # what STATE_CACHE_SECONDS later looks like
    dispatch_urls(emulated, "c1", c)  # a message arriving after the stop: held, unclaimed
    fetch_bodies(emulated, queued)  # tasks waiting since before the stop: held, no request, out of the backlog
    assert waiting(stack_names) == []
    assert aws.RunStore(stack_names.hosts).get(ADDRESS).run_id is None  # the run ended with its backlog
    dispatch_urls(emulated, "c2", c)  # another crawl on the host goes on, in a run of its own
    assert drain(emulated, "frontier") == []
    fetch_bodies(emulated, [m["Body"] for m in drain(emulated, "fetch")])
    assert page_requests(web_site) == ["/c.html"]
    held = aws.HeldStore(stack_names.parked, stack_names.crawls).held("c1", 10)
    assert sorted(k[:2] for k, _ in held) == ["f#", "t#", "t#"]
    assert aws.UrlStore(stack_names.urls).state("c1", fingerprint(canonicalize(c))) is None
    # A hold only succeeds while the crawl is stopped.
    assert not aws.HeldStore(stack_names.parked, stack_names.crawls).hold("c2", "f#x", "{}")
    assert not aws.HeldStore(stack_names.parked, stack_names.crawls).hold("unknown", "f#x", "{}")

    assert wiring.resume_crawl("c1") == 3
    assert aws.HeldStore(stack_names.parked, stack_names.crawls).held("c1", 10) == []
    assert wiring.resume_crawl("c1") == 0
    # The held tasks are back in the host's backlog, and its run was started again.
    assert sorted(t.url for t in waiting(stack_names)) == [canonicalize(a), canonicalize(b)]
    [run] = drain(emulated, "fetch")
    assert RunMessage.from_json(run["Body"]).run_id == aws.RunStore(stack_names.hosts).get(ADDRESS).run_id
    container.services().crawls._cache.clear()
    [frontier] = drain(emulated, "frontier")
    assert FrontierMessage.from_json(frontier["Body"]).url == canonicalize(c)
    assert dispatch.handler(sqs_event(emulated, "frontier", frontier["Body"]), context("dispatch")) == {
        "batchItemFailures": []
    }
    assert drain(emulated, "fetch") == []  # the resumed run is live: it finds the dispatched URL in the backlog
    fetch_bodies(emulated, [run["Body"]])
    assert sorted(page_requests(web_site)) == ["/a.html", "/b.html", "/c.html", "/c.html"]
    ends = crawl_outcomes(stack_names, "c1")
    assert {ends[canonicalize(u)]["state"] for u in (a, b, c)} == {"fetched"}
    assert aws.BacklogStore(stack_names.parked).waiting() == 0  # no task, and no held row, is left
    assert aws.RunStore(stack_names.hosts).get(ADDRESS).run_id is None


def test_stop_and_resume_refuse_an_unknown_crawl(emulated: dict[str, str]) -> None:  # noqa: F811
    with pytest.raises(jobs.UnknownCrawl):
        wiring.stop_crawl("nope")
    with pytest.raises(jobs.UnknownCrawl):
        wiring.resume_crawl("nope")
