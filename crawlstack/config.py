"""A crawl's configuration, as stored in the crawls table.

Settings (per crawl): ``delay`` (seconds between requests to one host when
robots.txt gives no longer Crawl-delay), ``user_agent``, ``max_depth``,
``max_pages`` (page budget, None for none), ``max_pages_per_host`` (URLs
admitted per host name, None for no cap; ``settings.DEFAULT_MAX_PAGES_PER_HOST``),
``allow`` / ``deny`` (URL regexes), ``allow_ports`` (ports fetched besides
``settings.DEFAULT_PORTS``), ``seed_hosts`` (the seeds' host names, and
``host:port`` for a seed on another port, which allows that port on that host:
``seed_port_key``), ``allow_private`` (CIDRs the address guard lets
through), ``rules`` (the names of the mappings this crawl uses; None for all of
them) and ``state`` (``running`` or ``stopped``: ``crawlstack.jobs``).
Defaults come from ``crawlstack.settings`` and, in Lambda, from the
``CRAWLSTACK_DEFAULT_*`` environment variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from crawlstack import settings


@dataclass(frozen=True)
class CrawlConfig:
    crawl_id: str = settings.DEFAULT_CRAWL_ID
    delay: float = settings.DEFAULT_DELAY_SECONDS
    user_agent: str = settings.DEFAULT_USER_AGENT
    max_depth: int = settings.DEFAULT_MAX_DEPTH
    max_pages: int | None = None
    max_pages_per_host: int | None = settings.DEFAULT_MAX_PAGES_PER_HOST
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    allow_ports: tuple[int, ...] = ()
    seed_hosts: frozenset[str] = field(default_factory=frozenset)
    allow_private: tuple[str, ...] = ()
    rules: tuple[str, ...] | None = None
    state: str = "running"
    # A simulated watch's speed: simulated seconds per wall second. The host delay and
    # Crawl-delay are simulated seconds, so a host's wall gap is them over this.
    time_scale: float = 1.0

    @property
    def stopped(self) -> bool:
        return self.state == "stopped"

    @classmethod
    def defaults_from_env(cls, crawl_id: str | None = None) -> CrawlConfig:
        env = os.environ
        allow_private = tuple(c for c in env.get(settings.ENV_ALLOW_PRIVATE, "").split(",") if c.strip())
        return cls(
            crawl_id=crawl_id or env.get(settings.ENV_DEFAULT_CRAWL_ID, settings.DEFAULT_CRAWL_ID),
            delay=float(env.get(settings.ENV_DEFAULT_DELAY, settings.DEFAULT_DELAY_SECONDS)),
            user_agent=env.get(settings.ENV_USER_AGENT, settings.DEFAULT_USER_AGENT),
            max_depth=int(env.get(settings.ENV_DEFAULT_MAX_DEPTH, settings.DEFAULT_MAX_DEPTH)),
            allow_private=allow_private,
        )

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "crawl_id": self.crawl_id,
            "delay": Decimal(str(self.delay)),
            "user_agent": self.user_agent,
            "max_depth": self.max_depth,
            "state": self.state,
        }
        if self.rules is not None:
            # A list, not a set: an empty subset (no mapping at all) is a valid choice.
            item["rules"] = list(self.rules)
        if self.max_pages is not None:
            item["max_pages"] = self.max_pages
        # 0 stands for "no cap": an absent attribute means the default cap.
        item["max_pages_per_host"] = self.max_pages_per_host or 0
        if self.allow_ports:
            item["allow_ports"] = [int(p) for p in self.allow_ports]
        # DynamoDB refuses empty sets and lists are fine empty; keep both small.
        for name in ("allow", "deny", "allow_private"):
            if getattr(self, name):
                item[name] = list(getattr(self, name))
        if self.seed_hosts:
            item["seed_hosts"] = set(self.seed_hosts)
        if self.time_scale != 1.0:
            item["time_scale"] = Decimal(str(self.time_scale))
        return item

    @classmethod
    def from_item(cls, item: dict[str, Any], defaults: CrawlConfig) -> CrawlConfig:
        def get(name: str, default: Any) -> Any:
            value = item.get(name)
            return default if value is None else value

        max_pages = item.get("max_pages")
        per_host = item.get("max_pages_per_host")
        rules = item.get("rules")
        return replace(
            defaults,
            crawl_id=str(item.get("crawl_id", defaults.crawl_id)),
            delay=float(get("delay", defaults.delay)),
            user_agent=str(get("user_agent", defaults.user_agent)),
            max_depth=int(get("max_depth", defaults.max_depth)),
            max_pages=int(max_pages) if max_pages is not None else defaults.max_pages,
            max_pages_per_host=(int(per_host) or None) if per_host is not None else defaults.max_pages_per_host,
            allow=tuple(get("allow", defaults.allow)),
            deny=tuple(get("deny", defaults.deny)),
            allow_ports=tuple(int(p) for p in get("allow_ports", defaults.allow_ports)),
            seed_hosts=frozenset(get("seed_hosts", set())) | defaults.seed_hosts,
            allow_private=tuple(get("allow_private", defaults.allow_private)),
            rules=tuple(str(r) for r in rules) if rules is not None else defaults.rules,
            state=str(get("state", defaults.state)),
            time_scale=float(get("time_scale", defaults.time_scale)),
        )

    def port_allowed(self, host: str, port: int) -> bool:
        """Whether the crawl may fetch ``host`` on ``port``: a default port, an allowed one, or a seed's."""
        return (
            port in settings.DEFAULT_PORTS or port in self.allow_ports or seed_port_key(host, port) in self.seed_hosts
        )

    def host_delay(self, robots_crawl_delay: float | None) -> float:
        """Wall seconds between two requests to a host: max(crawl delay, robots Crawl-delay), over ``time_scale``."""
        return max(self.delay, robots_crawl_delay or 0.0) / self.time_scale


def seed_port_key(host: str, port: int) -> str:
    """How ``seed_hosts`` records a seed on a non-default port: ``host:port``, ``[v6]:port``.

    A host name never holds a colon and an IPv6 address never starts with
    ``[``, so these entries never match a bare host.
    """
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
