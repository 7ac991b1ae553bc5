"""``aws.Connection``: the clients of one region and endpoint, each made once; the environment left alone."""

from __future__ import annotations

import os

import pytest

from crawlstack import aws
from crawlstack.local import runner
from crawlstack.local.emulator import EmbeddedAws


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")


def test_the_clis_connection_has_its_flags_region_and_endpoint_and_keeps_its_clients() -> None:
    connection = aws.Connection("eu-west-1", "http://127.0.0.1:9")
    sqs = connection.client("sqs")
    assert (sqs.meta.region_name, sqs.meta.endpoint_url) == ("eu-west-1", "http://127.0.0.1:9")
    assert connection.client("sqs") is sqs  # made once: a Lambda container's clients are reused
    connection.reset()
    assert connection.client("sqs") is not sqs


def test_the_environments_connection_reads_what_boto3_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:7")
    environment = aws.Connection()
    sqs = environment.client("sqs")
    assert (sqs.meta.region_name, sqs.meta.endpoint_url) == ("ap-south-1", "http://127.0.0.1:7")


def test_a_local_crawls_endpoint_is_reached_without_writing_the_environment() -> None:
    before = dict(os.environ)
    connection = runner._connection("http://127.0.0.1:8", None)
    ddb = connection.client("dynamodb")
    assert (ddb.meta.region_name, ddb.meta.endpoint_url) == ("ap-south-1", "http://127.0.0.1:8")
    assert ddb._request_signer._credentials.access_key == "testing"  # an emulator takes any key
    assert dict(os.environ) == before


def test_moto_in_this_process_is_reached_whatever_endpoint_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:7")  # moto answers AWS's own endpoints only
    before = dict(os.environ)
    with EmbeddedAws() as embedded:
        assert runner._connection(None, embedded) is embedded.connection
        sqs = embedded.connection.client("sqs")
        assert (sqs.meta.region_name, sqs.meta.endpoint_url) == ("us-east-1", "https://sqs.us-east-1.amazonaws.com")
        assert sqs.list_queues().get("QueueUrls", []) == []
    assert dict(os.environ) == before
