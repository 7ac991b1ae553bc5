"""The deployed watch on moto: the schedule function's ticks, and new items put on an EventBridge bus.

The schedule function runs as Lambda would run it, on the emulated stack's
tables and queues, at the times the test sets.  Events are read from an SQS
queue that a rule on the bus targets, as a user's own rule would.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from drains import drain

from crawlstack import aws, settings
from crawlstack.aws import plan as plan_module
from crawlstack.aws import seen as seen_module
from crawlstack.fetch.crawllog import iso_time
from crawlstack.local.pump import LambdaContext
from crawlstack.messages import FrontierMessage
from crawlstack.watch.check import event_id
from crawlstack.watch.pages import WATCH_CRAWL_ID
from crawlstack.watch.schedule import DAY, SourceState, check_ended
from crawlstack.watch.sources import Source
from functions import container
from functions.schedule import handler as schedule

T0 = 1_790_000_000.0
HOST = "http://127.0.0.2"


def context() -> LambdaContext:
    spec = settings.FUNCTIONS["schedule"]
    return LambdaContext("crawlstack-schedule", spec.memory_mb, spec.timeout_seconds)


@pytest.fixture
def watch(stack: dict[str, str], stack_names: aws.StackNames, monkeypatch: pytest.MonkeyPatch) -> aws.StackNames:
    """Three busy sources on one host: 48 checks a day each, a check of the host every 10 minutes."""
    sources = [Source(f"s{n}", f"{HOST}/listing/{n}", "listing", priority_max=48.0) for n in range(3)]
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
    # The host's checks at 5 and 15 minutes fall due; each minute's invocation comes twice.
    for at in (T0 + 300, T0 + 900):
        assert tick_at(monkeypatch, at)["sent"] == 1
        assert tick_at(monkeypatch, at + 10)["sent"] == 0
    sent = checks_in(drain(watch.frontier_queue))
    assert len(sent) == 2 and len(set(sent)) == 2
    # The watch crawl reads checked pages only: no link is followed from them.
    config = aws.CrawlStore(watch.crawls, cache_seconds=0).get(WATCH_CRAWL_ID)
    assert (config.max_depth, config.max_pages_per_host) == (0, None)  # None: no cap


@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_a_check_whose_send_failed_is_sent_once_its_claim_is_old(
    watch: aws.StackNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    tick_at(monkeypatch, T0)
    queue = container.services().frontier_queue
    send = queue.send

    def refused(bodies: Any) -> None:
        raise aws.SendFailed("SQS refused the batch")

    monkeypatch.setattr(queue, "send", refused)
    with pytest.raises(aws.SendFailed):
        tick_at(monkeypatch, T0 + 600)  # the check at 5 minutes is claimed, and its send fails
    monkeypatch.setattr(queue, "send", send)
    # Claimed a minute ago by the invocation that failed: not sent yet...
    assert tick_at(monkeypatch, T0 + 660)["sent"] == 0
    # ...and sent once its claim is old.  Waiting, it moved the plan later: the check at 15 minutes
    # keeps its 10 minutes after it rather than going out beside it.
    resent = T0 + 600 + settings.WATCH_CLAIM_SECONDS + 1
    assert tick_at(monkeypatch, resent)["sent"] == 1
    assert tick_at(monkeypatch, resent + 540)["sent"] == 0
    assert tick_at(monkeypatch, resent + 600)["sent"] == 1
    slots = [slot for _, slot in checks_in(drain(watch.frontier_queue))]
    assert slots == [iso_time(T0 + 300), iso_time(T0 + 900)]


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


def bus_queue(name: str) -> str:
    """A bus named ``name`` whose rule sends its items to a queue of the same name; the queue's URL."""
    events, sqs = aws.client("events"), aws.client("sqs")
    events.create_event_bus(Name=name)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventBusName=name, EventPattern=json.dumps({"source": [settings.EVENT_SOURCE]}))
    events.put_targets(Rule=name, EventBusName=name, Targets=[{"Id": "queue", "Arn": arn}])
    return url


