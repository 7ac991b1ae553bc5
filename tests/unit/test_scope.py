"""Crawl scope: seed hosts, mapping patterns, allow and deny patterns, depth; refused ports and trap shapes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from crawlstack import settings
from crawlstack.config import CrawlConfig, seed_port_key
from crawlstack.rules import RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.scope import out_of_scope, refusal, trap
from crawlstack.urls import InvalidURL, canonicalize

RULES = RuleSet(
    (
        compile_mapping(
            "book.json",
            {
                "name": "book",
                "url_patterns": [{"type": "regex", "pattern": r"^https?://books\.example/b/"}],
                "fields": [{"name": "title", "processors": [{"type": "xpath", "parameters": {"expression": "//h1"}}]}],
            },
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


def test_a_rules_choice_alone_does_not_take_a_link_off_site() -> None:
    """A page no mapping will use is not worth a request to a stranger's host."""
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES) is not None
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES, chosen_by_rule=True) == (
        "off-site: chosen by a url_parser, but no mapping, allow pattern or record wants it"
    )


def test_a_rules_choice_off_site_is_followed_for_a_record_wanting_a_field_a_mapping_gives() -> None:
    field = RULES.mappings[0].fields[0].name
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES, chosen_by_rule=True, wants=(field,)) is None
    # A field no mapping gives: no mapping could use the page either.
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES, chosen_by_rule=True, wants=("nope",))
    # Without the rule's choice, a record's wish takes no link off-site.
    assert out_of_scope("http://elsewhere.example/x", 1, CONFIG, RULES, wants=(field,))


def test_a_rules_choice_off_site_that_a_mapping_or_allow_pattern_claims_is_followed() -> None:
    assert out_of_scope("http://books.example/b/1", 1, CONFIG, RULES, chosen_by_rule=True) is None
    assert out_of_scope("https://allowed.example/x", 1, CONFIG, RULES, chosen_by_rule=True) is None


def test_empty_config_has_nothing_in_scope() -> None:
    assert out_of_scope("http://seed.example/", 0, CrawlConfig(), RuleSet()) is not None


# --- refusal: ports and trap-shaped URLs ---------------------------------------------

PORTS = CrawlConfig(
    crawl_id="c",
    seed_hosts=frozenset({"127.0.0.1", seed_port_key("127.0.0.1", 8080), "::1", seed_port_key("::1", 9000)}),
    allow_ports=(8443,),
)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://example.com/", None),
        ("https://example.com/", None),
        ("http://example.com:443/", None),  # 80 and 443 whatever the scheme
        ("https://example.com:8443/", None),  # allow_ports
        ("http://127.0.0.1:8080/a", None),  # a seed's host and port
        ("http://[::1]:9000/a", None),
        ("http://127.0.0.1:8081/a", "port 8081 is not allowed"),  # the seed's host, another port
        ("http://[::1]:9001/", "port 9001 is not allowed"),
        ("http://example.com:8080/", "port 8080 is not allowed"),  # a seed's port, another host
        ("http://example.com:22/", "port 22 is not allowed"),
    ],
)
def test_ports_other_than_80_and_443_need_allowing_or_a_seed(url: str, reason: str | None) -> None:
    assert refusal(url, PORTS) == reason


def test_seed_port_keys_never_match_a_bare_host() -> None:
    assert seed_port_key("127.0.0.1", 8080) == "127.0.0.1:8080"
    assert seed_port_key("::1", 8080) == "[::1]:8080"
    # So scope by host name is unchanged by them.
    assert out_of_scope("http://[::1]:9000/", 1, PORTS, RULES) is None
    assert out_of_scope("http://127.0.0.2:8080/", 1, PORTS, RULES) is not None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/a/b/c", None),
        ("/a/b/a/b", None),
        ("/2024/10/10/", None),
        ("/a/1/a/2/a/3", None),
        ("/x/x/x", "trap: 'x' repeats 3 times in a row in the path"),
        ("/a/b/a/b/a/b/", "trap: 'a/b' repeats 3 times in a row in the path"),
        ("/p/a/b/c/a/b/c/a/b/c/q", "trap: 'a/b/c' repeats 3 times in a row in the path"),
        ("/a/1/a/2/a/3/a/4", "trap: segment 'a' occurs 4 times in the path (max 3)"),
        ("/" + "/".join(f"s{i}" for i in range(33)), "trap: path has 33 segments (max 32)"),
        ("/" + "/".join(f"s{i}" for i in range(32)), None),
        ("/s?" + "&".join(f"p{i}=1" for i in range(33)), "trap: query has 33 parameters (max 32)"),
        ("/s?" + "&".join(f"p{i}=1" for i in range(32)), None),
        ("/calendar?month=2031-07", None),  # looks ordinary: depth and the host cap bound it
    ],
)
def test_trap_shapes(path: str, reason: str | None) -> None:
    assert trap("http://example.com" + path) == reason
    assert refusal("http://example.com" + path, CONFIG) == reason


def test_trap_limits_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "MAX_SEGMENT_REPEATS", 2)
    assert trap("http://example.com/x/x") == "trap: 'x' repeats 2 times in a row in the path"
    assert trap("http://example.com/a/b/a/b/a") == "trap: segment 'a' occurs 3 times in the path (max 2)"
    monkeypatch.setattr(settings, "MAX_PATH_SEGMENTS", 2)
    assert trap("http://example.com/a/b/c") == "trap: path has 3 segments (max 2)"


def test_a_long_segment_is_cut_in_the_reason() -> None:
    reason = trap("http://example.com" + ("/" + "z" * 300) * 3)
    assert reason is not None and len(reason) < 100 and reason.startswith("trap: 'zzz")


@hyp_settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "x", "%20", "é", "..", "", "2031-07"]), max_size=40),
    st.lists(st.sampled_from(["m=1", "a", "", "b=2"]), max_size=40),
    st.sampled_from(["", ":8080", ":443", ":1"]),
)
def test_refusal_never_raises_and_agrees_with_the_trap_rules(segments: list[str], params: list[str], port: str) -> None:
    try:
        url = canonicalize(f"http://example.com{port}/" + "/".join(segments) + ("?" + "&".join(params)))
    except InvalidURL:
        return
    reason = refusal(url, CONFIG)
    if port in ("", ":443"):
        assert reason == trap(url)  # the port is fine: only the shape can refuse it
    else:
        assert reason == f"port {port[1:]} is not allowed"  # the port is checked first
