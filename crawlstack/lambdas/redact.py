"""Log redaction: secrets in URLs never reach a log line.

Crawled URLs carry tokens now and then (``?access_token=...``, presigned
``X-Amz-Signature=...``, ``https://user:pw@host/``), and so do exception
messages that quote a URL.  Logs go to CloudWatch (or the terminal in local
mode), where more people read them than read the crawl's data, so every log
line is redacted in one place and no call site can forget:

* ``install()`` wraps the logging record factory: every record of every
  logger (ours, Powertools', botocore's, urllib3's) gets its message and its
  exception text redacted when it is created;
* ``json_dumps`` is the Powertools serializer of the handlers' loggers
  (``redacted_logs``): every field of a structured line (the message, the
  extra keys, the keys appended for the invocation, the exception) is
  redacted just before it is written.

What is redacted (the value becomes ``REDACTED``; names stay, so a line
still says what was there):

* a query (or ``;``) parameter whose name says secret: token, key, secret,
  password, sig/signature, auth (not author), session, code, credential,
  cookie, jwt, and every ``X-Amz-*``; also parameters nested,
  percent-encoded, in another parameter's value (``?next=...%3Ftoken%3D...``);
* a query parameter whose value looks like a secret, whatever its name: a
  JWT, 32 or more hex digits, or 20 or more characters of a token alphabet
  mixing upper case, lower case and digits;
* the password of a URL's userinfo, JWTs, AWS access key ids, and what
  follows ``Bearer`` anywhere in a line;
* in structured fields, the whole value of a field named like a credential
  (``authorization``, ``cookie``, ``password``, ``*token*``, ``*secret*``...).

Data outputs (records, crawl log, WARC) keep the real URLs: they are the
user's data.  Settings: none.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

REDACTED = "REDACTED"

# A parameter's name, lowercased with word breaks as "_" (camelCase split,
# "-", "." and spaces too), says it holds a secret.
_SECRET_NAME = re.compile(
    r"token|secret|passw|pwd|signature|session|sessid|apikey|credential|jwt|cookie|auth(?!or(?!i[sz]))"
    r"|^x_amz_|(?:^|_)(?:key|sig|code|sid|otp|pass)(?:_|$)|(?:key|sig|code)$"
)
# Field names of structured log lines whose whole value is a credential
# (narrower: "key" or "code" alone name ordinary fields there).
_SECRET_FIELD = re.compile(r"token|secret|passw|authorization|cookie|credential|apikey|api_key|signature|^x_amz_")

# name=value after ?, & or ; or their percent-encodings (a URL inside a
# parameter): a value ends at the next separator, encoded or not, so the
# nested URL's parameters are pairs of their own.
_PAIR = re.compile(
    r"(?P<sep>[?&;]|%3[Ff]|%26)(?P<name>(?:[^=&?#;%\s\"'<>]|%(?!26|3[DdFf])){1,200}?)(?P<eq>=|%3[Dd])"
    r"(?P<value>(?:[^&?#;%\s\"'<>]|%(?!26|3[Ff]))*)"
)
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\s]*:)(?P<pw>[^@/?#\s]+)(?=@)")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_BEARER = re.compile(r"\b(?P<head>Bearer\s+)(?P<token>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]{20,}")


def secret_name(name: str) -> bool:
    """Whether a query parameter called ``name`` holds a secret (``access_token``, ``X-Amz-Signature``...)."""
    words = re.sub(r"[^a-z0-9]+", "_", _CAMEL.sub("_", unquote_plus(name)).lower()).strip("_")
    return bool(_SECRET_NAME.search(words))


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def secret_value(value: str) -> bool:
    """Whether a parameter's value looks like a secret: a JWT, a long hex key, or a long random token."""
    text = unquote_plus(value)
    if _JWT.fullmatch(text) or _HEX.fullmatch(text):
        return True
    if not _TOKEN_CHARS.fullmatch(text):
        return False
    mixed = any(c.islower() for c in text) and any(c.isupper() for c in text) and any(c.isdigit() for c in text)
    return mixed and _entropy(text) >= 3.5


def _redact_pair(match: re.Match[str]) -> str:
    sep, name, eq, value = match.group("sep", "name", "eq", "value")
    if not value:
        return match.group(0)
    if secret_name(name) or secret_value(value):
        return f"{sep}{name}{eq}{REDACTED}"
    return match.group(0)


def redact_text(text: str) -> str:
    """``text`` with the secrets in it (see the module docstring) replaced by ``REDACTED``."""
    if not text:
        return text
    text = _PAIR.sub(_redact_pair, text)
    text = _USERINFO.sub(lambda m: m.group("head") + REDACTED, text)
    text = _JWT.sub(REDACTED, text)
    text = _AWS_KEY_ID.sub(REDACTED, text)
    return _BEARER.sub(lambda m: m.group("head") + REDACTED, text)


def redact_value(value: Any, _depth: int = 0) -> Any:
    """A structured log value with every string redacted, and credential-named fields whole."""
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if _depth > 20:  # a log field is never this deep; stop rather than recurse without end
        return REDACTED
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = re.sub(r"[^a-z0-9]+", "_", _CAMEL.sub("_", str(key)).lower())
            out[key] = REDACTED if item and _SECRET_FIELD.search(name) else redact_value(item, _depth + 1)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [redact_value(item, _depth + 1) for item in value]
    # Whatever else (an exception, a path...) is written as its str(): redact that.
    return redact_text(str(value))


def json_dumps(log: dict[str, Any]) -> str:
    """The Powertools serializer: the structured line, redacted, as compact JSON."""
    return json.dumps(redact_value(log), default=str, separators=(",", ":"), ensure_ascii=False)


_install_lock = threading.Lock()


class _RedactingFactory:
    """A log record factory that redacts each record's message and exception text as it is made."""

    def __init__(self, inner: Callable[..., logging.LogRecord]) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        if isinstance(record.msg, dict) and not record.args:  # a structured message (Powertools takes dicts)
            record.msg = redact_value(record.msg)
        elif isinstance(record.msg, str) or record.args:
            try:
                message = record.getMessage()
            except Exception:  # a bad format string: logging reports it itself
                return record
            redacted = redact_text(message)
            if redacted != message:
                record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[0] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            redacted = redact_text(text)
            if redacted != text:
                # Formatters use exc_text when it is set (Powertools' is covered by json_dumps).
                record.exc_text = redacted
        return record


def install() -> None:
    """Redact every log record of this process from now on (idempotent)."""
    with _install_lock:
        current = logging.getLogRecordFactory()
        if not isinstance(current, _RedactingFactory):
            logging.setLogRecordFactory(_RedactingFactory(current))


def redacted_logs() -> dict[str, Any]:
    """Options for a handler's Powertools ``Logger``, its lines redacted; every other record is redacted too.

    ``Logger(service="fetch", **redacted_logs())``.
    """
    install()
    return {"json_serializer": json_dumps}