def test_a_page_whose_publishing_failed_midway_publishes_only_the_rest_when_delivered_again(
    stack_names: aws.StackNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = bus_queue("midway")
    identities = [f"i{n:02d}" for n in range(15)]
    events = {i: {"event_id": event_id("s", i), "source_id": "s", "identity": i} for i in identities}
    bus = aws.EventBus("midway", aws.BlobStore(stack_names.bucket))
    seen = aws.SeenItems(stack_names.watch, bus.publish)
    client, put = aws.client("events"), aws.client("events").put_events
    calls: list[int] = []

    def second_put_fails(**request: Any) -> Any:
        calls.append(len(request["Entries"]))
        if len(calls) == 2:
            raise ClientError({"Error": {"Code": "InternalException", "Message": "try again"}}, "PutEvents")
        return put(**request)

    monkeypatch.setattr(client, "put_events", second_put_fails)
    with pytest.raises(ClientError):
        seen.record_page("s", "k p1", identities, events, 1.0)
    assert calls == [10, 5]
    monkeypatch.setattr(client, "put_events", put)
    # Delivered again while the failed extract's lease is fresh: the items are new, and nothing is put yet...
    assert seen.record_page("s", "k p1", identities, events, 2.0) == dict.fromkeys(identities, "k p1")
    first = [json.loads(m["Body"])["detail"]["identity"] for m in drain(url)]
    assert sorted(first) == identities[:10]
    # ...and once it is stale (the extract queue's redelivery comes later than that), the five left, once.
    later = time.time() + seen_module.PUBLISH_LEASE_SECONDS + 1
    monkeypatch.setattr(seen_module, "time", SimpleNamespace(time=lambda: later))
    assert seen.record_page("s", "k p1", identities, events, 3.0) == dict.fromkeys(identities, "k p1")
    assert seen.record_page("s", "k p1", identities, events, 4.0) == dict.fromkeys(identities, "k p1")
    assert sorted(json.loads(m["Body"])["detail"]["identity"] for m in drain(url)) == identities[10:]


# --- planning a day -------------------------------------------------------------------


def planned_items(names: aws.StackNames) -> list[tuple[str, float]]:
    rows = aws.client("dynamodb").scan(TableName=names.watch)["Items"]
    items = [aws.unmarshal(r) for r in rows]
    return sorted((i["source_id"], float(i["at"])) for i in items if str(i["pk"]).startswith("plan#"))


def test_one_planner_a_day_the_second_plan_drawn_for_it_is_ignored(watch: aws.StackNames) -> None:
    store = aws.DynamoWatch(watch.watch, aws.BlobStore(watch.bucket))
    first = {f"s{n}": SourceState.first(Source(f"s{n}", "http://x/", "listing", priority_max=24.0)) for n in range(3)}
    store.plan([("s0", T0 + 60)], {"s0": -1.0, "s1": 0.0, "s2": 0.0}, first, T0 + DAY)
    # A second scheduler that read the day before the first took it draws another plan for the same day.
    store.plan([("s1", T0 + 90), ("s2", T0 + 30)], {"s0": 0.0, "s1": -1.0, "s2": -1.0}, first, T0 + DAY)
    assert planned_items(watch) == [("s0", T0 + 60)]
    tokens = {sid: state.tokens for sid, (state, _) in store.states().items()}
    assert tokens == {"s0": -1.0, "s1": 0.0, "s2": 0.0}


def test_a_plan_cut_short_is_finished_as_drawn_once_its_planner_is_stale(
    watch: aws.StackNames, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = aws.DynamoWatch(watch.watch, aws.BlobStore(watch.bucket))
    first = {f"s{n}": SourceState.first(Source(f"s{n}", "http://x/", "listing", priority_max=24.0)) for n in range(3)}
    checks = [("s0", T0 + 60), ("s1", T0 + 120), ("s1", T0 + 240), ("s2", T0 + 180)]
    monkeypatch.setattr(plan_module, "PLAN_CHUNK", 1)  # a chunk a source: the planner dies after the first
    put = plan_module.DayPlan._put_items
    written: list[int] = []

    def dies_on_the_second_chunk(self: Any, items: list[dict[str, Any]]) -> None:
        written.append(len(items))
        if len(written) == 2:
            raise RuntimeError("the Lambda timed out")
        put(self, items)

    monkeypatch.setattr(plan_module.DayPlan, "_put_items", dies_on_the_second_chunk)
    with pytest.raises(RuntimeError):
        store.plan(checks, {"s0": -1.0, "s1": -2.0, "s2": -1.0}, first, T0 + DAY)
    monkeypatch.setattr(plan_module.DayPlan, "_put_items", put)
    assert store.day_end() is None and planned_items(watch) == [("s0", T0 + 60)]
    # A live planner's plan is left to it...
    assert store.resume_plan() == 0
    # ...and a stale one's finished by the next tick, from its next chunk, as drawn: nothing spent twice.
    later = time.time() + plan_module.PLAN_LEASE_SECONDS + 1
    monkeypatch.setattr(plan_module, "time", SimpleNamespace(time=lambda: later))
    assert store.resume_plan() == len(checks)
    assert store.day_end() == T0 + DAY and store.resume_plan() is None
    assert planned_items(watch) == sorted(checks)
    tokens = {sid: state.tokens for sid, (state, _) in store.states().items()}
    assert tokens == {"s0": -1.0, "s1": -2.0, "s2": -1.0}


def test_a_checks_end_meeting_the_days_plan_is_applied_on_the_new_state(watch: aws.StackNames) -> None:
    store = aws.DynamoWatch(watch.watch, aws.BlobStore(watch.bucket))
    source = Source("s0", "http://x/", "listing", priority_max=24.0)
    first = SourceState.first(source)
    store.page_done("s0", "slot", 1, 5)
    calls: list[int] = []

    def meanwhile_the_plan_spends(state: SourceState, found: int) -> SourceState:
        calls.append(found)
        if len(calls) == 1:  # between this check's read and its write, the day's plan spends 3 tokens
            store.plans._spend("s0", "plans/day-2.json", -3.0, [first.priority, first.tokens], [T0 + 60])
        return check_ended(source, T0 + 30)(state, found)

    assert store.finish_check("s0", "slot", meanwhile_the_plan_spends, first)
    assert calls == [5, 5]  # refused once (the version moved), applied on the state read again
    state, _ = store.states()["s0"]
    assert state.tokens == first.tokens - 3.0 and [(c.at, c.new_items) for c in state.history] == [(T0 + 30, 5)]
    assert not store.finish_check("s0", "slot", meanwhile_the_plan_spends, first)  # ended once
