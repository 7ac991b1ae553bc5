"""Retries and the adaptive delay in a full local crawl, judged from the servers' request logs.

One host answers a page 503 with ``Retry-After: 1`` twice, then 200; another
answers a page 500 every time.  Backoff is made short (settings patched: the
crawl runs in process), so the waits seen are Retry-After, the crawl delay
and the adaptive delay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator
from webs import SLACK, Crawl, check_spacing, describe, page, page_requests

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb, Request, Response

A, B = "127.0.0.2", "127.0.0.3"
DELAY = 0.2


def sequence(*responses: Response) -> Callable[[Request], Response]:
    """A route answering each response in turn, then the last one for ever."""
    answers = iter(responses)
    lock = threading.Lock()

    def route(request: Request) -> Response:
        with lock:
            return next(answers, responses[-1])

    return route


def warc_statuses(paths: list[Path], url: str) -> list[int]:
    statuses = []
    for path in paths:
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response" and record.rec_headers.get_header("WARC-Target-URI") == url:
                    statuses.append(int(record.http_headers.get_statuscode()))
    return sorted(statuses)


def test_a_503_page_is_fetched_on_its_third_try_and_an_always_500_page_fails_after_three(
    crawl: Crawl, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings, "RETRY_BASE_SECONDS", 0.05)
    busy = Response("busy", status=503, headers={"Retry-After": "1"})
    web.add_host(A, {"/flaky": sequence(busy, busy, Response(page("at last")))})
    web.add_host(B, {"/broken": Response("oops", status=500)})
    flaky, broken = web.url(A, "/flaky"), web.url(B, "/broken")

    result = crawl(flaky, broken, delay=DELAY, max_depth=0)

    tries = page_requests(web, A)
    log = describe(web.log)
    assert [e.status for e in tries] == [503, 503, 200], log
    first, second, third = tries
    assert first.finished is not None and second.finished is not None
    # Retry-After: 1, and a 503 doubles the host's delay (from the 1 s floor):
    # 1 s before the second try, 2 s before the third.
    assert second.arrived - first.finished >= 1.0 - SLACK, log
    assert third.arrived - second.finished >= settings.ADAPTIVE_DELAY_FLOOR_SECONDS * 2 - SLACK, log
    assert not check_spacing(web.requests_for(A), DELAY), log

    failing = page_requests(web, B)
    assert [e.status for e in failing] == [500] * settings.RETRY_MAX_ATTEMPTS, log
    assert not check_spacing(web.requests_for(B), DELAY), log

    fetched, failed = result.log_entry(flaky), result.log_entry(broken)
    assert (fetched["outcome"], fetched["status"], fetched["attempts"]) == ("fetched", 200, 3), result.log_text()
    assert (failed["outcome"], failed["status"], failed["attempts"]) == ("failed", 500, 3), result.log_text()
    assert failed["reason"] == "500 Internal Server Error after 3 attempts"
    # Each try's start is in the line: the server saw the requests begin after them, in that order.
    starts = [datetime.fromisoformat(t).timestamp() for t in [*fetched["earlier_tries"], fetched["started_at"]]]
    assert len(starts) == 3 and starts == sorted(starts), result.log_text()
    assert all(start <= entry.arrived_wall for start, entry in zip(starts, tries, strict=True)), log
    # Every try's exchange is archived, each try in a WARC of its own batch.
    assert warc_statuses(result.warc_files, flaky) == [200, 503, 503]
    assert warc_statuses(result.warc_files, broken) == [500, 500, 500]
    assert result.summary is not None and result.summary["outcomes"] == {"fetched": 1, "failed": 1}
