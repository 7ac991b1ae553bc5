"""Stop and resume a crawl on the local stack (moto and the event pump) against a loopback web.

The crawl is stopped from another thread through the jobs API while the
pump runs; the server's request log shows that no page is requested once
the stop has had its bounded time to reach every container, and that after
resume every page is fetched exactly once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from webs import UA, describe, page_requests, star_site

from crawlstack import aws, jobs, settings, wiring
from crawlstack.config import CrawlConfig
from crawlstack.demo.server import LoopbackWeb
from crawlstack.local import runner
from crawlstack.local.emulator import EmbeddedAws
from crawlstack.local.services import local_handlers
from crawlstack.messages import FrontierMessage
from crawlstack.rules import RuleSet
from crawlstack.wiring import Services, Stores

ADDRESS = "127.0.0.7"
CRAWL = "job"
PAGES = 24
DELAY = 0.2
CACHE = 1.0  # the stop bound, shortened from jobs.STATE_CACHE_SECONDS for the test
# Scheduling slack: a request whose task was taken just before the bound ran out.
SLACK = 0.5


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_stop_midway_then_resume_fetches_every_page_once(web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch) -> None:
    host = web.add_host(ADDRESS, star_site(PAGES))
    monkeypatch.setattr(jobs, "STATE_CACHE_SECONDS", CACHE)
    for key, value in {
        settings.ENV_DEFAULT_CRAWL_ID: CRAWL,
        settings.ENV_RULES_DIR: "",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }.items():
        monkeypatch.setenv(key, value)
    # The adapters' default connection (the environment's) finds moto through these; EmbeddedAws writes none.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with EmbeddedAws():
        aws.reset_clients()
        names = runner._create_resources(external=False)
        stack_names = aws.StackNames.from_env(names)
        for key, value in names.items():
            monkeypatch.setenv(key, value)
        try:
            aws.CrawlStore(stack_names.crawls).put(
                CrawlConfig(
                    crawl_id=CRAWL,
                    delay=DELAY,
                    user_agent=UA,
                    max_depth=3,
                    seed_hosts=frozenset({ADDRESS}),
                    allow_private=("127.0.0.0/8",),
                )
            )
            aws.Queue(stack_names.frontier_queue, "frontier").send(
                [(FrontierMessage(url=host.base_url + "/", crawl_id=CRAWL).to_json(), 0)]
            )
            svc = Services(RuleSet(), Stores.on_aws(stack_names))
            pump = runner._pump(svc.stores, local_handlers(lambda: svc), 2, names=names)
            thread = threading.Thread(target=pump.run, daemon=True)
            thread.start()
            wait_for(lambda: len(page_requests(web, ADDRESS)) >= 6)
            wiring.stop_crawl(CRAWL)
            stopped = time.monotonic()
            thread.join(60)
            assert not thread.is_alive(), f"the pump did not settle: {pump.handler_errors}"
            assert not pump.handler_errors

            before = page_requests(web, ADDRESS)
            late = [e for e in before if e.arrived > stopped + CACHE + SLACK]
            assert not late, describe(before)
            assert len(before) < PAGES + 1, "the crawl finished before it was stopped"
            assert aws.HeldStore(stack_names.parked, stack_names.crawls).held(CRAWL, 1000), "nothing held"

            sent = wiring.resume_crawl(CRAWL)
            assert sent > 0
            runner._pump(svc.stores, local_handlers(lambda: svc), 2, names=names).run()

            log = page_requests(web, ADDRESS)
            counts = Counter(e.bare_path for e in log)
            assert set(counts) == {"/", *(f"/p{i}.html" for i in range(1, PAGES + 1))}, describe(log)
            assert set(counts.values()) == {1}, describe(log)
            assert aws.HeldStore(stack_names.parked, stack_names.crawls).held(CRAWL, 10) == []
            # No task waits in a backlog (nor a held row), and the host's run ended.
            assert aws.BacklogStore(stack_names.parked).waiting() == 0
            run = aws.RunStore(stack_names.hosts).get(ADDRESS)
            assert (run.run_id, run.holder) == (None, None)
        finally:
            aws.reset_clients()
