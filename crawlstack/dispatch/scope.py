"""Scope: a stopped crawl's messages held, seed hosts registered, then scope, ports and trap shapes.

In order:

* a message of a stopped crawl (``crawlstack.jobs``) is held for ``resume``
  to send back; it takes no claim (the hold is conditional on the crawl
  being stopped in the table, so a stale cached state costs one failed
  write and nothing else);
* a depth-0 message registers its host as a seed host, and an original seed
  (not a redirect) on a port other than 80 and 443 registers ``host:port``,
  which allows that port on that host;
* scope (``crawlstack.scope.out_of_scope``): seed hosts, mapping patterns,
  allow/deny, depth; then ports and trap-shaped URLs (``scope.refusal``), a
  seed being taken as the user wrote it, whatever its shape.  A URL out of
  scope or refused is dropped and noted (``DropNotes``).

The crawl's config as read here goes on with the link (``Link.config``).

Settings: ``settings.DEFAULT_PORTS``; the crawl's ``seed_hosts``,
``allow``, ``deny``, ``max_depth``, ``allow_ports``, ``state``; the rules'
mappings; those of ``DropNotes``.
"""

from __future__ import annotations

from crawlstack import settings
from crawlstack.config import CrawlConfig, seed_port_key
from crawlstack.dispatch.drops import DropNotes
from crawlstack.dispatch.link import Decision, Link
from crawlstack.dispatch.outbox import Outbox
from crawlstack.jobs import Held, hold_message
from crawlstack.ports import Crawls
from crawlstack.rules import RuleSet
from crawlstack.scope import out_of_scope, refusal
from crawlstack.urls import url_port


class Scope:
    def __init__(self, crawls: Crawls, rules: RuleSet, drops: DropNotes, held: Held | None = None) -> None:
        self.crawls = crawls
        self.rules = rules
        self.drops = drops
        self.held = held

    def __call__(self, link: Link, outbox: Outbox) -> Decision | None:
        msg, url, host = link.msg, link.url, link.host
        config = self.crawls.get(msg.crawl_id)
        if config.stopped and self.held is not None and hold_message(self.held, msg):
            return Decision(url, "held", "crawl stopped")
        config = self._register_seed(link, config)
        reason, refused = self._check(link, config)
        if (reason and host not in config.seed_hosts) or (refused and not refused.startswith("trap:")):
            # A seed (or a seed's port) may have been added since the config was cached.
            fresh = self.crawls.get(msg.crawl_id, max_age=1.0)
            if fresh is not config:
                config = fresh
                reason, refused = self._check(link, config)
        link.config = config
        if reason:
            return self.drops.drop(link, reason, "scope")
        if refused and not (refused.startswith("trap:") and msg.depth == 0 and msg.hops == 0):
            # A seed is taken as the user wrote it, whatever its shape.
            return self.drops.drop(link, refused, "trap" if refused.startswith("trap:") else "port")
        return None

    def _check(self, link: Link, config: CrawlConfig) -> tuple[str | None, str | None]:
        """Why the link is out of scope, else why its port or shape is refused (or None, None)."""
        msg = link.msg
        reason = out_of_scope(link.url, msg.depth, config, self.rules, chosen_by_rule=bool(msg.via), wants=msg.want)
        return reason, None if reason else refusal(link.url, config)

    def _register_seed(self, link: Link, config: CrawlConfig) -> CrawlConfig:
        """A depth-0 message makes its host a seed host; an original seed on another port allows that port there.

        A seed's redirect (hops > 0) adds its host, as before, but not its
        port: a redirect to another port needs ``allow_ports``.
        """
        msg, host = link.msg, link.host
        if msg.depth != 0:
            return config
        added = False
        if host not in config.seed_hosts:
            self.crawls.add_seed_host(msg.crawl_id, host)
            added = True
        port = url_port(link.url)
        if msg.hops == 0 and port not in settings.DEFAULT_PORTS:
            key = seed_port_key(host, port)
            if key not in config.seed_hosts:
                self.crawls.add_seed_host(msg.crawl_id, key)
                added = True
        return self.crawls.get(msg.crawl_id, max_age=0) if added else config
