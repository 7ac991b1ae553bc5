"""A page's outlinks: the links it gives, those in scope, and the frontier messages they become.

Outlinks go to the frontier at depth + 1: from a mapped page whose mapping
has ``url_parsers``, the links those return; from any other page, every link
on it that is in scope, unless this container sent it already at that depth
or less (``SentLinks``; dispatch's dedupe stays the final word).  Pages with
``<meta name="robots" content="nofollow">`` give no links.

Hrefs not followed are counted per WARC by class (``SkippedLinks``: the
``InvalidURL`` kinds, such as ``scheme`` for ``javascript:``/``mailto:``/
``data:``/``tel:``, ``percent-escape``, ``ipv6``, ``port``, ``too-long``; and
``off-site`` and ``deny`` for links out of scope, ``over-page-cap`` for
in-scope links past ``settings.MAX_OUTLINKS_PER_PAGE``), with the first
``settings.SKIPPED_LINK_SAMPLE`` hrefs and their reasons kept as examples, so
the handler logs one line per WARC however large its pages.  Ports and
trap-shaped URLs (``scope.refusal``) are left to dispatch, which notes each in
the crawl log; so are the first ``settings.INVALID_LINKS_FORWARDED_PER_PAGE``
malformed hrefs of a page (each once per container), which dispatch drops
with their reasons ("invalid URL: scheme 'javascript' is not http or https").

Settings: ``MAX_HREFS_PER_PAGE``, ``MAX_OUTLINKS_PER_PAGE``,
``INVALID_LINKS_FORWARDED_PER_PAGE``, ``MAX_URL_LENGTH``,
``SKIPPED_LINK_SAMPLE``, ``OUTLINK_CACHE_SIZE``.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.messages import FrontierMessage
from crawlstack.records.resolution import CompletedRecords
from crawlstack.rules import Mapping, Page, RuleSet, budget
from crawlstack.scope import out_of_scope
from crawlstack.urls import InvalidURL, resolve_link

# How much of a skipped href a log example keeps.
_SAMPLE_HREF_CHARS = 200


@dataclass
class SkippedLinks:
    """Hrefs not followed: a count per class and the first few as examples (href, reason)."""

    counts: Counter[str] = field(default_factory=Counter)
    sample: list[tuple[str, str]] = field(default_factory=list)
    sample_size: int = settings.SKIPPED_LINK_SAMPLE

    def add(self, kind: str, href: str, reason: str) -> None:
        self.counts[kind] += 1
        if len(self.sample) < self.sample_size:
            cut = href if len(href) <= _SAMPLE_HREF_CHARS else href[: _SAMPLE_HREF_CHARS - 1] + "…"
            self.sample.append((cut, reason))

    def __bool__(self) -> bool:
        return bool(self.counts)

    def merge(self, other: SkippedLinks) -> None:
        self.counts.update(other.counts)
        self.sample.extend(other.sample[: max(0, self.sample_size - len(self.sample))])


def _scope_kind(reason: str) -> str:
    return "deny" if "deny" in reason else "off-site"


def page_links(
    page: Page, mapping: Mapping | None, skipped: SkippedLinks | None = None, invalid: dict[str, None] | None = None
) -> list[str]:
    """Absolute canonical links the crawler would follow from ``page`` (before scope).

    A mapping with url_parsers chooses them (on HTML, XML or JSON pages);
    otherwise every followable link of an HTML page, and the hrefs that are
    no URL the crawler can fetch go to ``skipped`` with their reasons, and
    the page's first few (absolute where they can be made so) to ``invalid``.
    ``<meta name="robots" content="nofollow">`` gives none either way.
    """
    if "nofollow" in page.meta_robots or "none" in page.meta_robots:
        return []
    if mapping is not None and mapping.url_parsers:
        return mapping.links(page)
    seen: dict[str, None] = {}
    for href in page.hrefs(settings.MAX_HREFS_PER_PAGE):
        budget.check()
        try:
            seen.setdefault(resolve_link(page.base_url, href))
        except InvalidURL as exc:
            if skipped is not None:
                skipped.add(exc.kind, href, str(exc))
            if invalid is not None and len(invalid) < settings.INVALID_LINKS_FORWARDED_PER_PAGE and href.strip():
                invalid.setdefault(_joined(page.base_url, href))
    return list(seen)


def _joined(base_url: str, href: str) -> str:
    """``href`` made absolute where it can be, and bounded (an SQS message holds 256 KiB)."""
    try:
        joined = urljoin(base_url, href.strip())
    except ValueError:
        joined = href.strip()
    return joined[: settings.MAX_URL_LENGTH + 1]


class SentLinks:
    """A bounded, least-recently-used memory of outlinks already sent, with the smallest depth each went at.

    A link found again at a smaller depth is sent again, so dispatch can give
    its URL that depth (``crawlstack.dispatch.dedupe``); deeper copies are not.
    """

    def __init__(self, size: int = settings.OUTLINK_CACHE_SIZE) -> None:
        self.size = size
        self._depths: OrderedDict[tuple[str, str | None, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, crawl_id: str, record_id: str | None, url: str, depth: int | None = None) -> bool:
        """Whether the link went out already, at ``depth`` or less (any depth when None)."""
        key = (crawl_id, record_id, url)
        with self._lock:
            sent = self._depths.get(key)
            if sent is None or (depth is not None and depth < sent):
                return False
            self._depths.move_to_end(key)
            return True

    def remember(self, links: Iterable[FrontierMessage]) -> None:
        """Call once the links are in the frontier queue, not before: a failed send must be retried in full."""
        with self._lock:
            for link in links:
                key = (link.crawl_id, link.record_id, link.url)
                self._depths[key] = min(link.depth, self._depths.get(key, link.depth))
                self._depths.move_to_end(key)
            while len(self._depths) > self.size:
                self._depths.popitem(last=False)


def page_outlinks(
    page: Page,
    mapping: Mapping | None,
    depth: int,
    config: CrawlConfig,
    meta: dict[str, Any],
    skipped: SkippedLinks,
    rules: RuleSet,
    sent: SentLinks,
) -> Iterator[FrontierMessage]:
    """The page's links at ``depth`` that go to the frontier: in scope, within the page's cap, not sent already."""
    via = mapping.name if mapping is not None and mapping.url_parsers else None
    invalid: dict[str, None] = {}
    count = 0
    for link in page_links(page, mapping, skipped, invalid):
        budget.check()
        reason = out_of_scope(link, depth, config, rules, chosen_by_rule=via is not None, wants=meta.get("want") or ())
        if reason:
            skipped.add(_scope_kind(reason), link, reason)
            continue
        if count >= settings.MAX_OUTLINKS_PER_PAGE:
            skipped.add("over-page-cap", link, f"more than {settings.MAX_OUTLINKS_PER_PAGE} links on the page")
            continue
        count += 1
        if sent.known(config.crawl_id, meta.get("record_id"), link, depth):
            continue
        yield FrontierMessage(
            url=link,
            depth=depth,
            crawl_id=config.crawl_id,
            referrer=page.url,
            record_id=meta.get("record_id"),
            want=tuple(meta.get("want") or ()),
            via=via,
            canonical=True,  # resolve_link canonicalised it: dispatch need not again
        )
    # Malformed hrefs go on too, once per container: dispatch drops each
    # with its reason, so the crawl log says what became of it.
    for raw in invalid:
        if not sent.known(config.crawl_id, None, raw):
            yield FrontierMessage(url=raw, depth=depth, crawl_id=config.crawl_id, referrer=page.url)


def frontier_batch(outlinks: Iterable[FrontierMessage], completed: CompletedRecords) -> list[FrontierMessage]:
    """A WARC's outlinks, once each per (crawl, record, URL), less those of a record ``completed`` on a later page."""
    unique: dict[tuple[str, str | None, str], FrontierMessage] = {}
    for link in outlinks:
        if link.record_id and (link.crawl_id, link.record_id) in completed:
            continue  # its record completed on a later page of this WARC
        unique.setdefault((link.crawl_id, link.record_id, link.url), link)
    return list(unique.values())
