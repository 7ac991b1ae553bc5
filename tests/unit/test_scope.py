"""Crawl scope: seed hosts, mapping patterns, allow and deny patterns, depth."""

from __future__ import annotations

from crawlstack.config import CrawlConfig
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.scope import out_of_scope

RULES = RuleSet(
    (
        compile_mapping(
            "book.json",
            {"name": "book", "url_patterns": [{"type": "regex", "pattern": r"^https?://books\.example/b/"}]},
        ),
    )
)
CONFIG = CrawlConfig(
    crawl_id="c",
    max_depth=2,
    seed_hosts=frozenset({"seed.example"}),
    allow=(r"^https://allowed\.example/",),
    deny=(r"/logout", r"\.pdf$"),
)


def test_seed_host_is_in_scope() -> None:
    assert out_of_scope("http://seed.example/a", 1, CONFIG, RULES) is None
    assert out_of_scope("https://seed.example:8443/a", 1, CONFIG, RULES) is None


def test_subdomain_of_seed_host_is_off_site() -> None:
    assert out_of_scope("http://www.seed.example/", 1, CONFIG, RULES) == (
        "off-site: not a seed host, a mapping or an allow pattern"
    )


def test_mapping_pattern_brings_a_url_in_scope() -> None:
    assert out_of_scope("http://books.example/b/1", 1, CONFIG, RULES) is None
    assert out_of_scope("http://books.example/other", 1, CONFIG, RULES) is not None


def test_allow_pattern_brings_a_url_in_scope() -> None:
    assert out_of_scope("https://allowed.example/x", 1, CONFIG, RULES) is None
    assert out_of_scope("http://allowed.example/x", 1, CONFIG, RULES) is not None


def test_deny_wins_over_seed_host_mapping_allow_and_rule_choice() -> None:
    for url in (
        "http://seed.example/logout",
        "http://books.example/b/x.pdf",
        "https://allowed.example/logout?next=/",
    ):
        assert out_of_scope(url, 0, CONFIG, RULES) == "matches a deny pattern", url
    assert out_of_scope("http://anywhere.example/logout", 0, CONFIG, RULES, chosen_by_rule=True) == (
        "matches a deny pattern"
    )


def test_depth_limit_applies_to_everything() -> None:
    assert out_of_scope("http://seed.example/a", 2, CONFIG, RULES) is None
    assert out_of_scope("http://seed.example/a", 3, CONFIG, RULES) == "deeper than max depth 2"
    assert out_of_scope("http://any.example/a", 3, CONFIG, RULES, chosen_by_rule=True) == "deeper than max depth 2"


def test_a_link_chosen_by_a_rule_is_followed_off_site() -> None:
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES) is not None
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES, chosen_by_rule=True) is None


def test_empty_config_has_nothing_in_scope() -> None:
    assert out_of_scope("http://seed.example/", 0, CrawlConfig(), RuleSet()) is not None
