"""Limits of what the user gives, checked before any request.

Every id and number from the command line or a seeds file ends up in a
DynamoDB key, an S3 key or a DynamoDB number.  One past a service's limit
used to pass validation and fail at its first write, mid-crawl, taking its
batch with it; so each is checked up front against the limits it will meet,
and refused with a one-line usage error.  Never hashed or truncated: that
would merge or rename the user's ids without a word.

The services' limits (``DYNAMODB_*``, ``S3_KEY_MAX_BYTES``) and the ranges
chosen for the CLI's ids and numeric flags are here; a crawl setting's range
is declared with the setting (``crawlstack.config``) and checked by the
parsers here (``number_flag``, ``integer_flag``).  Where an id goes:

* a crawl id: the crawls table's partition key; ``<crawl id>#<fingerprint>``
  (urls, results) and ``<crawl id>#<record id>`` (resolved) partition keys;
  ``held#<crawl id>`` (the parked table's partition of a stopped crawl);
  the hosts table's sort key ``pages#<crawl id>`` (at most 1,024 bytes);
  S3 keys ``records/`` and ``crawl-log/crawl_id=<id, percent-encoded: up to
  3 bytes a byte>/dt=<day>/<24 hex>.jsonl.gz`` (at most 1,024 bytes).
  ``MAX_CRAWL_ID_BYTES`` keeps every one of them inside its limit.
* a record id: the resolved table's ``<crawl id>#<record id>``; with
  ``MAX_RECORD_ID_BYTES`` it fits 2,048 bytes with any crawl id allowed.

tests/unit/test_limits.py builds those keys with the real builders at the
longest ids allowed, so a new key format that breaks this fails there.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

from crawlstack.rules import patterns

# --- the services' limits -------------------------------------------------------
DYNAMODB_PARTITION_KEY_MAX_BYTES = 2048
DYNAMODB_SORT_KEY_MAX_BYTES = 1024
DYNAMODB_ITEM_MAX_BYTES = 400 * 1024
DYNAMODB_NUMBER_MAX_DIGITS = 38
DYNAMODB_NUMBER_SMALLEST = Decimal("1E-130")
DYNAMODB_NUMBER_LARGEST = Decimal("9.9999999999999999999999999999999999999E+125")
S3_KEY_MAX_BYTES = 1024

# --- ids (bytes of UTF-8) --------------------------------------------------------
MAX_CRAWL_ID_BYTES = 256
MAX_RECORD_ID_BYTES = 1024
# A User-Agent is an HTTP header and part of the crawl's config item.
MAX_USER_AGENT_BYTES = 1024
# The crawl config's strings together (user agent, --allow, --deny, --rules-set):
# well inside a DynamoDB item, leaving room for the counters beside them.
MAX_CRAWL_CONFIG_BYTES = 300 * 1024

# --- numeric flags: inclusive ranges (a crawl setting's: with its declaration) ------
CONCURRENCY = (1, 256)
QUERY_TIMEOUT_SECONDS = (0.0, 24 * 3600.0)
LIST_LIMIT = (1, 10**9)  # records --limit, dlq --limit
CHECKS_PER_DAY = (1, 10**7)  # watch --checks-per-day
SIMULATE_DAYS = (0.0, 3650.0)  # watch --simulate-days: ten years at most
SIMULATION_SPEED = (1.0, 10**6)  # watch --speed: simulated seconds per wall second
# watch --sim-start, in UTC: 2000-01-01 to the end of 2100.  A simulation
# starting in year 9999 crashed on its year-10000 times, and every later
# simulation on that OUT/ resumed its clock and crashed again.
SIM_START_YEARS = (2000, 2100)


def _shown(value: str) -> str:
    """A value for an error message: a 5,000-digit number is not echoed whole."""
    return repr(value if len(value) <= 40 else value[:40] + "...")


def dynamodb_number_problem(number: float | int) -> str | None:
    """Why DynamoDB would refuse ``number`` as a Number attribute, or None."""
    if isinstance(number, float) and not math.isfinite(number):
        return "must be a finite number"
    exact = Decimal(str(number))  # as crawlstack stores it (CrawlConfig.to_item)
    if exact != 0 and not DYNAMODB_NUMBER_SMALLEST <= abs(exact) <= DYNAMODB_NUMBER_LARGEST:
        return f"is beyond what DynamoDB stores (magnitude {DYNAMODB_NUMBER_SMALLEST} to 9.99...E+125)"
    # Precision counts significant digits: DynamoDB trims leading and trailing zeros.
    significant = "".join(map(str, exact.as_tuple().digits)).strip("0")
    if len(significant) > DYNAMODB_NUMBER_MAX_DIGITS:
        return f"has more than {DYNAMODB_NUMBER_MAX_DIGITS} digits, more than DynamoDB stores"
    return None


def number_flag(bounds: tuple[float, float], stored: bool = True) -> Callable[[str], float]:
    """An argparse ``type``: a finite number within ``bounds`` (that DynamoDB can store, if ``stored``)."""
    low, high = bounds

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a number: {_shown(value)}") from exc
        if math.isnan(number):
            raise argparse.ArgumentTypeError(f"not a number: {_shown(value)}")
        if number < low:
            raise argparse.ArgumentTypeError(f"must be {low:g} or more")
        if number > high:  # inf too
            raise argparse.ArgumentTypeError(f"must be at most {high:g}")
        problem = dynamodb_number_problem(number) if stored else None
        if problem:
            raise argparse.ArgumentTypeError(f"{_shown(value)} {problem}")
        return number

    return parse


def integer_flag(bounds: tuple[int, int]) -> Callable[[str], int]:
    """An argparse ``type``: an integer within ``bounds``."""
    low, high = bounds

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError as exc:  # a huge digit string too (Python's int digit limit)
            raise argparse.ArgumentTypeError(f"not an integer: {_shown(value)}") from exc
        if number < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more")
        if number > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}")
        return number

    return parse


def time_flag(years: tuple[int, int]) -> Callable[[str], float]:
    """An argparse ``type``: an ISO 8601 time (UTC if it names no zone) within ``years``, as epoch seconds."""
    first, last = years
    low = datetime(first, 1, 1, tzinfo=UTC).timestamp()
    high = datetime(last + 1, 1, 1, tzinfo=UTC).timestamp()

    def parse(value: str) -> float:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {_shown(value)}") from exc
        epoch = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
        if not low <= epoch < high:
            raise argparse.ArgumentTypeError(f"must lie between {first} and {last} (UTC): got {_shown(value)}")
        return epoch

    return parse


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# A code point UTF-8 cannot encode: a lone surrogate, as JSON's "\ud800" or a
# non-UTF-8 byte in argv (Python's surrogateescape) decodes to.  A valid pair
# in JSON decodes to one code point outside this range.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def is_utf8_text(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8: every store, key and queue needs it, and refuses a batch that is not."""
    return _LONE_SURROGATE.search(text) is None


