"""The fault-injecting endpoint's pure parts: which service and operation a request is, and the fault it gets."""

from __future__ import annotations

import json

import pytest

from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, _attempt, _error, identify

SIGNED = "AWS4-HMAC-SHA256 Credential=testing/20250101/us-east-1/{}/aws4_request, SignedHeaders=host, Signature=x"


def auth(service: str) -> dict[str, str]:
    return {"Authorization": SIGNED.format(service)}


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "expected"),
    [
        (
            "POST",
            "/",
            {"X-Amz-Target": "DynamoDB_20120810.PutItem", **auth("dynamodb")},
            b"{}",
            ("dynamodb", "PutItem"),
        ),
        ("POST", "/", {"X-Amz-Target": "AmazonSQS.SendMessageBatch"}, b"{}", ("sqs", "SendMessageBatch")),
        ("POST", "/", auth("sqs"), b"Action=ReceiveMessage&Version=2012-11-05", ("sqs", "ReceiveMessage")),
        ("PUT", "/bucket/pages/a.warc.gz", auth("s3"), b"data", ("s3", "PutObject")),
        ("PUT", "/bucket/k", {**auth("s3"), "x-amz-copy-source": "bucket/j"}, b"", ("s3", "CopyObject")),
        ("GET", "/bucket/records/x.jsonl.gz", auth("s3"), b"", ("s3", "GetObject")),
        ("GET", "/bucket?list-type=2&prefix=pages%2F", auth("s3"), b"", ("s3", "ListObjectsV2")),
        ("PUT", "/bucket", auth("s3"), b"", ("s3", "CreateBucket")),
        ("PUT", "/bucket?notification", auth("s3"), b"<x/>", ("s3", "PutBucketNotificationConfiguration")),
        ("POST", "/bucket?delete", auth("s3"), b"<x/>", ("s3", "DeleteObjects")),
        ("DELETE", "/bucket/k", auth("s3"), b"", ("s3", "DeleteObject")),
        ("GET", "/", auth("s3"), b"", ("s3", "ListBuckets")),
    ],
)
def test_identify_names_service_and_operation(
    method: str, path: str, headers: dict[str, str], body: bytes, expected: tuple[str, str]
) -> None:
    assert identify(method, path, headers, body) == expected


def test_error_shapes_follow_each_protocol() -> None:
    status, ctype, body = _error("dynamodb", {"X-Amz-Target": "DynamoDB_20120810.GetItem"}, b"", throttle=False)
    assert (status, ctype) == (500, "application/x-amz-json-1.0")
    assert json.loads(body)["__type"].endswith("#InternalServerError")
    status, _, body = _error("sqs", {"X-Amz-Target": "AmazonSQS.SendMessage"}, b"", throttle=True)
    assert status == 400 and json.loads(body)["__type"].endswith("#ThrottlingException")
    status, _, body = _error("s3", {}, b"", throttle=False)
    assert status == 500 and b"<Code>InternalError</Code>" in body
    status, _, body = _error("s3", {}, b"", throttle=True)
    assert status == 503 and b"<Code>SlowDown</Code>" in body
    status, _, body = _error("sqs", {}, b"Action=SendMessage", throttle=False)
    assert status == 500 and body.startswith(b"<ErrorResponse>")


def test_attempt_is_read_from_the_sdk_header() -> None:
    assert _attempt({"amz-sdk-request": "attempt=3; max=5"}) == 3
    assert _attempt({}) == 1


def test_a_plan_refuses_shares_outside_0_to_1() -> None:
    with pytest.raises(ValueError, match="failure_rate"):
        FaultPlan(failure_rate=1.5)


def test_faults_follow_the_plan_and_every_call_is_counted() -> None:
    endpoint = FaultyEndpoint("http://127.0.0.1:9", FaultPlan(failure_rate=0.3, seed=3, after_share=0.5))
    try:
        decided = [endpoint._decide("dynamodb", "PutItem", attempt=1) for _ in range(2000)]
        again = FaultyEndpoint("http://127.0.0.1:9", FaultPlan(failure_rate=0.3, seed=3, after_share=0.5))
        try:
            assert [again._decide("dynamodb", "PutItem", attempt=1) for _ in range(2000)] == decided  # seeded
        finally:
            again._server.server_close()
        failed = [d for d in decided if d is not None]
        assert endpoint.calls[("dynamodb", "PutItem")] == 2000
        assert 500 < len(failed) < 700  # about 30%
        assert endpoint.fault_count("before") == sum(d.startswith("before") for d in failed)
        assert endpoint.fault_count("after") == 0  # counted only once a successful reply is really lost
        assert {d.split("-")[0] for d in failed} == {"before", "after"}
        # Exempt operations, later attempts past fail_attempts, and lost ReceiveMessage replies are spared.
        endpoint.plan = FaultPlan(failure_rate=1.0, exempt=frozenset({"s3:GetObject"}), fail_attempts=2)
        assert endpoint._decide("s3", "GetObject", attempt=1) is None
        assert endpoint._decide("s3", "PutObject", attempt=3) is None
        assert endpoint._decide("s3", "PutObject", attempt=2) is not None
        endpoint.plan = FaultPlan(failure_rate=1.0, after_share=1.0)
        assert str(endpoint._decide("sqs", "ReceiveMessage", attempt=1)).startswith("before")
    finally:
        endpoint._server.server_close()
