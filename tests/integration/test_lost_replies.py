"""The AWS adapters when a reply is lost: every call is done, its reply replaced by a 500, and retried.

The faulty endpoint (``crawlstack.local.faulty``) in front of a moto server
makes it deterministic: with ``failure_rate=1``, ``after_share=1`` and
``fail_attempts=1`` every call's first attempt does the work and loses the
reply, and botocore's retry goes through.  A conditional write's retry then
meets its own write; it must still report success, and a second, separate
call must still be refused.  The endpoint's error shapes are checked here
too: botocore retries each of them.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from crawlstack import aws, jobs, settings
from crawlstack.config import CrawlConfig
from crawlstack.local import resources
from crawlstack.local.faulty import FaultPlan, FaultyEndpoint, moto_server
from crawlstack.messages import FetchTask, FrontierMessage
from crawlstack.runs.ports import Bundle
from crawlstack.watch import scheduler
from crawlstack.watch.check import event_id
from crawlstack.watch.sources import Source

CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
# Every call: done upstream, then its reply lost (a 500); the retry gets through.
LOSE_EVERY_REPLY = FaultPlan(
    failure_rate=1.0, after_share=1.0, drop_share=0.0, fail_attempts=1, after_exempt=frozenset()
)


@pytest.fixture(scope="module")
def served() -> Iterator[FaultyEndpoint]:
    """One moto server for the module, the stack's resources on it, a faulty endpoint before it."""
    with (
        # moto's backends are per process: start from none, not from queues an earlier test made otherwise.
        moto_server(reset=True) as upstream,
        FaultyEndpoint(upstream, FaultPlan(failure_rate=0.0)) as endpoint,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_ENDPOINT_URL", endpoint.url)
        aws.reset_clients()
        for key, value in resources.create_all(visibility_timeout=30, exist_ok=True).items():
            env.setenv(key, value)
        try:
            yield endpoint
        finally:
            aws.reset_clients()


@pytest.fixture
def faulty(served: FaultyEndpoint) -> Iterator[FaultyEndpoint]:
    """The endpoint losing every reply, its counts from zero."""
    served.calls.clear()
    served.faults.clear()
    served.plan = LOSE_EVERY_REPLY
    aws.reset_clients()  # fresh clients: a fresh retry quota
    try:
        yield served
    finally:
        served.plan = FaultPlan(failure_rate=0.0)


@pytest.fixture
def stack_names(served: FaultyEndpoint) -> aws.StackNames:
    """The names of what ``served`` created (its environment), not of conftest's emulated stack."""
    return aws.StackNames.from_env()


def unique(name: str) -> str:
    """An id no other test in this process used (they share moto's backends)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def lost(endpoint: FaultyEndpoint, operation: str) -> int:
    return endpoint.faults[("dynamodb", operation, "after")]


def test_a_retried_url_claim_and_unclaim_find_their_own_writes(
    faulty: FaultyEndpoint, stack_names: aws.StackNames
) -> None:
    c = unique("c")
    urls = aws.UrlStore(stack_names.urls)
    assert urls.claim(c, "fp1", "http://a.test/", 0, record_id="r")  # no claimer: only the token tells
    assert not urls.claim(c, "fp1", "http://a.test/", 0)  # a second claim is a dedupe hit
    assert lost(faulty, "PutItem") == 1  # only the first claim succeeded: only its reply was lost

    assert urls.state(c, "fp1") == "queued"

    assert urls.claim(c, "fp2", "http://a.test/2", 0, record_id="r")
    assert urls.unclaim(c, "fp2", "r", "record complete", stale_before=0.0)
    assert not urls.unclaim(c, "fp2", "r", "record complete", stale_before=0.0)
    assert urls.state(c, "fp2") == "skipped"

    assert urls.note_skip(c, "fp3", "http://a.test/3", 1, "record complete")
    assert not urls.note_skip(c, "fp3", "http://a.test/3", 1, "record complete")


def test_a_retried_page_budget_counts_once(faulty: FaultyEndpoint, stack_names: aws.StackNames) -> None:
    c = unique("c")
    crawls = aws.CrawlStore(stack_names.crawls)
    crawls.put(CrawlConfig(crawl_id=c, max_pages=2))
    assert crawls.count_page(c, 2)
    assert crawls.count_page(c, 2)  # the budget's last page: the retry must not find it spent
    assert not crawls.count_page(c, 2)
    ddb = aws.client("dynamodb")
    item = ddb.get_item(TableName=settings.TABLES["crawls"].name, Key={"crawl_id": {"S": c}})["Item"]
    assert item["pages_admitted"] == {"N": "2"}


def test_a_retried_count_of_logged_outcomes_counts_once(faulty: FaultyEndpoint, stack_names: aws.StackNames) -> None:
    c = unique("c")
    crawls = aws.CrawlStore(stack_names.crawls)
    crawls.count_logged(c, {"fetched": 3, "skipped": 1})
    crawls.count_logged(c, {"fetched": 2})
    ddb = aws.client("dynamodb")
    item = ddb.get_item(TableName=settings.TABLES["crawls"].name, Key={"crawl_id": {"S": c}})["Item"]
    assert (item["logged_fetched"], item["logged_skipped"]) == ({"N": "5"}, {"N": "1"})


def test_a_retried_budget_chunk_counts_once_and_says_what_was_admitted(
    faulty: FaultyEndpoint, stack_names: aws.StackNames
) -> None:
    c = unique("c")
    crawls = aws.CrawlStore(stack_names.crawls)
    crawls.put(CrawlConfig(crawl_id=c, max_pages=10))
    assert crawls.take_pages(c, 10, 4) == 4
    assert crawls.take_pages(c, 10, 6) == 10  # the budget's last pages: the retry must not find them spent
    assert crawls.take_pages(c, 10, 1) is None
    assert crawls.take_pages(c, 10, 11) is None


def test_a_retried_host_page_count_counts_once(faulty: FaultyEndpoint, stack_names: aws.StackNames) -> None:
    c = unique("c")
    scope = aws.ScopeStore(stack_names.hosts, stack_names.urls)
    assert scope.count_host_page(c, "trap.test", 2)
    assert scope.count_host_page(c, "trap.test", 2)  # the host's last page: the retry must not find it spent
    assert not scope.count_host_page(c, "trap.test", 2)
    ddb = aws.client("dynamodb")
    key = {"host": {"S": "trap.test"}, "kind": {"S": f"pages#{c}"}}
    assert ddb.get_item(TableName=settings.TABLES["hosts"].name, Key=key)["Item"]["pages_admitted"] == {"N": "2"}


def test_a_retried_backlog_write_and_hold_find_their_own_writes(
    faulty: FaultyEndpoint, stack_names: aws.StackNames
) -> None:
    h, c = unique("h"), unique("c")
    backlog = aws.BacklogStore(stack_names.parked)
    tasks = [FetchTask(f"http://{h}/{i}", f"fp{i}", h, 1, c, 0.0) for i in range(3)]
    [key] = backlog.add(h, 1, tasks)
    assert lost(faulty, "BatchWriteItem") == 1
    # The retry wrote the same bundle under the same key: one copy of each task waits.
    assert backlog.peek(h, 10) == [Bundle(h, key, tuple(tasks))]
    # A partly served bundle's rewrite, conditional on the bundle being there, meets its own write.
    backlog.replace(h, key, tasks[1:])
    assert backlog.peek(h, 10) == [Bundle(h, key, tuple(tasks[1:]))]
    assert lost(faulty, "PutItem") == 1
    backlog.delete(h, key)
    assert backlog.peek(h, 10) == []
    # Once served and deleted, a late rewrite (another holder's) does not bring it back.
    backlog.replace(h, key, tasks[2:])
    assert backlog.peek(h, 10) == []

    crawls = aws.CrawlStore(stack_names.crawls)
    crawls.put(CrawlConfig(crawl_id=c))
    held = aws.HeldStore(stack_names.parked, stack_names.crawls)
    jobs.stop(c, crawls)
    assert held.hold(c, "t#fp1", tasks[1].to_json())  # the retry's transaction holds the same row again
    assert held.held(c, 10) == [("t#fp1", tasks[1].to_json())]
    assert lost(faulty, "TransactWriteItems") == 1
    crawls.set_state(c, jobs.RUNNING)
    assert not held.hold(c, "t#fp2", tasks[2].to_json())  # the crawl runs: a hold, retried or not, is refused
    assert held.held(c, 10) == [("t#fp1", tasks[1].to_json())]


@pytest.mark.parametrize(
    "plan",
    [
        FaultPlan(failure_rate=1.0, after_share=0.0, throttle_share=0.0, fail_attempts=1),
        FaultPlan(failure_rate=1.0, after_share=0.0, throttle_share=1.0, fail_attempts=1),
        FaultPlan(failure_rate=1.0, after_share=1.0, drop_share=0.0, fail_attempts=1),
        FaultPlan(failure_rate=1.0, after_share=1.0, drop_share=1.0, fail_attempts=1),
    ],
    ids=["before-500", "before-throttle", "after-500", "after-drop"],
)
def test_botocore_retries_every_fault_shape_and_after_faults_did_the_work(
    faulty: FaultyEndpoint, plan: FaultPlan
) -> None:
    faulty.plan = plan
    config = aws.connection._CONFIG
    clients = {s: boto3.client(s, endpoint_url=faulty.url, config=config, **CREDS) for s in ("dynamodb", "sqs", "s3")}
    queue = clients["sqs"].create_queue(QueueName=unique("q"))["QueueUrl"]
    calls: list[dict[str, Any]] = [
        clients["dynamodb"].put_item(TableName=settings.TABLES["results"].name, Item={"pk": {"S": "x"}}),
        clients["sqs"].send_message_batch(QueueUrl=queue, Entries=[{"Id": "0", "MessageBody": "m"}]),
        clients["s3"].put_object(Bucket=settings.BUCKET_NAME, Key="k", Body=b"data"),
    ]
    assert [c["ResponseMetadata"]["RetryAttempts"] for c in calls] == [1, 1, 1]
    # Done once before the fault, or twice when the first attempt's reply was lost: SQS shows which.
    faulty.plan = FaultPlan(failure_rate=0.0)
    sent = clients["sqs"].get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    assert sent["Attributes"]["ApproximateNumberOfMessages"] == ("2" if plan.after_share else "1")
    kind = "after" if plan.after_share else "before"
    assert faulty.fault_count(kind) == 4 and faulty.fault_count("before" if plan.after_share else "after") == 0
    assert {(s, op) for s, op, _ in faulty.faults} == {
        ("sqs", "CreateQueue"),
        ("dynamodb", "PutItem"),
        ("sqs", "SendMessageBatch"),
        ("s3", "PutObject"),
    }


def bus_to_queue() -> tuple[str, str]:
    """A new event bus whose rule sends every ``crawlstack.item`` to a new queue, as a user's rule would."""
    events, sqs = aws.client("events"), aws.client("sqs")
    name = unique("items")
    events.create_event_bus(Name=name)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = {"source": [settings.EVENT_SOURCE], "detail-type": [settings.EVENT_DETAIL_TYPE]}
    events.put_rule(Name=name, EventBusName=name, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=name, Targets=[{"Id": "queue", "Arn": arn}])
    return name, url


def event_ids(url: str) -> Counter[str]:
    sqs, seen = aws.client("sqs"), Counter[str]()
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300).get("Messages"):
        seen.update(json.loads(m["Body"])["detail"]["event_id"] for m in got)
    return seen


