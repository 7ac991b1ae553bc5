"""The results table: one record per mapped page."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from crawlstack import storable
from crawlstack.aws import clients


class ResultStore:
    """The results table: one record per mapped page."""

    def __init__(self, table: str, *, connection: clients.Connection = clients.ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table

    def put(self, record: dict[str, Any]) -> None:
        """Store the record, fitted as ``crawlstack.storable`` says, so that a page's values never fail the write.

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
