"""Strict parsing of header values from the web: ASCII digits, bounded lengths, None (never raising) if malformed."""

from __future__ import annotations

import logging
from email.utils import formatdate

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from crawlstack import settings
from crawlstack.fetch.headers import (
    MAX_DIGITS,
    MAX_HEADER_VALUE_CHARS,
    normalized_content_type,
    parse_content_length,
    parse_content_type,
    parse_crawl_delay,
    parse_location,
    parse_retry_after,
)

NOW = 1_700_000_000.0

# Each looks like a number to str.isdigit(), float() or a human, and is not delta-seconds or a length.
NOT_ASCII_DIGITS = [
    "²",
    "١٢",
    "\uff11\uff12",
    "1²",
    "-1",
    "+1",
    "1e3",
    "1.5",
    "0x10",
    "1_0",
    "inf",
    "nan",
    "1 2",
    "12a",
]


# --- Retry-After ------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [("120", 120.0), ("0", 0.0), ("  12 ", 12.0), ("\t7", 7.0)])
def test_retry_after_delta_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize("value", NOT_ASCII_DIGITS)
def test_retry_after_refuses_what_is_not_ascii_digits(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


def test_retry_after_digits_are_bounded() -> None:
    assert parse_retry_after("9" * MAX_DIGITS, NOW) == float("9" * MAX_DIGITS)
    assert parse_retry_after("9" * (MAX_DIGITS + 1), NOW) is None
    assert parse_retry_after("9" * 100_000, NOW) is None


def test_retry_after_http_dates() -> None:
    assert parse_retry_after(formatdate(NOW + 90, usegmt=True), NOW) == pytest.approx(90)
    assert parse_retry_after(formatdate(NOW - 90, usegmt=True), NOW) == 0.0  # gone by: now
    # RFC 850 and asctime forms, long past.
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", NOW) == 0.0
    assert parse_retry_after("Sun Nov  6 08:49:37 1994", NOW) == 0.0
    # Far future: a number, for the caller to find beyond its cap.
    far = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", NOW)
    assert far is not None and far > settings.RETRY_AFTER_MAX_SECONDS


@pytest.mark.parametrize(
    "value",
    [
        "Fri, 99 Foo 2024",
        "Fri, 31 Dec 99999 23:59:59 GMT",
        "Thu, 01 Jan 1970 00:00:00 +9999",
        "Fri, 32 Dec 2024 00:00:00 GMT",
        "Fri, 31 Dec 2024 25:00:00 GMT",
        "Fri, 31 Déc 2024 00:00:00 GMT",
        "Fri, 31 Dec 2024 00:00:00 GMT" + " " * MAX_HEADER_VALUE_CHARS + "x",
        "soon",
        ",",
        "GMT",
    ],
)
def test_retry_after_invalid_dates_are_none(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


def test_retry_after_year_zero_does_not_raise() -> None:
    seconds = parse_retry_after("Mon, 01 Jan 0000 00:00:00 GMT", NOW)
    assert seconds is None or seconds == 0.0


def test_an_absent_header_is_none_without_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawlstack.fetch.headers"):
        assert parse_retry_after("", NOW) is None
        assert parse_content_length(" ") is None
        assert parse_content_type("") is None
        assert parse_location("") is None
        assert parse_crawl_delay(None) is None
    assert caplog.records == []


def test_a_malformed_value_is_one_short_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawlstack.fetch.headers"):
        assert parse_retry_after("²" + "x" * 10_000, NOW) is None
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "Retry-After" in record.getMessage() and "²" in record.getMessage()
    assert len(record.getMessage()) < 200


# --- Content-Length ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "length"),
    [
        ("0", 0),
        ("42", 42),
        ("  12 ", 12),
        ("42, 42", 42),  # a repeated header, joined (RFC 9110 §8.6)
        ("7,7 ,7", 7),
        ("42,", 42),  # an empty list element is no element (§5.6.1)
    ],
)
def test_content_length(value: str, length: int) -> None:
    assert parse_content_length(value) == length


@pytest.mark.parametrize("value", [*NOT_ASCII_DIGITS, "42, 43", ",", "42, ²", "9" * (MAX_DIGITS + 1), "1" * 600])
def test_content_length_refuses_what_is_not_one_ascii_number(value: str) -> None:
    assert parse_content_length(value) is None


# --- Content-Type ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("text/html", ("text/html", None)),
        ("text/html; charset=utf-8", ("text/html", "utf-8")),
        ('TEXT/HTML;Charset="UTF-8"', ("text/html", "utf-8")),
        ("  text/html ;  charset = utf-8  ", ("text/html", "utf-8")),
        ("text/html; charset='windows-1252'", ("text/html", "windows-1252")),
        ('text/html; foo="a;b"; charset=latin1', ("text/html", "latin1")),
        ("text/html; junk; ;; charset=koi8-r", ("text/html", "koi8-r")),
        ("text/html; charset=utf-8; charset=latin1", ("text/html", "utf-8")),  # the first one
        ('text/html; charset="utf-8', ("text/html", "utf-8")),  # an unclosed quote
        ("text/html; charset=", ("text/html", None)),
        ("text/html; charset=ütf-8", ("text/html", None)),
        ("text/html; charset=" + "a" * 100, ("text/html", None)),
        ("text/html; charset=a b", ("text/html", None)),
        ("application/xhtml+xml", ("application/xhtml+xml", None)),
        ("text/plain, text/html; charset=utf-8", ("text/html", "utf-8")),  # a joined list: the last valid
        ("text/html; charset=utf-8, nonsense", ("text/html", "utf-8")),
    ],
)
def test_content_type(value: str, parsed: tuple[str, str | None]) -> None:
    assert parse_content_type(value) == parsed


