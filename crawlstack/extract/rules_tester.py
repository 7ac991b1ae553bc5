"""``crawlstack rules test``: run the mapping that matches a URL on one page, and show what the crawler would do.

The page is a saved file, or fetched once, politely: robots.txt first (the
same RFC 9309 policy as the crawler), then at least ``delay`` seconds (or the
robots.txt Crawl-delay, if longer) before the page itself, with the crawler's
user agent, body cap, timeouts and address guard.  Redirects are followed,
at most ``fetch_outcomes.MAX_REDIRECT_HOPS``, each hop checked the same way,
and by the crawl's port policy: ports 80 and 443, the first URL's own
port on its own host, and ``allow_ports`` (``--allow-port``); robots.txt
redirects as a crawl follows them (``robots.redirect_refusal``).

The result is ``{"mapping", "fields", "links"}`` plus where the page came
from (``url``, ``status``, ``content_type``): ``links`` are the absolute URLs
the crawler would follow from that page, as if it were a seed (scope and the
mapping's url_parsers applied; robots.txt and dedupe are checked later, per
link, when the crawl runs).
"""

from __future__ import annotations

import mimetypes
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from crawlstack import settings
from crawlstack.config import CrawlConfig, seed_port_key
from crawlstack.extract import page_links
from crawlstack.fetch import http
from crawlstack.fetch.headers import normalized_content_type, parse_location
from crawlstack.fetch.outcomes import MAX_REDIRECT_HOPS
from crawlstack.fetch.robots_txt import RobotsPolicy, redirect_refusal
from crawlstack.ports import RobotsRecord
from crawlstack.rules import Page, RuleSet
from crawlstack.scope import out_of_scope
from crawlstack.urls import InvalidURL, canonicalize, host_of, origin_of, url_port


class TesterError(Exception):
    """Why the page could not be tested, in one line."""


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int | None
    content_type: str
    body: bytes


def guess_content_type(path: str) -> str | None:
    """A saved page's type from its file name: ``.json`` -> application/json, and so on."""
    guessed, _ = mimetypes.guess_type(path)
    if guessed is None and path.endswith((".htm", ".html")):
        return "text/html"
    return guessed


def run_rules(rules: RuleSet, url: str, body: bytes, content_type: str | None) -> dict[str, Any]:
    """Apply the matching mapping to one page: mapping name, fields (and items, for a listing), its links, notes."""
    page = Page(url, body, content_type)
    mapping = rules.match(url, content_type)
    config = CrawlConfig(seed_hosts=frozenset({host_of(url)}))
    chosen = mapping is not None and bool(mapping.url_parsers)
    links = [link for link in page_links(page, mapping) if not out_of_scope(link, 1, config, rules, chosen)]
    found: dict[str, Any] = {"mapping": mapping.name if mapping is not None else None}
    if mapping is not None and mapping.items is not None:
        # A listing: every item's fields; "fields" is the first item's, as a crawl's first record.
        items = mapping.extract_items(page)
        found["fields"] = items[0] if items else None
        found["items"] = items
    else:
        found["fields"] = mapping.extract(page) if mapping is not None else None
    found["links"] = links
    if page.notes:  # what the page's crawl-log line would say of its values: a cut, a cap
        found["notes"] = list(page.notes)
    return found


class PoliteFetcher:
    """Fetches pages one at a time, obeying robots.txt and a per-host delay."""

    def __init__(
        self,
        user_agent: str = settings.DEFAULT_USER_AGENT,
        delay: float = 1.0,
        allow_private: tuple[str, ...] = (),
        sleep: Callable[[float], None] = time.sleep,
        allow_ports: tuple[int, ...] = (),
    ) -> None:
        self.user_agent = user_agent
        self.delay = delay
        self.guard = http.AddressGuard(allow_private)
        self.allow_ports = allow_ports
        self.sleep = sleep
        self._robots: dict[str, RobotsPolicy] = {}
        self._last_request: dict[str, float] = {}

    def _wait_for(self, origin: str, delay: float) -> None:
        last = self._last_request.get(origin)
        if last is not None:
            remaining = last + delay - time.monotonic()
            if remaining > 0:
                self.sleep(remaining)
        self._last_request[origin] = time.monotonic()

    def _policy(self, origin: str, ports: CrawlConfig) -> RobotsPolicy:
        if origin not in self._robots:
            self._wait_for(origin, self.delay)
            got = http.fetch_robots(origin, self.user_agent, self.guard, lambda url: redirect_refusal(url, ports))
            self._robots[origin] = RobotsPolicy(RobotsRecord.from_fetch(origin, got.status, got.body, got.error))
        return self._robots[origin]

    def get(self, url: str) -> Fetched:
        ports: CrawlConfig | None = None
        for _ in range(MAX_REDIRECT_HOPS + 1):
            try:
                url = canonicalize(url)
            except InvalidURL as exc:
                raise TesterError(f"invalid URL {url!r}: {exc}") from exc
            host, port = host_of(url), url_port(url)
            if ports is None:
                # As a crawl seeded with this URL: its own port on its own host, 80, 443 and --allow-port.
                seeds = frozenset({host, seed_port_key(host, port)})
                ports = CrawlConfig(seed_hosts=seeds, allow_ports=self.allow_ports)
            elif not ports.port_allowed(host, port):
                raise TesterError(f"{url}: port {port} is not allowed (--allow-port {port} follows it)")
            origin = origin_of(url)
            policy = self._policy(origin, ports)
            if not policy.allows(url, self.user_agent):
                raise TesterError(f"{url}: {policy.disallow_reason()}")
            self._wait_for(origin, max(self.delay, policy.crawl_delay(self.user_agent) or 0.0))
            result = http.fetch(url, self.user_agent, self.guard)
            if result.status is None:
                raise TesterError(f"{url}: {result.error or 'no response'}")
            location = parse_location(result.header("location"))
            if result.status in (301, 302, 303, 307, 308) and location:
                try:
                    url = urljoin(url, location)
                except ValueError as exc:  # e.g. a broken IPv6 literal
                    raise TesterError(f"{url}: redirect to an unusable Location {location[:200]!r}") from exc
                continue
            if not 200 <= result.status < 300:
                raise TesterError(f"{url}: HTTP {result.status} {result.reason}".rstrip())
            if result.content_type and not http.is_text_type(result.content_type):
                raise TesterError(f"{url}: content-type {result.content_type} is not text")
            if result.binary:
                raise TesterError(f"{url}: binary body claiming to be {result.content_type or 'text'}")
            if result.corrupt:
                raise TesterError(f"{url}: {result.error}")
            # The Content-Type as extract sees it from the WARC (crawlstack.fetch.warc).
            return Fetched(url, result.status, normalized_content_type(result.header("content-type")), result.body)
        raise TesterError(f"{url}: more than {MAX_REDIRECT_HOPS} redirects")
