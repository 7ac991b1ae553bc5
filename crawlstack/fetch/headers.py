"""Strict parsers for header values received from the web.

Every value here comes from a server that may be broken or hostile, so each
parser is total: a value it cannot read with confidence gives None (logged
at warning level, name and a truncated repr), never an exception.  An empty
value is an absent header and is not logged.

* Digits are ASCII ``0-9`` only: ``str.isdigit()`` also accepts '²' and
  '١٢', which ``int()`` or ``float()`` then refuse or read differently.
* Lengths are bounded before any parsing: ``MAX_HEADER_VALUE_CHARS`` for a
  whole value, ``MAX_DIGITS`` for a number, ``MAX_DATE_CHARS`` for an
  HTTP date, ``MAX_CHARSET_CHARS`` for a charset label.
* Surrounding spaces and tabs (a field's optional whitespace, RFC 9110
  §5.5) are ignored; anything else odd is malformed.

Settings: ``settings.MAX_URL_LENGTH`` (Location) and
``settings.MAX_CRAWL_DELAY_SECONDS`` (robots.txt Crawl-delay), read at call
time.
"""

from __future__ import annotations

import logging
import math
import re
from datetime import UTC
from email.utils import parsedate_to_datetime

from crawlstack import settings

log = logging.getLogger(__name__)

MAX_HEADER_VALUE_CHARS = 512
# 15 digits: a Retry-After of 30 million years, a Content-Length of a petabyte;
# anything longer is noise, and is refused before int() sees it.
MAX_DIGITS = 15
# "Sunday, 06-Nov-1994 08:49:37 GMT" (RFC 850, the longest form) is 32.
MAX_DATE_CHARS = 64
MAX_CHARSET_CHARS = 40
# Characters of a rejected value shown in the log line.
SHOWN_CHARS = 60

_OWS = " \t"
_ASCII_DIGITS = re.compile(r"[0-9]+")
# RFC 9110 §5.6.2 tchar: what a media type's type and subtype are made of.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# C0 controls and DEL: never part of a URL a server meant to send.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A Crawl-delay as text: plain decimal seconds ("1_0", "1e3", "inf" are not).
_DECIMAL = re.compile(r"[0-9]{1,15}(\.[0-9]{1,15})?")


def _malformed(what: str, value: str) -> None:
    shown = value[:SHOWN_CHARS] + ("..." if len(value) > SHOWN_CHARS else "")
    log.warning("ignored malformed %s: %r", what, shown)


def _digits(text: str) -> int | None:
    """``text`` as a non-negative integer if it is 1 to MAX_DIGITS ASCII digits, else None."""
    if len(text) > MAX_DIGITS or not _ASCII_DIGITS.fullmatch(text):
        return None
    return int(text)


def _http_date(text: str) -> float | None:
    """An HTTP-date (RFC 9110 §5.6.7, any of its three forms) as a Unix time, or None."""
    if len(text) > MAX_DATE_CHARS or not text.isascii():
        return None
    try:
        when = parsedate_to_datetime(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)  # HTTP dates are GMT
        return when.timestamp()
    # email.utils raises each of these for one malformed date or another.
    except (TypeError, ValueError, IndexError, OverflowError, AttributeError):
        return None


def parse_retry_after(value: str, now: float) -> float | None:
    """Retry-After (RFC 9110 §10.2.3) as seconds from ``now``: delta-seconds or an HTTP-date.

    A date gone by is 0.0.  No cap here: the caller decides what is too long.
    """
    text = value.strip(_OWS)
    if not text:
        return None
    if len(text) <= MAX_HEADER_VALUE_CHARS:
        seconds = _digits(text)
        if seconds is not None:
            return float(seconds)
        when = _http_date(text)
        if when is not None:
            return max(0.0, when - now)
    _malformed("Retry-After header", value)
    return None


def parse_content_length(value: str) -> int | None:
    """Content-Length (RFC 9110 §8.6): ASCII digits; a list of identical values is that value."""
    text = value.strip(_OWS)
    if not text:
        return None
    if len(text) <= MAX_HEADER_VALUE_CHARS:
        # "42, 42" is what a proxy makes of a repeated header; "42, 43" has no answer.
        lengths = {_digits(item.strip(_OWS)) for item in text.split(",") if item.strip(_OWS)}
        if len(lengths) == 1 and None not in lengths:
            return lengths.pop()
    _malformed("Content-Length header", value)
    return None