@pytest.mark.parametrize(
    "value", ["html", "text/", "/html", "text/ht ml", "téxt/html", "text/html\x00", "²/html", "text/html" + ";" * 600]
)
def test_content_type_without_a_media_type_is_none(value: str) -> None:
    assert parse_content_type(value) is None


def test_normalized_content_type() -> None:
    assert normalized_content_type('Text/HTML; Charset="UTF-8"; q=1') == "text/html; charset=utf-8"
    assert normalized_content_type("text/plain") == "text/plain"
    assert normalized_content_type("nonsense") == ""
    assert normalized_content_type("") == ""


# --- Location ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "location"),
    [
        ("/new", "/new"),
        ("  http://example.com/a  ", "http://example.com/a"),
        ("/caf\xe9", "/caf\xe9"),
        ("?q=1", "?q=1"),
    ],
)
def test_location(value: str, location: str) -> None:
    assert parse_location(value) == location


@pytest.mark.parametrize("value", ["/a\x00", "/a\r\nSet-Cookie: x=1", "/a\x7f", "/a\x1b[31m", "\x0c/a", " \t "])
def test_location_with_control_characters_or_nothing_is_none(value: str) -> None:
    assert parse_location(value) is None


def test_location_is_bounded_by_the_url_cap() -> None:
    assert parse_location("/" + "a" * (settings.MAX_URL_LENGTH - 1)) is not None
    assert parse_location("/" + "a" * settings.MAX_URL_LENGTH) is None


# --- Crawl-delay ------------------------------------------------------------------


@pytest.mark.parametrize(("value", "delay"), [(0.0, 0.0), (2.5, 2.5), (3, 3.0), ("1", 1.0), (" 2.5 ", 2.5)])
def test_crawl_delay(value: float | str, delay: float) -> None:
    assert parse_crawl_delay(value) == delay


@pytest.mark.parametrize("value", [1e308, 10**400, "99999999"])
def test_crawl_delay_is_capped(value: float | str) -> None:
    assert parse_crawl_delay(value) == settings.MAX_CRAWL_DELAY_SECONDS


@pytest.mark.parametrize(
    "value", [float("inf"), float("-inf"), float("nan"), -1.0, -0.5, True, "inf", "nan", "-1", "1e3", "²", "1_0", ""]
)
def test_crawl_delay_not_finite_or_negative_is_none(value: float | str) -> None:
    assert parse_crawl_delay(value) is None


# --- none of them raises ------------------------------------------------------------


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.text())
def test_no_parser_raises_on_any_text(value: str) -> None:
    seconds = parse_retry_after(value, NOW)
    assert seconds is None or seconds >= 0
    length = parse_content_length(value)
    assert length is None or 0 <= length < 10**MAX_DIGITS
    parsed = parse_content_type(value)
    assert parsed is None or (parsed[0].isascii() and "/" in parsed[0])
    assert isinstance(normalized_content_type(value), str)
    location = parse_location(value)
    assert location is None or len(location) <= settings.MAX_URL_LENGTH
    delay = parse_crawl_delay(value)
    assert delay is None or 0 <= delay <= settings.MAX_CRAWL_DELAY_SECONDS


@hypothesis_settings(max_examples=100, deadline=None)
@given(st.from_regex(r"[A-Za-z]{0,9},? ?[0-9]{0,5}[ -]?[A-Za-z]{0,4}[ -]?[0-9]{0,6} [0-9:]{0,9} ?[A-Z+\-0-9]{0,6}"))
def test_no_date_shaped_retry_after_raises(value: str) -> None:
    seconds = parse_retry_after(value, NOW)
    assert seconds is None or seconds >= 0
