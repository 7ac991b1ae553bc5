"""Crawl scope: which canonical URLs a crawl may follow.

A URL is in scope when no ``deny`` pattern matches it and its host is a seed
host, or a mapping's ``url_patterns`` match it, or an ``allow`` pattern
matches it, or a mapping's ``url_parsers`` chose it for a seed's record that
still wants a field some mapping gives; and its depth is at most
``max_depth``.  A url_parser's choice alone is not enough off the seed hosts:
a page no mapping will use is not worth a request to a stranger's host.
Only the mappings the crawl's ``rules`` name count (``rules_for``; all of
them when it names none).  The page budget
(``max_pages``) and the per-host cap (``max_pages_per_host``) are checked by
dispatch, against counters.

``refusal`` is what dispatch refuses even in scope, checked after
``out_of_scope`` and whoever chose the link:

* a **port** other than ``settings.DEFAULT_PORTS`` (80, 443), unless the
  crawl's ``allow_ports`` lists it or a seed was on that host and port
  (``CrawlConfig.port_allowed``): "port 8081 is not allowed";
* **spider traps** by the URL's shape: a path segment that occurs more than
  ``settings.MAX_SEGMENT_REPEATS`` times, or a run of segments repeated that
  many times back to back (``/a/b/a/b/a/b``), more than
  ``settings.MAX_PATH_SEGMENTS`` segments or ``settings.MAX_QUERY_PARAMS``
  query parameters.  Endless calendars and other traps whose URLs look
  ordinary are bounded by ``max_depth`` and the per-host cap instead.

Extract leaves ``refusal`` to dispatch, so each refused URL gets a line in
the crawl log; a refused URL is never fetched, so it brings no more links.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.rules import RuleSet, patterns
from crawlstack.urls import host_of, url_port


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> patterns.UserPattern:
    return patterns.compile(pattern)


_subsets: dict[tuple[int, tuple[str, ...]], tuple[RuleSet, RuleSet]] = {}


def rules_for(rules: RuleSet, config: CrawlConfig) -> RuleSet:
    """The mappings ``config`` uses: those its ``rules`` name, in their loaded order; all when it names none.

    A name no mapping has selects nothing.  Subsets are built once per
    container (the rule set keeps its identity for the container's life).
    """
    if config.rules is None:
        return rules
    key = (id(rules), config.rules)
    cached = _subsets.get(key)
    if cached is not None and cached[0] is rules:
        return cached[1]
    wanted = set(config.rules)
    subset = RuleSet(tuple(m for m in rules if m.name in wanted))
    if len(_subsets) > 256:
        _subsets.clear()
    _subsets[key] = (rules, subset)
    return subset


def out_of_scope(
    url: str,
    depth: int,
    config: CrawlConfig,
    rules: RuleSet,
    chosen_by_rule: bool = False,
    wants: Iterable[str] = (),
) -> str | None:
    """None when ``url`` is in scope, else the reason it is not.

    ``chosen_by_rule``: a mapping's url_parsers picked the link; off the seed
    hosts that takes it only for a record still wanting (``wants``) a field
    one of the crawl's mappings gives.  Depth and deny patterns apply to all.
    """
    if depth > config.max_depth:
        return f"deeper than max depth {config.max_depth}"
    if denied(url, config):
        return "matches a deny pattern"
    if host_of(url) in config.seed_hosts:
        return None
    used = rules_for(rules, config)
    if used.match(url) is not None:
        return None
    if any(_compiled(p).search(url) for p in config.allow):
        return None
    if chosen_by_rule:
        wanted = set(wants)
        if wanted and any(wanted.intersection(field.name for field in mapping.fields) for mapping in used):
            return None
        return "off-site: chosen by a url_parser, but no mapping, allow pattern or record wants it"
    return "off-site: not a seed host, a mapping or an allow pattern"


def denied(url: str, config: CrawlConfig) -> bool:
    """Whether one of the crawl's ``deny`` patterns matches ``url``."""
    return any(_compiled(p).search(url) for p in config.deny)


def refusal(url: str, config: CrawlConfig) -> str | None:
    """None when dispatch may fetch canonical ``url`` as far as its port and shape go, else the reason."""
    port = url_port(url)
    if not config.port_allowed(host_of(url), port):
        return f"port {port} is not allowed"
    return trap(url)


def trap(url: str) -> str | None:
    """The reason canonical ``url`` looks like a spider trap by its shape, or None."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) > settings.MAX_PATH_SEGMENTS:
        return f"trap: path has {len(segments)} segments (max {settings.MAX_PATH_SEGMENTS})"
    params = len([p for p in parts.query.split("&") if p])
    if params > settings.MAX_QUERY_PARAMS:
        return f"trap: query has {params} parameters (max {settings.MAX_QUERY_PARAMS})"
    limit = settings.MAX_SEGMENT_REPEATS
    segment, count = Counter(segments).most_common(1)[0] if segments else ("", 0)
    if count > limit:
        return f"trap: segment {_short(segment)!r} occurs {count} times in the path (max {limit})"
    run = _repeated_run(segments, limit)
    if run is not None:
        return f"trap: {_short('/'.join(run))!r} repeats {limit} times in a row in the path"
    return None


def _repeated_run(segments: list[str], times: int) -> list[str] | None:
    """The first run of segments that ``segments`` repeats ``times`` times back to back, or None.

    At most MAX_PATH_SEGMENTS segments reach here, so the quadratic search is cheap.
    """
    n = len(segments)
    for size in range(1, n // times + 1):
        for start in range(n - size * times + 1):
            run = segments[start : start + size]
            if all(segments[start + k * size : start + (k + 1) * size] == run for k in range(1, times)):
                return run
    return None


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
