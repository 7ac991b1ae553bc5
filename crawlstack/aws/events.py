"""The stack's event bus: each new item of a watched source as one ``crawlstack.item`` event (PutEvents).

PutEvents has no idempotency key: botocore retries a call whose reply was
lost, and its events then arrive twice.  Consumers deduplicate on the
event's ``event_id`` (stable per source and item).  ``publish`` tells its
caller each put that succeeded as it goes, so the watch marks those items
published even when a later put fails (``crawlstack.aws.seen``).

An event whose entry would reach ``settings.EVENT_MAX_BYTES`` is written
whole to the bucket (``settings.EVENTS_PREFIX``) and published as a pointer:
its ids and times, ``detail_s3`` (bucket and key) and ``oversize: true``.

Settings: ``EVENT_SOURCE``, ``EVENT_DETAIL_TYPE``, ``EVENT_MAX_BYTES``,
``EVENTS_PREFIX``, ``EVENTS_PER_PUT`` (crawlstack.settings).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from crawlstack import settings
from crawlstack.aws.blobs import BlobStore
from crawlstack.aws.connection import ENVIRONMENT, Connection

# Entries a put refuses (throttled, an internal error) are put again this many times before the page fails.
PUT_ATTEMPTS = 4
# What a pointer keeps of its event: bounded whatever the page held.
POINTER_KEYS = ("event_id", "source_id", "mapping", "checked_at", "published_at")


class PublishFailed(RuntimeError):
    """EventBridge kept refusing some entries."""


def entry_size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge counts it: Source, DetailType and Detail in UTF-8 (no Time, no Resources)."""
    return sum(len(entry[k].encode("utf-8")) for k in ("Source", "DetailType", "Detail"))


class EventBus:
    def __init__(
        self,
        bus: str,
        blobs: BlobStore,
        max_bytes: int = settings.EVENT_MAX_BYTES,
        *,
        connection: Connection = ENVIRONMENT,
    ) -> None:
        self.connection = connection
        self.bus = bus
        self.blobs = blobs
        self.max_bytes = max_bytes
        self.published = 0
        self.oversize = 0

    def take_counts(self) -> tuple[int, int]:
        """Events published and oversize ones among them since the last call."""
        taken = (self.published, self.oversize)
        self.published = self.oversize = 0
        return taken

    def publish(
        self, events: list[dict[str, Any]], went: Callable[[list[dict[str, Any]]], object] = lambda _: None
    ) -> None:
        """Put every event on the bus; PublishFailed naming EventBridge's reason if some never went.

        ``went`` is told each put's events as it succeeds, so a caller can note
        them published before a later put fails.
        """
        entries = [(event, self._entry(event)) for event in events]
        for batch in _batches(entries, self.max_bytes):
            pending = batch
            for attempt in range(PUT_ATTEMPTS):
                results = self.connection.client("events").put_events(Entries=[e for _, e in pending])["Entries"]
                failed = [(p, r) for p, r in zip(pending, results, strict=True) if r.get("ErrorCode")]
                put = [p for p, r in zip(pending, results, strict=True) if not r.get("ErrorCode")]
                self.published += len(put)
                if put:
                    went([event for event, _ in put])
                if not failed:
                    break
                pending = [p for p, _ in failed]
                if attempt + 1 < PUT_ATTEMPTS:
                    time.sleep(0.1 * 2**attempt)
            else:
                code, message = failed[0][1].get("ErrorCode"), failed[0][1].get("ErrorMessage", "")
                raise PublishFailed(f"{len(pending)} events not put on {self.bus}: {code}: {message}")

    def _entry(self, event: dict[str, Any]) -> dict[str, Any]:
        entry = self._entry_of(json.dumps(event, ensure_ascii=False))
        if entry_size(entry) < self.max_bytes:
            return entry
        key = f"{settings.EVENTS_PREFIX}{event['source_id']}/{event['event_id']}.json"
        self.blobs.put(key, json.dumps(event, ensure_ascii=False).encode("utf-8"), "application/json")
        self.oversize += 1
        pointer = {k: event[k] for k in POINTER_KEYS if k in event}
        pointer.update(oversize=True, detail_s3={"bucket": self.blobs.bucket, "key": key})
        return self._entry_of(json.dumps(pointer, ensure_ascii=False))

    def _entry_of(self, detail: str) -> dict[str, Any]:
        return {
            "Source": settings.EVENT_SOURCE,
            "DetailType": settings.EVENT_DETAIL_TYPE,
            "Detail": detail,
            "EventBusName": self.bus,
        }


Pair = tuple[dict[str, Any], dict[str, Any]]  # (event, its entry)


def _batches(pairs: list[Pair], max_bytes: int) -> Iterator[list[Pair]]:
    """At most ``EVENTS_PER_PUT`` entries a put, and under ``max_bytes`` together."""
    batch: list[Pair] = []
    size = 0
    for pair in pairs:
        if batch and (len(batch) == settings.EVENTS_PER_PUT or size + entry_size(pair[1]) >= max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(pair)
        size += entry_size(pair[1])
    if batch:
        yield batch
