"""A crawl's settings, each declared once, and the crawl's configuration as the crawls table stores it.

Each field made with ``setting(...)`` declares one setting
(``crawlstack.config.schema`` derives the flags, the options, the stored
item, the stack's defaults, the ranges and the reference's rows from it).
Besides them: ``crawl_id``, and ``extra``, the values of settings
registered at run time.  ``seed_hosts`` holds the seeds' host names, and
``host:port`` for a seed on another port, which allows that port on that
host (``seed_port_key``); ``state`` is ``running`` or ``stopped``
(``crawlstack.jobs``).  Defaults come from ``crawlstack.settings`` and, in
Lambda, from the environment variables the settings name
(``defaults_from_env``).

A new setting: its field here, its one reader, its line (``help`` / ``doc``)
in the reference (``python scripts/settings_doc.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from crawlstack import limits, settings
from crawlstack.config.schema import (
    CAP,
    HOSTS,
    INTEGER,
    NUMBER,
    OPTIONAL_INTEGER,
    PORTS,
    SETTINGS,
    SUBSET,
    TEXT,
    TEXTS,
    declare,
    setting,
)

_ALL = ("crawl", "seed", "watch")
_CRAWLS = ("crawl", "seed")


@dataclass(frozen=True)
class CrawlConfig:
    crawl_id: str = settings.DEFAULT_CRAWL_ID
    delay: float = setting(
        settings.DEFAULT_DELAY_SECONDS,
        NUMBER,
        flag="--delay",
        metavar="SECONDS",
        bounds=(0.0, settings.MAX_CRAWL_DELAY_SECONDS),
        commands=_ALL,
        env=settings.ENV_DEFAULT_DELAY,
        stack_default=True,
        help="seconds between requests to one host when robots.txt gives no longer Crawl-delay "
        f"(default {settings.DEFAULT_DELAY_SECONDS:g})",
        doc="seconds between two requests to one host, from when the first one's response began, when "
        f"robots.txt gives no longer `Crawl-delay` (default {settings.DEFAULT_DELAY_SECONDS:g}, at most "
        f"{settings.MAX_CRAWL_DELAY_SECONDS:g}). A host gets one request at a time, even at 0",
    )
    user_agent: str = setting(
        settings.DEFAULT_USER_AGENT,
        TEXT,
        flag="--user-agent",
        metavar="STRING",
        parse=limits.user_agent_flag,
        commands=_ALL,
        env=settings.ENV_USER_AGENT,
        stack_default=True,
        help="a product token and a URL that explains the bot; robots.txt groups match the token",
        doc=f"a product token and a URL that explains the bot (default `{settings.DEFAULT_USER_AGENT}`); "
        "robots.txt groups match the token",
    )
    max_depth: int = setting(
        settings.DEFAULT_MAX_DEPTH,
        INTEGER,
        flag="--max-depth",
        metavar="N",
        # Deep enough to mean "no limit" (bench/scrapy_compare.py gives 100,000).
        bounds=(0, 10**6),
        commands=_CRAWLS,
        env=settings.ENV_DEFAULT_MAX_DEPTH,
        stack_default=True,
        help=f"follow links at most N hops from a seed (default {settings.DEFAULT_MAX_DEPTH})",
    )
    max_pages: int | None = setting(
        None,
        OPTIONAL_INTEGER,
        flag="--max-pages",
        metavar="N",
        bounds=(1, 10**9),
        commands=_CRAWLS,
        help="page budget: admit at most N pages (default: no budget)",
    )
    max_pages_per_host: int | None = setting(
        settings.DEFAULT_MAX_PAGES_PER_HOST,
        CAP,
        flag="--max-pages-per-host",
        metavar="N",
        bounds=(0, 10**9),
        commands=_CRAWLS,
        help="URLs admitted per host name, a bound on spider traps "
        f"(default {settings.DEFAULT_MAX_PAGES_PER_HOST}; 0 for no cap)",
        doc="admit at most N URLs of one host name, a bound on spider traps such as endless calendars "
        f"(default {settings.DEFAULT_MAX_PAGES_PER_HOST}; 0 for no cap)",
    )
    allow: tuple[str, ...] = setting(
        (),
        TEXTS,
        flag="--allow",
        metavar="REGEX",
        parse=limits.regex_flag,
        commands=_CRAWLS,
        help="also follow URLs matching REGEX, on any host (repeatable)",
    )
    deny: tuple[str, ...] = setting(
        (),
        TEXTS,
        flag="--deny",
        metavar="REGEX",
        parse=limits.regex_flag,
        commands=_CRAWLS,
        help="never follow URLs matching REGEX (repeatable; wins over everything)",
    )
    allow_ports: tuple[int, ...] = setting(
        (),
        PORTS,
        flag="--allow-port",
        metavar="PORT",
        parse=limits.port_flag,
        commands=_ALL,
        help="also fetch this port on any host in scope (repeatable); otherwise only 80, 443 "
        "and each seed's own port, on that seed's host, are fetched",
        doc="also fetch PORT on any host in scope (repeatable). See [Ports](#ports)",
    )
    seed_hosts: frozenset[str] = setting(frozenset(), HOSTS)
    allow_private: tuple[str, ...] = setting(
        (),
        TEXTS,
        flag="--allow-private",
        metavar="CIDR",
        parse=limits.cidr_flag,
        commands=("crawl", "watch"),
        env=settings.ENV_ALLOW_PRIVATE,
        help="let the crawler reach loopback/private/link-local addresses in CIDR (repeatable)",
        doc="let the crawler reach addresses in CIDR that are not public: loopback, private, link-local, "
        "carrier-grade NAT... (repeatable; all refused otherwise)",
    )
    rules: tuple[str, ...] | None = setting(
        None,
        SUBSET,
        flag="--rules-set",
        metavar="MAPPING",
        commands=("seed",),
        help="extract with only these mappings (repeatable; default all deployed)",
    )
    state: str = setting("running", TEXT)
    # A simulated watch's speed: simulated seconds per wall second. The host delay and
    # Crawl-delay are simulated seconds, so a host's wall gap is them over this.
    time_scale: float = setting(1.0, NUMBER, omit_default=True)
    # The values of settings registered at run time (``config.schema.register``), by name.
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def stopped(self) -> bool:
        return self.state == "stopped"

    def value(self, name: str) -> Any:
        """Setting ``name``'s value, declared or registered."""
        if name in _FIELDS:
            return getattr(self, name)
        return dict(self.extra).get(name, SETTINGS[name].default)

    def with_values(self, **values: Any) -> CrawlConfig:
        """This config with ``values`` (setting name -> value) in place."""
        extra = {k: v for k, v in values.items() if k not in _FIELDS}
        if extra:
            values = {k: v for k, v in values.items() if k in _FIELDS}
            values["extra"] = tuple(sorted((dict(self.extra) | extra).items()))
        return replace(self, **values)

    @classmethod
    def defaults_from_env(cls, env: Mapping[str, str], crawl_id: str | None = None) -> CrawlConfig:
        """The settings' defaults, from the variables of ``env`` that name them (a function's environment)."""
        given = {s.name: s.kind.from_text(env[s.env]) for s in SETTINGS.values() if s.env and s.env in env}
        return cls(crawl_id=crawl_id or env.get(settings.ENV_DEFAULT_CRAWL_ID, settings.DEFAULT_CRAWL_ID)).with_values(
            **given
        )

    def to_item(self, only: Collection[str] | None = None) -> dict[str, Any]:
        """The crawls table's item; with ``only``, of those settings alone (and ``state``): the rest follow defaults."""
        item: dict[str, Any] = {"crawl_id": self.crawl_id}
        extra = dict(self.extra)
        for s in SETTINGS.values():
            if s.stored and (only is None or s.name in only or s.name == "state"):
                value = s.to_item(getattr(self, s.name) if s.name in _FIELDS else extra.get(s.name, s.default))
                if value is not None:
                    item[s.name] = value
        return item

    @classmethod
    def from_item(cls, item: dict[str, Any], defaults: CrawlConfig) -> CrawlConfig:
        """The config ``item`` stores; a setting it lacks is ``defaults``'."""
        given = {s.name: s.kind.load(value) for s in SETTINGS.values() if (value := item.get(s.name)) is not None}
        return defaults.with_values(crawl_id=str(item.get("crawl_id", defaults.crawl_id)), **given)

    def port_allowed(self, host: str, port: int) -> bool:
        """Whether the crawl may fetch ``host`` on ``port``: a default port, an allowed one, or a seed's."""
        return (
            port in settings.DEFAULT_PORTS or port in self.allow_ports or seed_port_key(host, port) in self.seed_hosts
        )

    def host_delay(self, robots_crawl_delay: float | None) -> float:
        """Wall seconds between two requests to a host: max(crawl delay, robots Crawl-delay), over ``time_scale``."""
        return max(self.delay, robots_crawl_delay or 0.0) / self.time_scale


declare(CrawlConfig)
_FIELDS = frozenset(f.name for f in fields(CrawlConfig))


def seed_port_key(host: str, port: int) -> str:
    """How ``seed_hosts`` records a seed on a non-default port: ``host:port``, ``[v6]:port``.

    A host name never holds a colon and an IPv6 address never starts with
    ``[``, so these entries never match a bare host.
    """
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
