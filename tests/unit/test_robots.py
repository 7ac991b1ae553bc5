"""robots.txt policy: status handling, product-token matching, Crawl-delay and the body cap."""

from __future__ import annotations

import time

import pytest
from protego import Protego

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.fetch.robots_txt import RobotsPolicy, pack_body, product_token, redirect_refusal, unpack_body
from crawlstack.ports import ALLOW_ALL, DISALLOW_ALL, PARSED, RETRY_AFTER_MIN_SECONDS, RobotsRecord

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


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 499])
def test_4xx_allows_everything(status: int) -> None:
    p = policy(status, b"User-agent: *\nDisallow: /\n")
    assert p.record.kind == ALLOW_ALL
    assert p.allows(f"{ORIGIN}/anything", UA)
    assert p.crawl_delay(UA) is None
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_TTL_SECONDS


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_not_followed_leaves_robots_txt_unavailable_allow_all(status: int) -> None:
    # RFC 9309 §2.3.1.2: a chain the crawler gives up on may be read as unavailable; the server could
    # have answered 404 itself, so refusing its redirect gives it nothing more.
    error = "redirect to http://127.0.0.1:8831/secret-admin?action=delete not followed: not a robots.txt file"
    p = policy(status, error=error)
    assert p.record.kind == ALLOW_ALL and p.allows(f"{ORIGIN}/anything", UA)
    assert p.record.reason == f"robots.txt {status}: {error}"
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_TTL_SECONDS


SEEDED = CrawlConfig(seed_hosts=frozenset({"example.com", "seed.test", "seed.test:8080"}), allow_ports=(8443,))


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        ("https://example.com/robots.txt", None),
        ("https://www.example.com/robots.txt", None),  # "even across authorities": any host's robots file
        ("http://cdn.example.net/sites/example/robots.txt", None),
        ("http://seed.test:8080/robots.txt", None),  # the seed's own port, on its host
        ("http://other.test:8443/robots.txt", None),  # --allow-port
        ("http://127.0.0.1:8831/secret-admin?action=delete", "not a robots.txt file"),
        ("http://example.com/robots.txt?action=delete", "not a robots.txt file"),
        ("http://example.com/", "not a robots.txt file"),
        ("http://example.com/robots.txt.html", "not a robots.txt file"),
        ("http://example.com/ROBOTS.TXT", "not a robots.txt file"),
        ("http://example.com:8831/robots.txt", "port 8831 is not allowed"),
        ("http://other.test:8080/robots.txt", "port 8080 is not allowed"),  # a seed's port is its host's alone
        ("ftp://example.com/robots.txt", "invalid URL: scheme 'ftp' is not http or https"),
    ],
)
def test_a_robots_txt_redirect_is_followed_only_to_a_robots_file_on_an_allowed_port(
    url: str, refusal: str | None
) -> None:
    assert redirect_refusal(url, SEEDED) == refusal


def test_a_robots_txt_redirect_matching_a_deny_pattern_is_not_followed() -> None:
    config = CrawlConfig(seed_hosts=frozenset({"example.com"}), deny=(r"//mirror\.",))
    assert redirect_refusal("https://mirror.example.com/robots.txt", config) == "matches a deny pattern"
    assert redirect_refusal("https://www.example.com/robots.txt", config) is None


@pytest.mark.parametrize("status", [500, 502, 503, 599])
def test_5xx_disallows_everything_for_a_shorter_time(status: int) -> None:
    p = policy(status, b"User-agent: *\nAllow: /\n")
    assert p.record.kind == DISALLOW_ALL
    assert not p.allows(f"{ORIGIN}/", UA)
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_ERROR_TTL_SECONDS
    assert p.disallow_reason() == f"robots: robots.txt {status}, host disallowed"


def test_429_is_unavailable_not_missing_and_disallows_the_host_for_a_shorter_time() -> None:
    # 429 says the server is overloaded, as a 5xx does: not "no robots.txt, allow all".
    p = policy(429, b"User-agent: *\nAllow: /\n")
    assert p.record.kind == DISALLOW_ALL and p.record.status == 429
    assert not p.allows(f"{ORIGIN}/", UA)
    assert p.crawl_delay(UA) is None
    assert p.record.expires_at - p.record.fetched_at == settings.ROBOTS_ERROR_TTL_SECONDS
    assert p.disallow_reason() == "robots.txt unavailable (429)"


@pytest.mark.parametrize(
    ("retry_after", "ttl"),
    [
        (7200.0, 7200.0),
        (0.0, RETRY_AFTER_MIN_SECONDS),  # "now" must not refetch it on every message
        (10.0**9, settings.ROBOTS_TTL_SECONDS),
    ],
)
def test_a_429_or_503_is_cached_until_its_retry_after_within_bounds(retry_after: float, ttl: float) -> None:
    for status in (429, 503):
        record = RobotsRecord.from_fetch(ORIGIN, status, b"", retry_after=retry_after)
        assert record.kind == DISALLOW_ALL
        assert record.expires_at - record.fetched_at == pytest.approx(ttl)


def test_retry_after_does_not_change_a_good_or_missing_robots_txt() -> None:
    assert RobotsRecord.from_fetch(ORIGIN, 200, b"", retry_after=5.0).expires_at - time.time() == pytest.approx(
        settings.ROBOTS_TTL_SECONDS, abs=5
    )
    unreachable = RobotsRecord.from_fetch(ORIGIN, None, b"", "connection failed", retry_after=5.0)
    assert unreachable.expires_at - unreachable.fetched_at == settings.ROBOTS_ERROR_TTL_SECONDS


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


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "1e400", "1e308", "²", "0x10"])
def test_a_hostile_crawl_delay_is_none_or_capped(value: str) -> None:
    delay = policy(200, f"User-agent: *\nCrawl-delay: {value}\n".encode()).crawl_delay(UA)
    assert delay is None or 0 <= delay <= settings.MAX_CRAWL_DELAY_SECONDS


@pytest.mark.parametrize("delay", [float("inf"), float("nan"), -1.0, "soon"])
def test_a_crawl_delay_protego_gets_wrong_is_none(monkeypatch: pytest.MonkeyPatch, delay: object) -> None:
    p = policy(200, ROBOTS)
    monkeypatch.setattr(p._parser, "crawl_delay", lambda ua: delay)
    assert p.crawl_delay(UA) is None


def test_protego_raising_never_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object) -> None:
        raise RecursionError("hostile robots.txt")

    p = policy(200, ROBOTS)
    monkeypatch.setattr(p._parser, "can_fetch", boom)
    monkeypatch.setattr(p._parser, "crawl_delay", boom)
    # One URL protego cannot judge is not fetched; its Crawl-delay is none.
    assert not p.allows(f"{ORIGIN}/x", UA)
    assert p.crawl_delay(UA) is None
    # A file protego cannot parse at all is read as empty: allow all.
    empty = Protego.parse("")
    monkeypatch.setattr(Protego, "parse", classmethod(lambda cls, text: boom() if text else empty))
    unparsed = policy(200, ROBOTS)
    assert unparsed.allows(f"{ORIGIN}/secret/x", UA) and unparsed.crawl_delay(UA) is None


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
