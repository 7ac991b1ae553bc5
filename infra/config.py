"""Deployment settings read from CDK context (``cdk.json`` or ``-c key=value``).

The crawl settings the stack sets a default for are the schema's
(``crawlstack.config.schema``, ``Setting.stack_default``): each is read from
context ``crawlstack:<name>``, checked as its flag is, and given to every
function as its environment variable (``StackConfig.crawl_environment``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constructs import Node

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.config.schema import SETTINGS, Setting


def stack_defaults() -> list[Setting]:
    """The crawl settings the stack sets a default for, in order."""
    return [s for s in SETTINGS.values() if s.stack_default and s.env]


# Tests and docs name these three.
CTX_DELAY = SETTINGS["delay"].context_key
CTX_USER_AGENT = SETTINGS["user_agent"].context_key
CTX_MAX_DEPTH = SETTINGS["max_depth"].context_key
CTX_FETCH_CONCURRENCY = "crawlstack:fetch_concurrency"
CTX_PAGE_RETENTION_DAYS = "crawlstack:page_retention_days"
CTX_RETAIN_DATA = "crawlstack:retain_data"
CTX_LAMBDA_BUILD_DIR = "crawlstack:lambda_build_dir"
CTX_LOG_RETENTION_DAYS = "crawlstack:log_retention_days"
CTX_ALARM_EMAIL = "crawlstack:alarm_email"
# Checks a day for all watched sources together (the schedule function's budget); 0: no budget.
CTX_WATCH_CHECKS_PER_DAY = "crawlstack:watch_checks_per_day"
# One memory size per function: crawlstack:dispatch_memory_mb and so on.
CTX_MEMORY_MB = {key: f"crawlstack:{key}_memory_mb" for key in settings.FUNCTIONS}

DEFAULT_FETCH_CONCURRENCY = 10
DEFAULT_PAGE_RETENTION_DAYS = 30
# Limits of an SQS event source's maximum concurrency.
MIN_FETCH_CONCURRENCY = 2
MAX_FETCH_CONCURRENCY = 1000
DEFAULT_LOG_RETENTION_DAYS = 30
# The values CloudWatch Logs accepts for a log group's retention.
LOG_RETENTION_CHOICES = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
# Lambda's memory limits.
MIN_MEMORY_MB = 128
MAX_MEMORY_MB = 10240


class ConfigError(ValueError):
    """A context value is missing or invalid."""


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"context {key}={value!r}: expected true or false")


def _number(key: str, value: Any, kind: type[int] | type[float], low: float, high: float | None = None) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key}={value!r}: expected a number") from None
    if number < low or (high is not None and number > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"context {key}={value!r}: must be {bounds}")
    return number


def _email(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if "@" not in text or " " in text:
        raise ConfigError(f"context {CTX_ALARM_EMAIL}={value!r}: expected an email address")
    return text


def _log_retention(value: Any) -> int:
    days = _number(CTX_LOG_RETENTION_DAYS, value, int, 1)
    if days not in LOG_RETENTION_CHOICES:
        raise ConfigError(f"context {CTX_LOG_RETENTION_DAYS}={value!r}: must be one of {LOG_RETENTION_CHOICES}")
    return int(days)


def _crawl_default(setting: Setting, value: Any) -> Any:
    """A context value of a crawl setting, checked as its flag is."""
    try:
        return setting.kind.given(setting.flag_type()(str(value).strip()))
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"context {setting.context_key}={value!r}: {exc}") from None


@dataclass(frozen=True)
class StackConfig:
    """Crawl defaults and sizing of one deployment."""

    # The stack's crawl defaults (``stack_defaults``), setting name -> value.
    crawl_defaults: Mapping[str, Any] = field(default_factory=lambda: {s.name: s.default for s in stack_defaults()})
    fetch_concurrency: int = DEFAULT_FETCH_CONCURRENCY
    page_retention_days: int = DEFAULT_PAGE_RETENTION_DAYS
    # Keep the bucket and tables when the stack is deleted.
    retain_data: bool = True
    log_retention_days: int = DEFAULT_LOG_RETENTION_DAYS
    # Subscribed to the alarm topic when set.
    alarm_email: str | None = None
    # Function key -> MB; a function left out keeps settings.FUNCTIONS' size.
    memory_mb: dict[str, int] = field(default_factory=dict)
    # Checks a day for all watched sources together; 0: no budget.
    watch_checks_per_day: int = 0

    def memory_of(self, key: str) -> int:
        return self.memory_mb.get(key, settings.FUNCTIONS[key].memory_mb)

    def crawl_environment(self) -> dict[str, str]:
        """The functions' environment variables of the crawl defaults (``CrawlConfig.defaults_from_env`` reads them)."""
        config = CrawlConfig().with_values(**self.crawl_defaults)
        return {s.env: s.kind.to_text(config.value(s.name)) for s in stack_defaults() if s.env}

    @classmethod
    def from_context(cls, node: Node) -> StackConfig:
        def get(key: str, default: Any) -> Any:
            value = node.try_get_context(key)
            return default if value is None or value == "" else value

        crawl_defaults = {}
        for s in stack_defaults():
            value = get(s.context_key, None)
            crawl_defaults[s.name] = s.default if value is None else _crawl_default(s, value)
        return cls(
            crawl_defaults=crawl_defaults,
            fetch_concurrency=_number(
                CTX_FETCH_CONCURRENCY,
                get(CTX_FETCH_CONCURRENCY, DEFAULT_FETCH_CONCURRENCY),
                int,
                MIN_FETCH_CONCURRENCY,
                MAX_FETCH_CONCURRENCY,
            ),
            page_retention_days=_number(
                CTX_PAGE_RETENTION_DAYS, get(CTX_PAGE_RETENTION_DAYS, DEFAULT_PAGE_RETENTION_DAYS), int, 1
            ),
            retain_data=_bool(CTX_RETAIN_DATA, get(CTX_RETAIN_DATA, True)),
            alarm_email=_email(get(CTX_ALARM_EMAIL, None)),
            log_retention_days=_log_retention(get(CTX_LOG_RETENTION_DAYS, DEFAULT_LOG_RETENTION_DAYS)),
            watch_checks_per_day=_number(CTX_WATCH_CHECKS_PER_DAY, get(CTX_WATCH_CHECKS_PER_DAY, 0), int, 0),
            memory_mb={
                key: _number(
                    CTX_MEMORY_MB[key], get(CTX_MEMORY_MB[key], spec.memory_mb), int, MIN_MEMORY_MB, MAX_MEMORY_MB
                )
                for key, spec in settings.FUNCTIONS.items()
            },
        )


@dataclass(frozen=True)
class LambdaAssets:
    """Where the Lambda code and the dependency layer come from.

    ``scripts/build_lambda.py`` writes ``<build dir>/code`` and
    ``<build dir>/layer``.  Tests pass a small code directory and no layer.
    """

    code_dir: Path
    layer_dir: Path | None = None

    @classmethod
    def from_build_dir(cls, build_dir: Path) -> LambdaAssets:
        code, layer = build_dir / "code", build_dir / "layer"
        missing = [str(p) for p in (code, layer) if not p.is_dir()]
        if missing:
            raise ConfigError(
                f"Lambda build output missing ({', '.join(missing)}): run `make build-lambda` "
                "(python scripts/build_lambda.py) first"
            )
        return cls(code_dir=code, layer_dir=layer)