def test_a_lost_put_events_reply_gives_one_duplicate_with_the_same_event_id(
    served: FaultyEndpoint, stack_names: aws.StackNames
) -> None:
    bus, url = bus_to_queue()
    source = unique("s")
    events = {i: {"event_id": event_id(source, i), "source_id": source, "identity": i} for i in ("a", "b", "c")}
    seen = aws.SeenItems(stack_names.watch, aws.EventBus(bus, aws.BlobStore(stack_names.bucket)).publish)
    served.calls.clear()
    served.faults.clear()
    served.plan = LOSE_EVERY_REPLY
    aws.reset_clients()
    try:
        assert seen.record_page(source, "slot p1", ["a", "b", "c"], events, 1.0) == dict.fromkeys("abc", "slot p1")
    finally:
        served.plan = FaultPlan(failure_rate=0.0)
    lost_puts = served.faults[("events", "PutEvents", "after")]
    assert lost_puts == 1  # the three events went in one PutEvents, whose reply was lost and retried
    # Each event came twice: once per attempt of the call whose reply was lost, no more.
    assert event_ids(url) == {events[i]["event_id"]: 1 + lost_puts for i in "abc"}
    # The page delivered again: the same items are new, and nothing is published twice more.
    assert seen.record_page(source, "slot p1", ["a", "b", "c"], events, 2.0) == dict.fromkeys("abc", "slot p1")
    page = seen.record_page(source, "slot2 p1", ["c", "d"], {**events, "d": {"event_id": "d"}}, 3.0)
    assert page == {"c": "slot p1", "d": "slot2 p1"}
    assert event_ids(url) == {"d": 1}