def is_utf8_json(value: object) -> bool:
    """Whether every string in a decoded JSON value, keys too, is valid UTF-8 text."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_utf8_text(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


NOT_UTF8 = "is not valid UTF-8 text (it holds a lone surrogate, such as JSON's \\ud800)"


def crawl_id_problem(crawl_id: str) -> str | None:
    """Why ``crawl_id`` cannot name a crawl (it would break one of its keys), or None."""
    if not crawl_id.strip():
        return "a crawl id must not be empty"
    if not is_utf8_text(crawl_id):
        return f"a crawl id {NOT_UTF8}"
    size = _utf8_size(crawl_id)
    if size > MAX_CRAWL_ID_BYTES:
        return f"a crawl id is at most {MAX_CRAWL_ID_BYTES} bytes (UTF-8), so every key built from it fits; got {size}"
    return None


def crawl_id_flag(value: str) -> str:
    """An argparse ``type`` for a crawl id that names a new or running crawl (seed, crawl stop|resume)."""
    problem = crawl_id_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def crawl_id_lookup_flag(value: str) -> str:
    """An argparse ``type`` for a crawl id only looked up (status, records): any the crawls table's key can hold.

    Looser than ``crawl_id_flag``, so a crawl made before that limit can still be read.
    """
    size = _utf8_size(value)
    if not value.strip() or size > DYNAMODB_PARTITION_KEY_MAX_BYTES:
        raise argparse.ArgumentTypeError(
            f"a crawl id is 1 to {DYNAMODB_PARTITION_KEY_MAX_BYTES} bytes (UTF-8), the crawls table's key; got {size}"
        )
    return value


def record_id_problem(record_id: str) -> str | None:
    """Why a seed's ``record_id`` would break the resolved table's ``<crawl id>#<record id>`` key, or None."""
    if not is_utf8_text(record_id):
        return f'"record_id" {NOT_UTF8}'
    size = _utf8_size(record_id)
    if size > MAX_RECORD_ID_BYTES:
        return (
            f'"record_id" is at most {MAX_RECORD_ID_BYTES} bytes (UTF-8), so "<crawl id>#<record id>" fits '
            f"DynamoDB's {DYNAMODB_PARTITION_KEY_MAX_BYTES}-byte key; got {size}"
        )
    return None


def user_agent_flag(value: str) -> str:
    """An argparse ``type``: a User-Agent that is a valid HTTP header value of a sane size."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise argparse.ArgumentTypeError("must not contain control characters (it is an HTTP header)")
    if _utf8_size(value) > MAX_USER_AGENT_BYTES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_USER_AGENT_BYTES} bytes")
    return value


def crawl_config_problem(strings: list[str], flags: list[str]) -> str | None:
    """Why the crawl config's strings (given with ``flags``) would not fit its item, or None."""
    named = f"{', '.join(flags[:-1])} or {flags[-1]}" if len(flags) > 1 else "".join(flags)
    if not all(is_utf8_text(s) for s in strings):
        return f"{named} {NOT_UTF8}"
    size = sum(_utf8_size(s) for s in strings)
    if size > MAX_CRAWL_CONFIG_BYTES:
        together = named.replace(" or ", " and ")
        return f"{together} come to {size} bytes; at most {MAX_CRAWL_CONFIG_BYTES} fit the crawl's config item"
    return None


def cidr_flag(value: str) -> str:
    """An argparse ``type``: a network (``--allow-private``)."""
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a CIDR: {value!r}") from exc


def regex_flag(value: str) -> str:
    """An argparse ``type``: a pattern the engine the crawl runs ``--allow`` and ``--deny`` on compiles."""
    try:
        patterns.compile(value)
    except patterns.COMPILE_ERRORS as exc:
        raise argparse.ArgumentTypeError(f"invalid regex {value!r}: {patterns.problem(exc)}") from exc
    return value


def port_flag(value: str) -> int:
    """An argparse ``type``: a TCP port."""
    try:
        number = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from exc
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port {number} out of range (1-65535)")
    return number
