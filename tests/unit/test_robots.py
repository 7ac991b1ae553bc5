"""robots.txt policy: status handling, product-token matching, Crawl-delay and the body cap."""

from __future__ import annotations

import time

import pytest

from crawlstack import settings
from crawlstack.robots import (
    ALLOW_ALL,
    DISALLOW_ALL,
    PARSED,
    RobotsPolicy,
    RobotsRecord,
    pack_body,
    product_token,
    unpack_body,
)

UA = "crawlstack/0.1 (+https://example.org/bot)"
ORIGIN = "http://example.com"

ROBOTS = b"""\
User-agent: *
Disallow: /private
Crawl-delay: 1

User-agent: crawlstack
Disallow: /secret
Allow: /secret/open
Crawl-delay: 2.5

User-agent: otherbot
Disallow: /
"""


def policy(status: int | None, body: bytes = b"", error: str = "") -> RobotsPolicy:
    return RobotsPolicy(RobotsRecord.from_fetch(ORIGIN, status, body, error))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 429, 499])
def test_4xx_allows_everything(status: int) -> None:
    p = policy(status, b"User-agent: *\nDisallow: /\n")
    assert p.record.kind == ALLOW_ALL
    assert p.allows(f"{ORIGIN}/anything", UA)
    assert p.crawl_delay(UA) is None
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_TTL_SECONDS


@pytest.mark.parametrize("status", [500, 502, 503, 599])
def test_5xx_disallows_everything_for_a_shorter_time(status: int) -> None:
    p = policy(status, b"User-agent: *\nAllow: /\n")
    assert p.record.kind == DISALLOW_ALL
    assert not p.allows(f"{ORIGIN}/", UA)
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_ERROR_TTL_SECONDS
    assert p.disallow_reason() == f"robots: robots.txt {status}, host disallowed"


def test_a_refused_address_is_the_reason_not_unreachable() -> None:
    refused = "address 10.0.0.1 is not public (use --allow-private to allow it)"
    p = RobotsPolicy(RobotsRecord.from_fetch(ORIGIN, None, b"", refused))
    assert not p.allows(f"{ORIGIN}/x", UA)
    assert p.disallow_reason() == refused


def test_unreachable_disallows_everything_with_the_error() -> None:
    p = policy(None, error="connection failed")
    assert p.record.kind == DISALLOW_ALL
    assert not p.allows(f"{ORIGIN}/", UA)
    assert "robots.txt unreachable: connection failed" in p.disallow_reason()
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_ERROR_TTL_SECONDS


def test_2xx_is_parsed() -> None:
    p = policy(200, ROBOTS)
    assert p.record.kind == PARSED
    assert p.record.status == 200
    assert p.disallow_reason() == "robots: disallowed by robots.txt"


def test_the_group_for_the_product_token_applies_not_the_star_group() -> None:
    p = policy(200, ROBOTS)
    # The crawlstack group, not "*": /private is allowed, /secret is not.
    assert p.allows(f"{ORIGIN}/private/x", UA)
    assert not p.allows(f"{ORIGIN}/secret/x", UA)
    assert p.allows(f"{ORIGIN}/secret/open/x", UA)
    assert p.allows(f"{ORIGIN}/", UA)
    # Other agents get the "*" group or their own.
    assert not p.allows(f"{ORIGIN}/private/x", "Mozilla/5.0 (X11)")
    assert p.allows(f"{ORIGIN}/secret/x", "Mozilla/5.0 (X11)")
    assert not p.allows(f"{ORIGIN}/", "OtherBot/2.0")


def test_matching_ignores_case_and_version_of_the_user_agent() -> None:
    p = policy(200, ROBOTS)
    for ua in ("CrawlStack/9.9", "crawlstack", "  crawlstack/1 (compatible)"):
        assert not p.allows(f"{ORIGIN}/secret/x", ua), ua


@pytest.mark.parametrize(
    ("ua", "token"),
    [
        (UA, "crawlstack"),
        ("CrawlStack/1.0 (x)", "CrawlStack"),
        ("  my-bot_2/3", "my-bot_2"),
        ("my bot", "my"),
        ("weird!bot/1", "weirdbot"),
        ("///", "///"),
    ],
)
def test_product_token(ua: str, token: str) -> None:
    assert product_token(ua) == token


def test_crawl_delay_per_group() -> None:
    p = policy(200, ROBOTS)
    assert p.crawl_delay(UA) == 2.5
    assert p.crawl_delay("somebot/1") == 1.0
    assert p.crawl_delay("otherbot") is None


def test_crawl_delay_is_clamped() -> None:
    p = policy(200, b"User-agent: *\nCrawl-delay: 100000\n")
    assert p.crawl_delay(UA) == settings.MAX_CRAWL_DELAY_SECONDS


def test_body_is_parsed_up_to_the_cap() -> None:
    head = b"User-agent: *\nDisallow: /private\n"
    pad = b"#" * (settings.ROBOTS_MAX_BYTES - len(head) - 1) + b"\n"
    p = policy(200, head + pad + b"Disallow: /\n")
    assert len(p.record.body) == settings.ROBOTS_MAX_BYTES
    # Rules before the cap apply; the one beyond it is not seen.
    assert not p.allows(f"{ORIGIN}/private/x", UA)
    assert p.allows(f"{ORIGIN}/x", UA)


def test_a_line_cut_by_the_cap_is_dropped_not_half_read() -> None:
    head = b"User-agent: *\n"
    # "Disallow: /abc" straddles the cap: read up to it, it would say "Disallow: /".
    pad = b"#" * (settings.ROBOTS_MAX_BYTES - len(head) - len(b"Disallow: /") - 1) + b"\n"
    p = policy(200, head + pad + b"Disallow: /abc\n")
    assert p.allows(f"{ORIGIN}/x", UA)
    assert not p.record.body.endswith("Disallow: /")


def test_non_utf8_body_is_read_with_replacement() -> None:
    p = policy(200, b"User-agent: *\nDisallow: /caf\xe9\n")
    assert "\ufffd" in p.record.body
    assert p.allows(f"{ORIGIN}/other", UA)


def test_empty_body_allows_all() -> None:
    assert policy(200, b"").allows(f"{ORIGIN}/x", UA)


def test_expiry() -> None:
    record = RobotsRecord.from_fetch(ORIGIN, 200, b"")
    assert not record.expired()
    assert record.expired(record.expires_at)
    assert record.expired(time.time() + settings.ROBOTS_TTL_SECONDS + 1)
    assert not record.expired(record.expires_at - 1)


def test_pack_body_round_trips_and_stays_under_its_limit() -> None:
    text = "User-agent: *\nDisallow: /a\n" * 1000
    assert unpack_body(pack_body(text)) == text
    noisy = "".join(f"# {i * 7919 % 104729:x}{i * 31337 % 65521:x}\n" for i in range(20_000))
    packed = pack_body(noisy, limit=20_000)
    assert len(packed) <= 20_000
    kept = unpack_body(packed)
    assert noisy.startswith(kept) and kept.endswith("\n") and len(kept) < len(noisy)