def _split_unquoted(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` outside a quoted string (a backslash escapes inside one)."""
    parts: list[str] = []
    start, quoted, escaped = 0, False, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == sep and not quoted:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _unquote(text: str) -> str:
    """A parameter value as meant: a quoted string's quotes and escapes removed (an unclosed one tolerated)."""
    if not text.startswith('"'):
        return text
    out: list[str] = []
    escaped = False
    for ch in text[1:]:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            break
        else:
            out.append(ch)
    return "".join(out)


def _media_and_charset(text: str) -> tuple[str, str | None] | None:
    """One ``type/subtype; param=value ...``: the media type (lowercase) and its first readable charset."""
    media, *params = _split_unquoted(text, ";")
    kind, slash, subtype = media.strip(_OWS).lower().partition("/")
    if not slash or not _TOKEN.fullmatch(kind) or not _TOKEN.fullmatch(subtype):
        return None
    for param in params:
        name, eq, raw = param.partition("=")
        if not eq or name.strip(_OWS).lower() != "charset":
            continue  # other parameters, and junk between them, are ignored
        # Single quotes are not HTTP syntax, but servers send charset='utf-8'.
        label = _unquote(raw.strip(_OWS)).strip(_OWS + "'").lower()
        if 0 < len(label) <= MAX_CHARSET_CHARS and _TOKEN.fullmatch(label):
            return f"{kind}/{subtype}", label
        break  # the first charset is the one meant (WHATWG MIME Sniffing); unreadable, it is none
    return f"{kind}/{subtype}", None


def parse_content_type(value: str) -> tuple[str, str | None] | None:
    """Content-Type (RFC 9110 §8.3): (media type, charset label or None), both lowercase.

    Tolerant of case, quotes and junk parameters.  A comma-separated list
    (a repeated header, joined) gives its last valid media type, as browsers
    take it.  Whether the label names a real encoding is for the caller.
    """
    text = value.strip(_OWS)
    if not text:
        return None
    if len(text) <= MAX_HEADER_VALUE_CHARS:
        for candidate in reversed(_split_unquoted(text, ",")):
            parsed = _media_and_charset(candidate)
            if parsed is not None:
                return parsed
    _malformed("Content-Type header", value)
    return None


def normalized_content_type(value: str) -> str:
    """A Content-Type rebuilt from what parses: ``media; charset=label``, ``media``, or "" if nothing does."""
    parsed = parse_content_type(value)
    if parsed is None:
        return ""
    media, charset = parsed
    return f"{media}; charset={charset}" if charset else media


def parse_location(value: str) -> str | None:
    """Location (RFC 9110 §10.2.2) as sent, stripped: None if empty, over MAX_URL_LENGTH or holding a control character.

    Not resolved against the request's URL, and non-ASCII is left for URL
    canonicalisation to percent-encode.
    """
    text = value.strip(_OWS)
    if not text:
        return None
    if len(text) > settings.MAX_URL_LENGTH or _CONTROL.search(text):
        _malformed("Location header", value)
        return None
    return text


def parse_crawl_delay(value: float | str | None) -> float | None:
    """A robots.txt Crawl-delay in seconds: finite, not negative, at most MAX_CRAWL_DELAY_SECONDS; else None.

    Takes protego's float (parsed with ``float()`` from hostile text, so
    possibly inf, nan or negative in some version) or the raw text.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip(_OWS)
        if not text:
            return None
        delay = float(text) if _DECIMAL.fullmatch(text) else math.nan
    elif isinstance(value, float):
        delay = value
    elif isinstance(value, int):
        delay = float(min(value, 10**MAX_DIGITS))  # float() of a huge int overflows
    else:
        delay = math.nan
    if not math.isfinite(delay) or delay < 0:
        _malformed("robots.txt Crawl-delay", str(value))
        return None
    return min(delay, settings.MAX_CRAWL_DELAY_SECONDS)
