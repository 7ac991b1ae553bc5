"""The AWS side of the CLI for a deployed stack: stack discovery and small adapters over SQS, DynamoDB and Athena.

Everything is found from the stack's CloudFormation outputs
(``settings.OUTPUT_QUEUE_URL``, ``OUTPUT_DLQ_URL``, ``OUTPUT_TABLE``,
``OUTPUT_WORKGROUP``, ``OUTPUT_GLUE_DATABASE``) of the stack named
``settings.STACK_NAME`` unless told otherwise.  Its calls go through
a ``crawlstack.aws.Connection`` (the CLI's ``--region`` and ``--endpoint-url``).

Every failure is a :class:`DeployedError`: one line, and the exit status the
CLI should give (2 for a user's mistake, 1 for a runtime failure).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from crawlstack import settings
from crawlstack.aws.clients import Connection, unmarshal
from crawlstack.aws.errors import DeployedError, aws_errors

# --- DynamoDB ---------------------------------------------------------------


# "retrying": a try failed with an HTTP error and the next is scheduled (crawlstack.fetch_outcomes); last,
# as it came last.  "fetching" is written no more (a host's run reads a URL's state instead); the column
# stays for items written before, and for scripts that read it.
URL_STATES = ("queued", "fetching", "fetched", "skipped", "failed", "retrying")


def url_counts(states: Mapping[str, int], crawl: Mapping[str, Any]) -> Counter[str]:
    """A crawl's URLs by state: the urls table's, with the outcomes only the crawl log holds.

    A page fetched or skipped on its first try keeps only its claim
    (``queued``) in the urls table; the crawl item counts those outcomes
    at each flush.  So they move from ``queued`` to their outcome here.
    The counters count tries: after a crash, a page fetched again counts
    twice (and ``queued`` is then that much short, never below zero).
    """
    counts = Counter({state: int(n) for state, n in states.items()})
    for outcome in settings.LOGGED_OUTCOMES:
        logged = int(crawl.get(f"{settings.LOGGED_COUNTER_PREFIX}{outcome}") or 0)
        counts[outcome] += logged
        counts["queued"] = max(0, counts["queued"] - logged)
    return counts


def schedule_state(connection: Connection, name: str) -> tuple[str, str]:
    """The watch schedule's state (ENABLED or DISABLED) and expression (EventBridge Scheduler)."""
    with aws_errors(f"schedule {name}"):
        found = connection.client("scheduler").get_schedule(Name=name)
    return str(found.get("State", "")), str(found.get("ScheduleExpression", ""))


class Tables:
    """Reads of the stack's tables for ``status`` and ``records``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    @property
    def _ddb(self) -> Any:
        return self.connection.client("dynamodb")

    def _scan(self, what: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        with aws_errors(what):
            yield from self._ddb.get_paginator("scan").paginate(**kwargs)

    def watch_sources(self, table: str) -> list[tuple[str, float | None, float | None, float | None, int, int]]:
        """Each source's id, priority, tokens, next check today (epoch), checks ended and new items found."""
        from crawlstack.aws.sources import DynamoSources

        now = time.time()
        rows = []
        with aws_errors(f"sources in {table}"):
            for item in DynamoSources(table, connection=self.connection).items():
                upcoming = [float(t) for t in item.get("next_checks") or () if float(t) > now]
                priority, tokens = item.get("priority"), item.get("tokens")
                rows.append(
                    (
                        str(item["sk"]),
                        float(priority) if priority is not None else None,
                        float(tokens) if tokens is not None else None,
                        min(upcoming) if upcoming else None,
                        int(item.get("checks_done", 0)),
                        int(item.get("items_found", 0)),
                    )
                )
        return rows

    def url_states(self, table: str, crawl_id: str | None) -> dict[str, Counter[str]]:
        """URL outcomes per crawl: one Scan of the urls table, reading every item (there is no counter)."""
        kwargs: dict[str, Any] = {
            "TableName": table,
            "ProjectionExpression": "crawl_id, #s",
            "ExpressionAttributeNames": {"#s": "state"},
        }
        if crawl_id is not None:
            kwargs["FilterExpression"] = "crawl_id = :c"
            kwargs["ExpressionAttributeValues"] = {":c": {"S": crawl_id}}
        counts: dict[str, Counter[str]] = {}
        for page in self._scan(f"scan {table}", **kwargs):
            for item in page.get("Items", []):
                crawl = item.get("crawl_id", {}).get("S", "?")
                counts.setdefault(crawl, Counter())[item.get("state", {}).get("S", "queued")] += 1
        return counts

    def count(self, table: str, crawl_id: str | None) -> dict[str, int]:
        """Items per crawl (a Scan projecting crawl_id)."""
        kwargs: dict[str, Any] = {"TableName": table, "ProjectionExpression": "crawl_id"}
        if crawl_id is not None:
            kwargs["FilterExpression"] = "crawl_id = :c"
            kwargs["ExpressionAttributeValues"] = {":c": {"S": crawl_id}}
        counts: Counter[str] = Counter()
        for page in self._scan(f"scan {table}", **kwargs):
            for item in page.get("Items", []):
                counts[item.get("crawl_id", {}).get("S", "?")] += 1
        return dict(counts)

    def crawls(self, table: str, crawl_id: str | None) -> dict[str, dict[str, Any]]:
        """Crawl configs with their state and page budget counter (the crawls table holds one item per crawl)."""
        if crawl_id is not None:
            with aws_errors(f"read {table}"):
                item = self._ddb.get_item(TableName=table, Key={"crawl_id": {"S": crawl_id}}).get("Item")
            return {crawl_id: unmarshal(item)} if item else {}
        kwargs: dict[str, Any] = {
            "TableName": table,
            "ProjectionExpression": "crawl_id, #s, max_pages, pages_admitted, "
            + ", ".join(f"{settings.LOGGED_COUNTER_PREFIX}{o}" for o in settings.LOGGED_OUTCOMES),
            "ExpressionAttributeNames": {"#s": "state"},
        }
        found = {}
        for page in self._scan(f"scan {table}", **kwargs):
            for item in page.get("Items", []):
                data = unmarshal(item)
                found[str(data["crawl_id"])] = data
        return found

    def records(self, table: str, crawl_id: str | None, mapping: str | None) -> Iterator[dict[str, Any]]:
        """Results items as records.jsonl has them (no key attributes), in table order."""
        filters, values = [], {}
        if crawl_id is not None:
            filters.append("crawl_id = :c")
            values[":c"] = {"S": crawl_id}
        if mapping is not None:
            filters.append("#m = :m")
            values[":m"] = {"S": mapping}
        kwargs: dict[str, Any] = {"TableName": table}
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
            kwargs["ExpressionAttributeValues"] = values
            if mapping is not None:
                kwargs["ExpressionAttributeNames"] = {"#m": "mapping"}
        for page in self._scan(f"scan {table}", **kwargs):
            for item in page.get("Items", []):
                record = unmarshal(item)
                record.pop("pk", None)
                record.pop("fp", None)
                yield record

    def resolved(self, table: str, crawl_id: str | None) -> Iterator[dict[str, Any]]:
        """Resolved records as resolved.jsonl has them, with their crawl id, in table order."""
        from crawlstack.aws import ResolvedStore

        kwargs: dict[str, Any] = {"TableName": table}
        if crawl_id is not None:
            kwargs["FilterExpression"] = "crawl_id = :c"
            kwargs["ExpressionAttributeValues"] = {":c": {"S": crawl_id}}
        for page in self._scan(f"scan {table}", **kwargs):
            for item in page.get("Items", []):
                crawl, record_id = item["crawl_id"]["S"], item["record_id"]["S"]
                yield {"crawl_id": crawl, **ResolvedStore._record(crawl, record_id, item).to_line()}


