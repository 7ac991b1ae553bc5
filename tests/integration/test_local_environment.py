"""A local crawl gives its handlers their settings explicitly: ``os.environ`` is the same before, during and after.

``LocalOptions.extra_env`` still reaches the handlers as the stack's
variables would (``crawlstack.local.services.handler_env``): here the
address guard's default CIDRs, without which no loopback page is fetched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from webs import UA, page_requests, star_site

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.demo.server import LoopbackWeb
from crawlstack.local import runner
from crawlstack.local.options import LocalOptions, Seed
from crawlstack.local.pump import EventPump, Source

A = "127.0.0.2"


def test_a_local_crawl_writes_no_variable_and_takes_extra_env_as_its_handlers_settings(
    tmp_path: Path, web: LoopbackWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    web.add_host(A, star_site(2))
    monkeypatch.delenv(settings.ENV_ALLOW_PRIVATE, raising=False)
    before = dict(os.environ)
    unchanged: list[bool] = []
    real_invoke = EventPump._invoke

    def invoke(self: EventPump, source: Source, messages: list[dict[str, Any]]) -> None:
        unchanged.append(dict(os.environ) == before)  # as each batch is handed to a handler
        real_invoke(self, source, messages)

    monkeypatch.setattr(EventPump, "_invoke", invoke)
    options = LocalOptions(
        rules_dir=None,
        out_dir=str(tmp_path / "out"),
        config=CrawlConfig(delay=0.0, user_agent=UA),
        progress=False,
        # No --allow-private: the crawl's item has none, so the handlers' default applies.
        extra_env={settings.ENV_ALLOW_PRIVATE: "127.0.0.0/8"},
    )
    summary = runner.crawl_local([Seed(web.url(A, "/"))], options)

    assert unchanged and all(unchanged)
    assert dict(os.environ) == before
    assert sorted(e.bare_path for e in page_requests(web, A)) == ["/", "/p1.html", "/p2.html"]
    assert summary["interrupted"] is False
