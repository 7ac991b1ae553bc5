"""A local crawl through an AWS endpoint that fails a share of calls (``crawlstack.local.faulty``).

The faulty endpoint fronts a moto server and fails calls before the work
(nothing done, an error returned) and after it (done, the reply lost: a 500
or a dropped connection).  botocore's standard retry mode re-sends both,
so a conditional write may meet its own earlier write, a counter may count
twice and a message may be sent twice.  The crawl must still end with every
record present exactly once and every page fetched.

``CRAWLSTACK_FAULT_SEEDS`` (comma-separated) runs the crawl for other seeds,
to check the test is not flaky: ``CRAWLSTACK_FAULT_SEEDS=1,2,3,4,5 pytest ...``.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from webs import Crawl, assert_spacing, host_pattern, mapping, page, page_requests, star_site

from crawlstack import settings
from crawlstack.demo.server import LoopbackWeb
from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, moto_server

A, B, C = "127.0.0.2", "127.0.0.3", "127.0.0.4"
PAGES = {A: 8, B: 6, C: 5}
SEEDS = [int(s) for s in os.environ.get("CRAWLSTACK_FAULT_SEEDS", "7").split(",") if s.strip()]
# A high share, so that a small crawl meets every kind of fault many times over.
FAILURE_RATE = 0.15
# The crawl's delay, checked on each host's requests: a lease, renewal or
# release whose reply is lost is retried, and must still leave each host one
# holder at a time, the next one waiting out the delay after the last request.
DELAY = 0.2
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


@pytest.fixture
def upstream() -> Iterator[str]:
    # moto's backends are per process: start from none, not from an earlier test's hosts and queues.
    with moto_server(reset=True) as url:
        yield url


def three_hosts(web: LoopbackWeb) -> None:
    """Three star sites whose indexes link to each other (cross-host links)."""
    for host, n in PAGES.items():
        site = star_site(n)
        others = [f"{{{{url:{other}}}}}/" for other in PAGES if other != host]
        site["/"] = page("index", [f"/p{i}.html" for i in range(1, n + 1)] + others)
        web.add_host(host, site)


def scan(client: Any, table: str, crawl_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for chunk in client.get_paginator("scan").paginate(
        TableName=table, FilterExpression="crawl_id = :c", ExpressionAttributeValues={":c": {"S": crawl_id}}
    ):
        items.extend(chunk["Items"])
    return items


def stack_state(upstream: str) -> str:
    """The hosts' run items, the unfinished URLs, the backlogs and the queue depths, for a failure message."""
    ddb = boto3.client("dynamodb", endpoint_url=upstream, **CREDS)
    sqs = boto3.client("sqs", endpoint_url=upstream, **CREDS)
    lines = ["host runs:"]
    lines += [
        f"  {item}" for item in ddb.scan(TableName=settings.TABLES["hosts"].name)["Items"] if item["kind"]["S"] == "run"
    ]
    lines.append("urls not fetched:")
    lines += [
        f"  {i}" for i in ddb.scan(TableName=settings.TABLES["urls"].name)["Items"] if i["state"]["S"] != "fetched"
    ]
    backlog = ddb.scan(
        TableName=settings.TABLES["parked"].name,
        ProjectionExpression="#h, #o, n",
        ExpressionAttributeNames={"#h": "host", "#o": "order"},
    )["Items"]
    lines.append(f"backlog bundles and held rows: {backlog}")
    for queue in settings.QUEUES.values():
        url = sqs.get_queue_url(QueueName=queue.name)["QueueUrl"]
        lines.append(f"{queue.name}: {sqs.get_queue_attributes(QueueUrl=url, AttributeNames=['All'])['Attributes']}")
    return "\n".join(lines)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_crawl_through_failing_aws_calls_loses_nothing_and_duplicates_nothing(
    web: LoopbackWeb, crawl: Crawl, upstream: str, seed: int
) -> None:
    three_hosts(web)
    rules = [mapping("page", [host_pattern(h, r"/p\d+\.html") for h in PAGES], {"title": "//h1/text()"})]
    # Only a call's first two attempts fail, so botocore's retries end in
    # success: at this share, failing every attempt would drain botocore's
    # retry quota (FaultPlan.fail_attempts) and test that instead.
    plan = FaultPlan(failure_rate=FAILURE_RATE, seed=seed, after_share=0.5, throttle_share=0.1, fail_attempts=2)
    with FaultyEndpoint(upstream, plan) as faulty:
        # A page budget of exactly the web's pages: a budget counter that
        # counted a retried admission twice would skip the last pages.
        try:
            result = crawl(
                *(web.url(h, "/") for h in PAGES),
                rules=rules,
                delay=DELAY,
                max_pages=sum(PAGES.values()) + len(PAGES),
                extra=["--endpoint-url", faulty.url],
            )
        except BaseException as exc:  # pytest.fail's exception too: say what the stack held
            raise AssertionError(f"{exc}\n{stack_state(upstream)}\nfaults: {dict(faulty.faults)}") from None

    # The endpoint really failed calls, both ways, and across the services.
    assert faulty.fault_count("before") > 0 and faulty.fault_count("after") > 0, faulty.faults
    failed_services = {service for service, _, _ in faulty.faults}
    assert failed_services == {"dynamodb", "sqs", "s3"}, faulty.faults
    assert faulty.faults[("dynamodb", "PutItem", "after")] + faulty.faults[("dynamodb", "UpdateItem", "after")] > 0

    # Every page fetched exactly once: duplicated messages and redelivered
    # batches are absorbed by the urls table's conditional writes, and no
    # fetch batch failed after its requests (nothing asked a page again).
    expected = {h: ["/"] + [f"/p{i}.html" for i in range(1, n + 1)] for h, n in PAGES.items()}
    for host, paths in expected.items():
        got = Counter(e.bare_path for e in page_requests(web, host))
        assert got == Counter(paths), f"{host}: {got}"
        robots = [e for e in web.requests_for(host) if e.bare_path == "/robots.txt"]
        assert len(robots) == 1, robots
        assert_spacing(web, host, DELAY)
    assert sorted(e["outcome"] for e in result.log) == ["fetched"] * sum(len(p) for p in expected.values())

    # Every record present exactly once: in records.jsonl, ...
    want = {web.url(h, p) for h, paths in expected.items() for p in paths if p != "/"}
    urls = Counter(r["url"] for r in result.records)
    assert set(urls) == want and set(urls.values()) == {1}, urls
    assert all(r["fields"]["title"] for r in result.records)

    # ... in the endpoint's own records table and its records/ objects.
    assert result.summary is not None
    crawl_id = result.summary["crawl_id"]
    ddb = boto3.client("dynamodb", endpoint_url=upstream, **CREDS)
    table = Counter(i["url"]["S"] for i in scan(ddb, settings.TABLES["results"].name, crawl_id))
    assert set(table) == want and set(table.values()) == {1}, table
    s3 = boto3.client("s3", endpoint_url=upstream, **CREDS)
    stored: Counter[str] = Counter()
    prefix = f"{settings.RECORDS_PREFIX}crawl_id={crawl_id}/"
    for chunk in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.BUCKET_NAME, Prefix=prefix):
        for obj in chunk.get("Contents", []):
            body = gzip.decompress(s3.get_object(Bucket=settings.BUCKET_NAME, Key=obj["Key"])["Body"].read())
            stored.update(json.loads(line)["url"] for line in body.decode().splitlines())
    assert set(stored) == want and set(stored.values()) == {1}, stored
