"""What a function reads from the environment the stack sets (``infra.functions``): once, into ``HandlerSettings``.

Settings (``settings.ENV_*``): the stack's names (``aws.StackNames``), the
rules directory (``CRAWLSTACK_RULES_DIR``, compiled as the services are
built, so an invalid rule fails the container at once with its one-line
reason, not page by page), a crawl's defaults (``CRAWLSTACK_DEFAULT_*``,
``CrawlConfig.defaults_from_env``) and the watch's day budget of checks
(``CRAWLSTACK_WATCH_CHECKS_PER_DAY``, the schedule function's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from crawlstack import aws, settings
from crawlstack.config import CrawlConfig
from crawlstack.rules import RuleSet, load_rules
from crawlstack.wiring import Services, Stores, watch_on_aws


@dataclass(frozen=True)
class HandlerSettings:
    """A function's settings; ``stack`` None where local mode brings its own stores."""

    stack: aws.StackNames | None = None
    rules_dir: str | None = None
    crawl_defaults: CrawlConfig = field(default_factory=CrawlConfig)
    # A day's budget of checks for all sources (None: no budget).
    checks_per_day: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], stack: bool = True) -> HandlerSettings:
        """Read ``env`` once; ``stack``: the stack's names too (RuntimeError naming the first missing)."""
        return cls(
            stack=aws.StackNames.from_env(env) if stack else None,
            rules_dir=env.get(settings.ENV_RULES_DIR) or None,
            crawl_defaults=CrawlConfig.defaults_from_env(env=env),
            checks_per_day=int(env.get(settings.ENV_WATCH_CHECKS_PER_DAY) or 0) or None,
        )

    def rules(self) -> RuleSet:
        """The rules directory's mappings, compiled (RulesInvalid, with each error, if one is not valid)."""
        return load_rules(self.rules_dir) if self.rules_dir else RuleSet()


def services_on_aws(handler_settings: HandlerSettings, connection: aws.Connection = aws.ENVIRONMENT) -> Services:
    """A Lambda container's services: the stack's adapters (through ``connection``), its rules, and its watch."""
    names = handler_settings.stack
    if names is None:
        raise ValueError("services on AWS need the stack's names")
    return Services(
        handler_settings.rules(),
        Stores.on_aws(names, handler_settings.crawl_defaults, connection),
        watch=watch_on_aws(names, connection),
    )
