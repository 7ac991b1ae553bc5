"""``--endpoint-url``: the same local crawl against an external AWS-compatible endpoint (a moto server)."""

from __future__ import annotations

import socket
from pathlib import Path

import boto3
import pytest
from webs import UA, Crawl, assert_spacing, bare_paths, star_site

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb

A, B = "127.0.0.2", "127.0.0.3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_crawl_through_an_external_endpoint(web: LoopbackWeb, crawl: Crawl, moto_server: str) -> None:
    endpoint = moto_server
    web.add_host(A, star_site(3))
    web.add_host(B, star_site(2))
    result = crawl(web.url(A, "/"), web.url(B, "/"), delay=0.2, extra=["--endpoint-url", endpoint])

    assert sorted(bare_paths(web, A)) == ["/", "/p1.html", "/p2.html", "/p3.html", "/robots.txt"]
    assert sorted(bare_paths(web, B)) == ["/", "/p1.html", "/p2.html", "/robots.txt"]
    assert all(r.user_agent == UA for r in web.log)
    assert_spacing(web, A, 0.2)
    assert sum(1 for e in result.log if e["outcome"] == "fetched") == 7
    assert result.summary is not None and result.summary["emulator"] is None  # nothing embedded to count

    # The stack's resources now exist on the endpoint itself, and hold this crawl's state.
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    ddb = boto3.client("dynamodb", endpoint_url=endpoint, **creds)
    assert settings.TABLES["urls"].name in ddb.list_tables()["TableNames"]
    assert ddb.scan(TableName=settings.TABLES["urls"].name, Select="COUNT")["Count"] == 7

    # A second crawl on the same endpoint is a new crawl: nothing deduped away by the first.
    again = crawl(web.url(A, "/"), delay=0.2, extra=["--endpoint-url", endpoint])
    assert sum(1 for e in again.log if e["outcome"] == "fetched") == 4


def test_an_unreachable_endpoint_is_one_line_and_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from crawlstack.cli import main

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    argv = ["crawl", "--local", "http://127.0.0.2:9/", "--endpoint-url", closed, "--out", str(tmp_path / "out")]
    assert main([*argv, "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    head = f"crawlstack: error: AWS endpoint {closed} unreachable or failing: "
    assert len(err) == 1 and err[0].startswith(head), err
