"""The handlers' logs on the embedded emulator: secrets in URLs redacted, no page body, data outputs untouched.

A page whose URL carries a token and whose body carries a marker goes
through dispatch, fetch and extract; everything the three handlers' loggers
(at DEBUG) and the root logger (at INFO, as Lambda's runtime has it) write is
captured.  Also: a WARC object that cannot be read is a failed item with one
log line saying why, and nothing is written for it.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_handlers
from test_handlers import BOOK_RULE, Site, context, drain, s3_event, seed, sqs_event

from crawlstack import aws, settings
from crawlstack.fetch.warc import read_warc
from functions.dispatch import handler as dispatch
from functions.extract import handler as extract
from functions.fetch import handler as fetch

# test_handlers' fixtures: the stack on the emulator with its book rule, and a page server on 127.0.0.2.
stack = test_handlers.stack
site = test_handlers.site

MARKER = "BODYMARKER-q7Zx"
TOKEN = "SEKRIT-a1B2c3D4e5"


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """Every line the handlers' Powertools loggers (DEBUG) and the root logger (INFO) write."""
    out = io.StringIO()
    saved = []
    for name in ("dispatch", "fetch", "extract"):
        std = logging.getLogger(name)
        handler = logging.StreamHandler(out)
        handler.setFormatter(std.handlers[0].formatter)  # the Powertools formatter, serializer included
        saved.append((std, std.level, handler))
        std.addHandler(handler)
        std.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root_handler = logging.StreamHandler(out)
    root_handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root_level = root.level
    root.addHandler(root_handler)
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(root_handler)
        root.setLevel(root_level)
        for std, level, handler in saved:
            std.removeHandler(handler)
            std.setLevel(level)


def test_logs_redact_tokens_and_hold_no_page_body_while_the_data_keeps_the_url(
    stack: dict[str, str],
    site: Site,
    logs: io.StringIO,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stack_names: aws.StackNames,
) -> None:
    # The stack's book rule wants URLs ending in .html; this one takes a query too.
    rule = {**BOOK_RULE, "url_patterns": [{"type": "regex", "pattern": r"/books/secret\.html"}]}
    (tmp_path / "secret.json").write_text(json.dumps(rule), encoding="utf-8")
    monkeypatch.setenv(settings.ENV_RULES_DIR, str(tmp_path))  # read by the first handler call
    path = f"/books/secret.html?access_token={TOKEN}"
    url = site.page(path, f"Title {MARKER}", f"/books/next.html?sig={TOKEN}")
    site.page("/books/next.html", "next")
    assert dispatch.handler(sqs_event(stack, "frontier", seed(url)), context("dispatch")) == {"batchItemFailures": []}
    tasks = [m["Body"] for m in drain(stack, "fetch")]
    assert len(tasks) == 1
    assert fetch.handler(sqs_event(stack, "fetch", *tasks), context("fetch")) == {"batchItemFailures": []}
    notes = [m["Body"] for m in drain(stack, "extract")]
    assert extract.handler(sqs_event(stack, "extract", *notes), context("extract")) == {"batchItemFailures": []}

    text = logs.getvalue()
    assert "REDACTED" in text  # the lines about the URL were written, with the token replaced
    assert TOKEN not in text
    assert MARKER not in text

    # The data is the user's: the WARC, the records and the crawl log keep the real URL.
    blobs = aws.BlobStore(stack_names.bucket)
    (warc_key,) = blobs.keys(settings.PAGES_PREFIX)
    (page,) = read_warc(blobs.get(warc_key))
    assert TOKEN in page.url and MARKER.encode() in page.body
    (records_key,) = blobs.keys(settings.RECORDS_PREFIX)
    (record,) = [json.loads(line) for line in gzip.decompress(blobs.get(records_key)).splitlines()]
    assert TOKEN in record["url"] and record["fields"]["title"] == f"Title {MARKER}"
    (log_key,) = blobs.keys("crawl-log/")
    assert TOKEN in gzip.decompress(blobs.get(log_key)).decode()
    outlinks = [json.loads(m["Body"])["url"] for m in drain(stack, "frontier")]
    assert any(TOKEN in link for link in outlinks)


def test_an_unreadable_warc_fails_its_item_with_one_line_and_writes_nothing(
    stack: dict[str, str], logs: io.StringIO, stack_names: aws.StackNames
) -> None:
    key = "pages/dt=2024-01-02/broken.warc.gz"
    aws.BlobStore(stack_names.bucket).put(
        key, gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n")[:-4], "application/warc"
    )
    test_event = json.dumps({"Event": "s3:TestEvent"})  # so not the whole batch fails
    event = sqs_event(stack, "extract", s3_event(settings.BUCKET_NAME, key), test_event, ids=["m-broken", "m-test"])
    assert extract.handler(event, context("extract")) == {"batchItemFailures": [{"itemIdentifier": "m-broken"}]}
    lines = [json.loads(line) for line in logs.getvalue().splitlines() if line.startswith("{")]
    unreadable = [line for line in lines if line.get("message") == "unreadable WARC"]
    assert [(line["level"], line["warc"]) for line in unreadable] == [("ERROR", key)]
    assert unreadable[0]["reason"] == "unreadable WARC (EOFError): gzip member cut short"
    assert list(aws.BlobStore(stack_names.bucket).keys(settings.RECORDS_PREFIX)) == []
    assert drain(stack, "frontier") == []
