"""A function reads its environment once, into ``HandlerSettings``; local mode maps its own into the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.lambdas.environment import HandlerSettings, services_on_aws
from crawlstack.local.services import HANDLER_LOG_LEVEL, handler_env, log_level


def stack_env() -> dict[str, str]:
    env = {var: f"table-{key}" for key, var in settings.ENV_TABLE.items()}
    env |= {var: f"https://queue/{key}" for key, var in settings.ENV_QUEUE_URL.items()}
    return env | {settings.ENV_BUCKET: "pages"}


def test_a_functions_environment_is_read_into_typed_settings() -> None:
    env = {
        **stack_env(),
        settings.ENV_RULES_DIR: "rules",
        settings.ENV_DEFAULT_DELAY: "1.5",
        settings.ENV_DEFAULT_MAX_DEPTH: "4",
        settings.ENV_USER_AGENT: "examplebot/1.0",
        settings.ENV_ALLOW_PRIVATE: "10.0.0.0/8,127.0.0.0/8",
        settings.ENV_WATCH_CHECKS_PER_DAY: "250",
    }
    read = HandlerSettings.from_env(env)
    assert read.stack is not None and read.stack.crawls == "table-crawls" and read.stack.bucket == "pages"
    assert read.rules_dir == "rules"
    defaults = read.crawl_defaults
    assert (defaults.delay, defaults.max_depth, defaults.user_agent) == (1.5, 4, "examplebot/1.0")
    assert defaults.allow_private == ("10.0.0.0/8", "127.0.0.0/8")
    assert read.checks_per_day == 250


def test_unset_or_empty_settings_are_the_defaults() -> None:
    read = HandlerSettings.from_env({settings.ENV_RULES_DIR: "", settings.ENV_WATCH_CHECKS_PER_DAY: "0"}, stack=False)
    assert read == HandlerSettings(stack=None, rules_dir=None, crawl_defaults=CrawlConfig(), checks_per_day=None)
    with pytest.raises(RuntimeError, match=settings.ENV_BUCKET):
        HandlerSettings.from_env({k: v for k, v in stack_env().items() if k != settings.ENV_BUCKET})


def test_the_services_keep_the_settings_read_and_not_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    read = HandlerSettings.from_env({**stack_env(), settings.ENV_DEFAULT_DELAY: "7"})
    monkeypatch.setenv(settings.ENV_DEFAULT_DELAY, "9")  # changed after the read: not seen
    svc = services_on_aws(read)
    assert svc.stores.crawls.defaults.delay == 7.0  # type: ignore[attr-defined]
    assert svc.watch is not None and svc.watch.event_bus is None  # a watch table, and no bus named


def test_local_mode_maps_its_options_and_extra_env_over_the_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(settings.ENV_USER_AGENT, "from-the-shell/1.0")
    monkeypatch.setenv(settings.ENV_DEFAULT_DELAY, "3")
    monkeypatch.delenv("POWERTOOLS_LOG_LEVEL", raising=False)
    before = dict(os.environ)
    extra = {settings.ENV_DEFAULT_DELAY: "0.5", "POWERTOOLS_LOG_LEVEL": "DEBUG"}
    env = handler_env("c1", str(tmp_path), extra)
    read = HandlerSettings.from_env(env, stack=False)
    assert read.crawl_defaults.crawl_id == "c1"
    assert read.rules_dir == str(tmp_path)
    assert read.crawl_defaults.delay == 0.5  # extra_env over the shell's
    assert read.crawl_defaults.user_agent == "from-the-shell/1.0"
    assert log_level(env) == "DEBUG"
    assert log_level(handler_env("c1", None)) == HANDLER_LOG_LEVEL
    assert dict(os.environ) == before  # read, never written
