"""A frontier message on its way through dispatch, and what became of it.

``Link`` works out its canonical URL, fingerprint and host once, when first
asked (the handler's log correlation id, or ``Canonicalise``), and carries
them, with what the chain learns on the way (the crawl's config, the
origin's robots.txt), to the last component.

A message that says its URL is canonical (``FrontierMessage.canonical``:
extract's links, made by ``crawlstack.urls.resolve_link``) is not
canonicalised again once its URL passes ``urls.looks_canonical``, a cheap
check of its shape; one that fails it, or says nothing (a user's seed, a
redirect target), is canonicalised here.  No fingerprint travels in a
message: it is the hash of the URL, recomputed here, so a message cannot
carry one that disagrees with its URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from crawlstack.config import CrawlConfig
from crawlstack.fetch.robots_txt import RobotsPolicy
from crawlstack.messages import FrontierMessage
from crawlstack.ports import Claim
from crawlstack.urls import InvalidURL, canonicalize, fingerprint, host_of, looks_canonical


@dataclass
class Decision:
    """What became of one message, for logs and metrics."""

    url: str
    action: str  # queued | parked | dropped | skipped | deduped | retry | held
    reason: str = ""
    # Why a URL was dropped or skipped, as a class for metrics:
    # invalid | scope | port | trap | host-cap | budget | robots | record-complete.
    kind: str = ""


@dataclass(eq=False)
class Prefetched:
    """What a batch's read found of one URL (``Dedupe.prepare``): for whichever of its links goes first."""

    claim: Claim | None
    used: bool = False

    def take(self) -> tuple[bool, Claim | None]:
        """(True, the claim read) the first time; (False, None) after: a later link reads afresh."""
        if self.used:
            return False, None
        self.used = True
        return True, self.claim


@dataclass(eq=False)
class Link:
    msg: FrontierMessage
    message_id: str = ""
    # Set by Scope: the crawl's config as scope last read it.
    config: CrawlConfig | None = None
    # Set by Robots.load: the origin's robots.txt.
    policy: RobotsPolicy | None = None
    # Set by Dedupe.prepare: what the batch's one read found of the URL, shared by the batch's links to it.
    prefetched: Prefetched | None = None

    @classmethod
    def of(cls, msg: FrontierMessage | Link, message_id: str = "") -> Link:
        return msg if isinstance(msg, Link) else cls(msg, message_id)

    @cached_property
    def _canonical(self) -> tuple[str, InvalidURL | None]:
        url = self.msg.url
        if self.msg.canonical and looks_canonical(url):
            return url, None
        try:
            return canonicalize(url), None
        except InvalidURL as exc:
            return url, exc

    @property
    def url(self) -> str:
        """The canonical URL; the URL as sent when it has none (``invalid``)."""
        return self._canonical[0]

    @property
    def invalid(self) -> InvalidURL | None:
        """Why the URL cannot be crawled, or None."""
        return self._canonical[1]

    @cached_property
    def fp(self) -> str:
        """The urls table's key: the fingerprint of ``url``."""
        if self.msg.check is not None:
            # A re-check is no duplicate: each check of a source claims its own key.
            return fingerprint(f"{self.url}\ncheck {self.msg.check.key}")
        return fingerprint(self.url)

    @cached_property
    def host(self) -> str:
        return host_of(self.url)

    @property
    def correlation_id(self) -> str | None:
        """The fingerprint that ties the URL's log lines together across functions; None for an invalid URL."""
        return None if self.invalid is not None else self.fp

    @property
    def crawl(self) -> CrawlConfig:
        """The crawl's config, once Scope has read it."""
        assert self.config is not None, "Scope runs before the components that read the crawl's config"
        return self.config