# --- Athena -----------------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]


class Athena:
    """Runs one SQL statement in the stack's workgroup and waits for it."""

    def __init__(self, connection: Connection, sleep: Callable[[float], None] = time.sleep) -> None:
        self.connection = connection
        self.sleep = sleep

    @property
    def _athena(self) -> Any:
        return self.connection.client("athena")

    def run(self, sql: str, workgroup: str, database: str, timeout: float) -> QueryResult:
        with aws_errors("athena"):
            qid = self._athena.start_query_execution(
                QueryString=sql, WorkGroup=workgroup, QueryExecutionContext={"Database": database}
            )["QueryExecutionId"]
        deadline = time.monotonic() + timeout
        pause = 0.25
        while True:
            with aws_errors("athena"):
                status = self._athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
            state = status.get("State")
            if state == "SUCCEEDED":
                break
            if state in ("FAILED", "CANCELLED"):
                reason = status.get("StateChangeReason") or state.lower()
                # ErrorCategory 2 is the user's (bad SQL, no such table); 1 and 3 are Athena's.
                user = status.get("AthenaError", {}).get("ErrorCategory") == 2
                raise DeployedError(f"query {state.lower()}: {reason}", 2 if user else 1)
            if time.monotonic() + pause > deadline:
                with contextlib.suppress(DeployedError), aws_errors("athena"):
                    self._athena.stop_query_execution(QueryExecutionId=qid)
                raise DeployedError(f"query {qid} still {state} after {timeout:g}s: cancelled (raise --timeout)")
            self.sleep(pause)
            pause = min(pause * 2, 2.0)
        columns: list[str] = []
        rows: list[list[Any]] = []
        first = True
        with aws_errors("athena results"):
            for page in self._athena.get_paginator("get_query_results").paginate(QueryExecutionId=qid):
                result = page["ResultSet"]
                if not columns:
                    columns = [c["Name"] for c in result.get("ResultSetMetadata", {}).get("ColumnInfo", [])]
                for row in result.get("Rows", []):
                    values = [d.get("VarCharValue") for d in row.get("Data", [])]
                    # A SELECT's first row repeats the column names.
                    if first and columns and values == columns:
                        first = False
                        continue
                    first = False
                    rows.append(values)
        return QueryResult(columns, rows)


def frontier_body(url: str, crawl_id: str | None, record_id: str | None, want: tuple[str, ...]) -> str:
    """A seed's frontier message, as local mode sends it; without ``crawl_id`` it joins the stack's default crawl."""
    from crawlstack.messages import FrontierMessage

    message = FrontierMessage(url=url, depth=0, record_id=record_id, want=want)
    data = json.loads(message.to_json())
    if crawl_id is None:
        data.pop("crawl_id", None)
    else:
        data["crawl_id"] = crawl_id
    return json.dumps(data, separators=(",", ":"))
