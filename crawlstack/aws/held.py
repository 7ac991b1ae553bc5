"""Held work of stopped crawls, in the parked table."""

from __future__ import annotations

from botocore.exceptions import ClientError

from crawlstack import jobs
from crawlstack.aws import clients
from crawlstack.aws.connection import ENVIRONMENT, Connection


class HeldStore:
    """Held work of stopped crawls (``crawlstack.jobs``), in the parked table under ``held#<crawl_id>``.

    No table of its own: the parked table already holds fetch tasks by
    partition and order, and a held partition is never a host's.
    """

    def __init__(self, table: str, crawls_table: str, *, connection: Connection = ENVIRONMENT) -> None:
        self.connection = connection
        self.name = table
        # The hold's transaction checks the crawl's state there.
        self.crawls_table = crawls_table

    def hold(self, crawl_id: str, key: str, body: str) -> bool:
        """Write the row only while the crawl is stopped, in one transaction with that check.

        So no hold lands after ``resume`` set the crawl running and read the
        held rows: False then, and the caller carries on as for a running crawl.
        """
        try:
            self.connection.client("dynamodb").transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.crawls_table,
                            "Key": clients.key(crawl_id=crawl_id),
                            "ConditionExpression": "#s = :stopped",
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": clients.values(stopped=jobs.STOPPED),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.name,
                            "Item": clients.marshal({"host": jobs.held_host(crawl_id), "order": key, "body": body}),
                        }
                    },
                ]
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            reasons = exc.response.get("CancellationReasons", [])  # type: ignore[typeddict-item]
            cancelled = error.get("Code") == "TransactionCanceledException" and reasons
            if cancelled and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            raise
        return True

    def held(self, crawl_id: str, limit: int) -> list[tuple[str, str]]:
        resp = self.connection.client("dynamodb").query(
            TableName=self.name,
            KeyConditionExpression="#h = :h",
            ExpressionAttributeNames={"#h": "host"},
            ExpressionAttributeValues=clients.values(h=jobs.held_host(crawl_id)),
            ConsistentRead=True,
            Limit=limit,
        )
        rows = [clients.unmarshal(i) for i in resp.get("Items", [])]
        return [(row["order"], row["body"]) for row in rows]

    def release(self, crawl_id: str, key: str) -> None:
        self.connection.client("dynamodb").delete_item(
            TableName=self.name, Key=clients.key(host=jobs.held_host(crawl_id), order=key)
        )
