"""A watch's check on the crawl's fetch path: its own dedupe key, a conditional GET, the check in the WARC."""

from __future__ import annotations

import json

import pytest
from hostruns import Env

from crawlstack.dispatch.link import Link
from crawlstack.fetch.warc import read_warc
from crawlstack.messages import CheckRef, FetchTask, FrontierMessage, InvalidMessage, frontier_messages
from crawlstack.runs import bundles
from crawlstack.urls import fingerprint

CHECK = CheckRef("news", "2026-01-01T06:00:00Z", 1, '"v7"', "Wed, 21 Oct 2026 07:28:00 GMT")


def test_a_check_travels_in_frontier_messages_and_fetch_tasks() -> None:
    msg = FrontierMessage("http://news.example/latest", crawl_id="watch", check=CHECK)
    [back] = frontier_messages(msg.to_json())
    assert back == msg
    task = FetchTask(
        "http://news.example/latest", "fp", "news.example", 0, "watch", 0.0, check=json.dumps(CHECK.to_dict())
    )
    assert FetchTask.from_json(task.to_json()).check_ref == CHECK
    assert bundles.decode(bundles.encode([task]))[0].check_ref == CHECK
    assert task.metadata()["check"] == CHECK.to_dict()
    # A crawl's task is as it always was: no check field in its message.
    plain = FetchTask("http://a.example/", "fp", "a.example", 0, "c", 0.0)
    assert "check" not in json.loads(plain.to_json()) and "check" not in plain.metadata()
    with pytest.raises(InvalidMessage, match=r"'check\.page' must be a positive integer"):
        FrontierMessage.from_dict({"url": "http://a.example/", "check": {"source_id": "s", "slot": "t", "page": 0}})


def test_each_check_of_a_url_has_its_own_dedupe_key() -> None:
    url = "http://news.example/latest"
    first = Link.of(FrontierMessage(url, check=CHECK))
    later = Link.of(FrontierMessage(url, check=CheckRef("news", "2026-01-02T06:00:00Z")))
    assert len({first.fp, later.fp, Link.of(FrontierMessage(url)).fp}) == 3
    assert Link.of(FrontierMessage(url)).fp == fingerprint(url)


def test_a_check_asks_conditionally_and_its_warc_says_which_check(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env(monkeypatch)
    task = env.task("latest", check=json.dumps(CHECK.to_dict()))
    env.web.page(task.url, status=304, body=b"")
    env.run(env.add([task]))
    assert env.web.headers[task.url] == [
        ("If-None-Match", '"v7"'),
        ("If-Modified-Since", "Wed, 21 Oct 2026 07:28:00 GMT"),
    ]
    [key] = env.warcs()
    [page] = list(read_warc(env.blobs.get(key)))
    assert (page.status, page.metadata["check"]) == (304, CHECK.to_dict())
    # A crawl's page asks plainly.
    plain = env.task("other")
    env.run(env.add([plain]))
    assert env.web.headers[plain.url] == []


def test_a_redirect_keeps_the_check_and_a_try_to_be_retried_is_marked() -> None:
    from crawlstack.fetch import http
    from crawlstack.fetch.outcomes import classify

    task = FetchTask(
        "http://news.example/latest", "fp", "news.example", 0, "watch", 0.0, check=json.dumps(CHECK.to_dict())
    )
    frontier: list[tuple[str, int]] = []
    moved = http.FetchResult(task.url, status=301, headers=[("Location", "/latest/")], finished_at=5.0)
    classify(task, moved, frontier, lambda: 5.0, lambda: 0.5)
    [(body, _)] = frontier
    assert FrontierMessage.from_json(body).check == CHECK
    busy = http.FetchResult(task.url, status=503, reason="Service Unavailable", finished_at=5.0)
    done = classify(task, busy, [], lambda: 5.0, lambda: 0.5)
    assert done.outcome == "retry" and done.exchange is not None and done.exchange.metadata["retried"] is True
