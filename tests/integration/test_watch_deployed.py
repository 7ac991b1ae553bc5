"""The deployed watch on moto: the schedule function's ticks, and new items put on an EventBridge bus.

The schedule function runs as Lambda would run it, on the emulated stack's
tables and queues, at the times the test sets.  Events are read from an SQS
queue that a rule on the bus targets, as a user's own rule would.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from crawlstack import aws, settings, wiring
from crawlstack.crawllog import iso_time
from crawlstack.local.pump import LambdaContext
from crawlstack.messages import FrontierMessage
from crawlstack.watch.check import event_id
from crawlstack.watch.pages import WATCH_CRAWL_ID
from crawlstack.watch.sources import Source
from functions.schedule import handler as schedule

T0 = 1_790_000_000.0
HOST = "http://127.0.0.2"


def context() -> LambdaContext:
    spec = settings.FUNCTIONS["schedule"]
    return LambdaContext("crawlstack-schedule", spec.memory_mb, spec.timeout_seconds)


def drain(url: str) -> list[dict[str, Any]]:
    sqs, out = aws.client("sqs"), []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            return out
        out += got
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
        )


@pytest.fixture
def watch(stack: dict[str, str], stack_names: aws.StackNames, monkeypatch: pytest.MonkeyPatch) -> aws.StackNames:
    """Three busy sources on one host: 48 checks a day each, a check of the host every 10 minutes."""
    sources = [Source(f"s{n}", f"{HOST}/listing/{n}", "listing", priority_max=24.0) for n in range(3)]
    aws.DynamoSources(stack_names.watch).add_all(sources)
    return stack_names


def tick_at(monkeypatch: pytest.MonkeyPatch, at: float) -> dict[str, Any]:
    monkeypatch.setattr(schedule, "clock", lambda: at)
    result: dict[str, Any] = schedule.handler({}, context())
    return result


def checks_in(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    found = []
    for message in messages:
        body = FrontierMessage.from_json(message["Body"])
        assert body.crawl_id == WATCH_CRAWL_ID and body.check is not None and body.check.page == 1
        found.append((body.check.source_id, body.check.slot))
    return found


def test_a_repeated_invocation_within_a_minute_sends_no_check_twice(
    watch: aws.StackNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = tick_at(monkeypatch, T0)
    assert first["planned"] == 3 * 48 and first["sent"] == 0
    # An hour on: the host's checks at 5, 15, ... 55 minutes are due; the invocation comes twice.
    assert tick_at(monkeypatch, T0 + 3600)["sent"] == 6
    assert tick_at(monkeypatch, T0 + 3610)["sent"] == 0
    sent = checks_in(drain(watch.frontier_queue))
    assert len(sent) == 6 and len(set(sent)) == 6
    # The watch crawl reads checked pages only: no link is followed from them.
    config = aws.CrawlStore(watch.crawls, cache_seconds=0).get(WATCH_CRAWL_ID)
    assert (config.max_depth, config.max_pages_per_host) == (0, None)  # None: no cap


def test_a_check_whose_send_failed_is_sent_once_its_claim_is_old(
    watch: aws.StackNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    tick_at(monkeypatch, T0)
    queue = wiring.services().frontier_queue
    send = queue.send

    def refused(bodies: Any) -> None:
        raise aws.SendFailed("SQS refused the batch")

    monkeypatch.setattr(queue, "send", refused)
    with pytest.raises(aws.SendFailed):
        tick_at(monkeypatch, T0 + 600)  # the check at 5 minutes is claimed, and its send fails
    monkeypatch.setattr(queue, "send", send)
    # Claimed a minute ago by the invocation that failed: not sent yet...
    assert tick_at(monkeypatch, T0 + 660)["sent"] == 0
    # ...and sent once its claim is old, beside the check that fell due meanwhile.
    assert tick_at(monkeypatch, T0 + 600 + settings.WATCH_CLAIM_SECONDS + 1)["sent"] == 2
    slots = [slot for _, slot in checks_in(drain(watch.frontier_queue))]
    assert sorted(slots) == [iso_time(T0 + 300), iso_time(T0 + 900)]


def test_an_event_over_the_size_limit_goes_out_as_a_pointer_to_its_whole_text(stack_names: aws.StackNames) -> None:
    events, sqs = aws.client("events"), aws.client("sqs")
    events.create_event_bus(Name="items")
    url = sqs.create_queue(QueueName="items")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all", EventBusName="items", EventPattern=json.dumps({"source": [settings.EVENT_SOURCE]}))
    events.put_targets(Rule="all", EventBusName="items", Targets=[{"Id": "queue", "Arn": arn}])
    bus = aws.EventBus("items", aws.BlobStore(stack_names.bucket))
    small = {"event_id": event_id("s", "a"), "source_id": "s", "identity": "a", "fields": {"title": "short"}}
    under, big = sized("u", settings.EVENT_MAX_BYTES - 1), sized("b", settings.EVENT_MAX_BYTES)
    bus.publish([small, under, big])
    details = {d["event_id"]: d for d in (json.loads(m["Body"])["detail"] for m in drain(url))}
    assert details[small["event_id"]] == small and details[under["event_id"]] == under
    pointer = details[big["event_id"]]
    assert pointer["oversize"] is True and "fields" not in pointer and pointer["mapping"] == "listing"
    where = pointer["detail_s3"]
    assert where["key"].startswith(settings.EVENTS_PREFIX)
    assert json.loads(aws.BlobStore(where["bucket"]).get(where["key"])) == big
    assert bus.take_counts() == (3, 1)


def sized(identity: str, entry_bytes: int) -> dict[str, Any]:
    """An event whose PutEvents entry is ``entry_bytes`` long, as EventBridge counts it."""
    event = {"event_id": event_id("s", identity), "source_id": "s", "identity": identity, "mapping": "listing"}
    event["fields"] = {"body": ""}
    room = (
        entry_bytes
        - len(settings.EVENT_SOURCE)
        - len(settings.EVENT_DETAIL_TYPE)
        - len(json.dumps(event, ensure_ascii=False))
    )
    event["fields"] = {"body": "é" * (room // 2) + "x" * (room % 2)}  # two bytes each in UTF-8
    detail = json.dumps(event, ensure_ascii=False)
    assert (
        aws.events.entry_size(
            {"Source": settings.EVENT_SOURCE, "DetailType": settings.EVENT_DETAIL_TYPE, "Detail": detail}
        )
        == entry_bytes
    )
    return event
