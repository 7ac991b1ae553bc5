"""Crawl scope: which canonical URLs a crawl may follow.

A URL is in scope when no ``deny`` pattern matches it and its host is a seed
host, or a mapping's ``url_patterns`` match it, or an ``allow`` pattern
matches it, or a mapping's ``url_parsers`` chose it; and its depth is at most
``max_depth``.  Only the mappings the crawl's ``rules`` name count
(``rules_for``; all of them when it names none).  The page budget
(``max_pages``) is checked by dispatch, against the crawl's counter.
"""

from __future__ import annotations

import re
from functools import lru_cache

from crawlstack.config import CrawlConfig
from crawlstack.rules import RuleSet
from crawlstack.urls import host_of


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


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


def out_of_scope(url: str, depth: int, config: CrawlConfig, rules: RuleSet, chosen_by_rule: bool = False) -> str | None:
    """None when ``url`` is in scope, else the reason it is not.

    ``chosen_by_rule``: a mapping's url_parsers picked the link, which makes it
    in scope wherever it points; depth and deny patterns still apply.
    """
    if depth > config.max_depth:
        return f"deeper than max depth {config.max_depth}"
    if any(_compiled(p).search(url) for p in config.deny):
        return "matches a deny pattern"
    if chosen_by_rule:
        return None
    if host_of(url) in config.seed_hosts:
        return None
    if rules_for(rules, config).match(url) is not None:
        return None
    if any(_compiled(p).search(url) for p in config.allow):
        return None
    return "off-site: not a seed host, a mapping or an allow pattern"
