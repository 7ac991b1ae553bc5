"""The resolved table: one merged record per crawl and record id."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.records import storable
from crawlstack.records.resolution import ResolvedRecord


class ResolvedStore:
    """The resolved table: one merged record per crawl and record id (``crawlstack.records.resolution``).

    Each field is two flat top-level attributes, ``field.<name>`` (the value)
    and ``source.<name>`` (the URL it came from): ``if_not_exists`` on a
    nested map path fails while the parent map is missing, flat names
    need no parent.  Names go through placeholders, so dots and reserved
    words are literal.  Values are fitted as ``crawlstack.records.storable`` says:
    one too large for what is left of the item is stored as a marker.
    """

    table_key = "resolved"
    FIELD_PREFIX = "field."
    SOURCE_PREFIX = "source."
    # Fields per UpdateItem: about 55 characters of expression each keeps
    # the expression under DynamoDB's 4 KB limit.  Larger pages take
    # several updates, each atomic; first-wins holds per field either way.
    FIELDS_PER_UPDATE = 50
    # Refits of one update that DynamoDB refused for the item's size.
    SIZE_RETRIES = 2
    _NAME_OVERHEAD = len(FIELD_PREFIX) + len(SOURCE_PREFIX)

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    @staticmethod
    def key(crawl_id: str, record_id: str) -> dict[str, Any]:
        return clients.key(pk=f"{crawl_id}#{record_id}")

    def merge(
        self, crawl_id: str, record_id: str, want: Sequence[str], fields: Mapping[str, Any], source_url: str
    ) -> ResolvedRecord:
        # Fitted as if the item were new; a fuller item is refitted when DynamoDB refuses.
        base = {"pk": f"{crawl_id}#{record_id}", "crawl_id": crawl_id, "record_id": record_id, "want": list(want)}
        used = storable.item_size({**base, "complete": True})
        fitted = storable.fit_merge(fields, source_url, used, self._NAME_OVERHEAD)
        items = list(fitted.items())
        chunks = [items[i : i + self.FIELDS_PER_UPDATE] for i in range(0, len(items), self.FIELDS_PER_UPDATE)]
        attributes: dict[str, Any] = {}
        # No fields still creates the item: the record exists from its first page.
        for chunk in chunks or [[]]:
            attributes = self._update(crawl_id, record_id, want, dict(chunk), source_url)
        record = self._record(crawl_id, record_id, attributes)
        if record.complete and "complete" not in attributes:
            # For readers of the table; the crawler itself derives it from want and fields.
            self.connection.client("dynamodb").update_item(
                TableName=self.name,
                Key=self.key(crawl_id, record_id),
                UpdateExpression="SET complete = :t",
                ExpressionAttributeValues=clients.values(t=True),
            )
        return record

    def _update(
        self, crawl_id: str, record_id: str, want: Sequence[str], chunk: dict[str, Any], source_url: str
    ) -> dict[str, Any]:
        """One atomic merge of ``chunk``; the item's new attributes."""
        attempt = 0
        while True:
            names = {"#want": "want"}
            values: dict[str, Any] = {":c": crawl_id, ":r": record_id, ":w": list(want)}
            sets = ["crawl_id = :c", "record_id = :r", "#want = if_not_exists(#want, :w)"]
            if chunk:
                values[":u"] = source_url
            for i, (name, value) in enumerate(chunk.items()):
                names[f"#f{i}"] = self.FIELD_PREFIX + name
                names[f"#s{i}"] = self.SOURCE_PREFIX + name
                values[f":v{i}"] = value
                sets.append(f"#f{i} = if_not_exists(#f{i}, :v{i})")
                sets.append(f"#s{i} = if_not_exists(#s{i}, :u)")
            try:
                resp = self.connection.client("dynamodb").update_item(
                    TableName=self.name,
                    Key=self.key(crawl_id, record_id),
                    UpdateExpression="SET " + ", ".join(sets),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=clients.marshal_exact(values),
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if attempt == self.SIZE_RETRIES or not clients.too_large(exc):
                    raise
                attempt += 1
                chunk = self._refit(crawl_id, record_id, chunk, source_url, last=attempt == self.SIZE_RETRIES)
                continue
            attributes: dict[str, Any] = resp.get("Attributes", {})
            return attributes

    def _refit(
        self, crawl_id: str, record_id: str, chunk: dict[str, Any], source_url: str, last: bool
    ) -> dict[str, Any]:
        """``chunk``'s new fields fitted to the room the item has left (earlier pages filled it).

        Fields the item has already are left out: first-wins keeps them
        anyway.  The last time, every new value larger than its marker is
        one, so what other merges add meanwhile cannot make it fail again.
        """
        item = (
            self.connection.client("dynamodb")
            .get_item(TableName=self.name, Key=self.key(crawl_id, record_id), ConsistentRead=True)
            .get("Item")
        )
        current = clients.unmarshal(item)
        new = {name: v for name, v in chunk.items() if self.FIELD_PREFIX + name not in current}
        used = storable.ITEM_LIMIT if last else storable.item_size({**current, "complete": True})
        return storable.fit_merge(new, source_url, used, self._NAME_OVERHEAD)

    def get_many(self, crawl_id: str, record_ids: Iterable[str]) -> dict[str, ResolvedRecord]:
        ids = list(dict.fromkeys(record_ids))
        out: dict[str, ResolvedRecord] = {}
        keys = [self.key(crawl_id, rid) for rid in ids]
        for item in clients.batch_get(self.connection, self.name, keys, ConsistentRead=True):
            record = self._record(crawl_id, clients.attribute(item, "record_id"), item)
            out[record.record_id] = record
        return out

    def scan_crawl(self, crawl_id: str) -> Iterator[ResolvedRecord]:
        """Every record of a crawl (local mode's OUT/resolved.jsonl)."""
        paginator = self.connection.client("dynamodb").get_paginator("scan")
        for page in paginator.paginate(
            TableName=self.name,
            FilterExpression="crawl_id = :c",
            ExpressionAttributeValues=clients.values(c=crawl_id),
            ConsistentRead=True,
        ):
            for item in page.get("Items", []):
                yield self._record(crawl_id, clients.attribute(item, "record_id"), item)

    def lines(self, crawl_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Records as resolved.jsonl has them, with their crawl id, in table order (``crawlstack records``)."""
        for item in clients.scan(self.connection, TableName=self.name, **clients.of_crawl(crawl_id)):
            crawl, record_id = item["crawl_id"]["S"], item["record_id"]["S"]
            yield {"crawl_id": crawl, **self._record(crawl, record_id, item).to_line()}

    @classmethod
    def _record(cls, crawl_id: str, record_id: str, item: dict[str, Any]) -> ResolvedRecord:
        data = clients.unmarshal(item)
        fields = {k[len(cls.FIELD_PREFIX) :]: v for k, v in data.items() if k.startswith(cls.FIELD_PREFIX)}
        sources = {k[len(cls.SOURCE_PREFIX) :]: v for k, v in data.items() if k.startswith(cls.SOURCE_PREFIX)}
        return ResolvedRecord(crawl_id, record_id, tuple(data.get("want") or ()), fields, sources)