def test_a_watch_tick_whose_every_reply_is_lost_plans_once_and_sends_each_check_once(
    served: FaultyEndpoint, stack_names: aws.StackNames
) -> None:
    table = unique("watch")
    aws.client("dynamodb").create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    sources = aws.DynamoSources(table)
    sources.add_all([Source(f"s{n}", f"http://127.0.0.2/{n}", "listing", priority_max=48.5) for n in range(2)])
    store = aws.DynamoWatch(table, aws.BlobStore(stack_names.bucket))
    sent: list[str] = []
    t0 = 1_790_000_000.0
    served.calls.clear()
    served.faults.clear()
    served.plan = LOSE_EVERY_REPLY
    aws.reset_clients()
    try:
        assert scheduler.tick(sources, store, sent.extend, t0, t0, None, 3600.0).planned == 96
        assert scheduler.tick(sources, store, sent.extend, t0 + 3600, t0 + 3600, None, 3600.0).sent == 4
        assert scheduler.tick(sources, store, sent.extend, t0 + 3610, t0 + 3610, None, 3600.0).sent == 0
    finally:
        served.plan = FaultPlan(failure_rate=0.0)
    assert served.faults[("dynamodb", "UpdateItem", "after")] > 0  # the conditional writes met their own retries
    slots = [(c.source_id, c.slot) for c in (FrontierMessage.from_json(b).check for b in sent) if c is not None]
    assert len(slots) == len(set(slots)) == 4
    tokens = {sid: state.tokens for sid, (state, _) in store.states().items()}
    # None to start, 48.5 earned, 48 planned, half a token banked: spent once (twice would leave -47.5).
    assert tokens == {"s0": 0.5, "s1": 0.5}
