"""The results table: one record per mapped page."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection
from crawlstack.records import storable


class ResultStore:
    """The results table: one record per mapped page."""

    def __init__(self, table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    def put(self, record: dict[str, Any]) -> None:
        """Store the record, fitted as ``crawlstack.records.storable`` says: a page's values never fail the write.

        Should the size estimate run short of DynamoDB's own, a smaller budget
        gives way to markers sooner.
        """
        for limit in (storable.ITEM_LIMIT, storable.ITEM_LIMIT // 4, 0):
            item = storable.fit_record({"pk": f"{record['crawl_id']}#{record['fp']}", **record}, limit)
            try:
                self.connection.client("dynamodb").put_item(TableName=self.name, Item=clients.marshal_exact(item))
                return
            except ClientError as exc:
                if limit == 0 or not clients.too_large(exc):
                    raise

    def count_by_crawl(self, crawl_id: str | None = None) -> dict[str, int]:
        """Records per crawl (``crawlstack status``): a Scan projecting ``crawl_id``."""
        counts: Counter[str] = Counter()
        for item in clients.scan(
            self.connection, TableName=self.name, ProjectionExpression="crawl_id", **clients.of_crawl(crawl_id)
        ):
            counts[item.get("crawl_id", {}).get("S", "?")] += 1
        return dict(counts)

    def records(self, crawl_id: str | None = None, mapping: str | None = None) -> Iterator[dict[str, Any]]:
        """Records as records.jsonl has them (no key attributes), in table order (``crawlstack records``)."""
        filters: list[str] = []
        values: dict[str, Any] = {}
        if crawl_id is not None:
            filters.append("crawl_id = :c")
            values |= clients.values(c=crawl_id)
        if mapping is not None:
            filters.append("#m = :m")  # ``mapping`` is a reserved word
            values |= clients.values(m=mapping)
        request: dict[str, Any] = {"TableName": self.name}
        if filters:
            request |= {"FilterExpression": " AND ".join(filters), "ExpressionAttributeValues": values}
        if mapping is not None:
            request["ExpressionAttributeNames"] = {"#m": "mapping"}
        for item in clients.scan(self.connection, **request):
            record = clients.unmarshal(item)
            record.pop("pk", None)
            record.pop("fp", None)
            yield record
