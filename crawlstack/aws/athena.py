"""Athena: one SQL statement in the stack's workgroup, waited for (``crawlstack query``, ``crawlstack report``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from crawlstack.aws.connection import Connection
from crawlstack.aws.errors import DeployedError, aws_errors
from crawlstack.records.tables import QueryResult


class Athena:
    """Runs one SQL statement in the stack's workgroup and waits for it; every failure is a DeployedError."""

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
        return self._results(qid)

    def _results(self, qid: str) -> QueryResult:
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
