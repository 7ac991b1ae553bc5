"""A deployed crawl's report facts, from its Athena tables (``crawlstack.records.tables``).

Three queries: every crawl-log line of the crawl (one a try, and one for
each page whose extraction failed), the records per mapping, and per
mapping how many records have each field non-empty.  Athena gives every
value as text; this module turns them back into numbers.

The crawl log in S3 holds what fetch and extract decided, so URLs that
dispatch dropped before any fetch (out of scope, a port not allowed, a
trap) are not in a deployed report; ``crawlstack status`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawlstack.records import tables
from crawlstack.records.tables import QueryResult
from crawlstack.report.facts import CrawlFacts, UrlLines

Run = Callable[[str], QueryResult]


def queries(crawl_id: str) -> dict[str, str]:
    crawl = tables.sql_literal(crawl_id)
    return {
        "log": (
            "SELECT url, outcome, reason, status, depth, started_at, fetched_at, attempt "
            f"FROM {tables.CRAWL_LOG} WHERE crawl_id = {crawl}"
        ),
        "records": (
            f"SELECT mapping, count(*) AS records FROM {tables.RECORDS} WHERE crawl_id = {crawl} GROUP BY mapping"
        ),
        "fields": (
            "SELECT mapping, f.name, count_if(f.value IS NOT NULL AND trim(f.value) NOT IN ('', '[]', '{}')) AS filled "
            f"FROM {tables.RECORDS} CROSS JOIN UNNEST(fields) AS f(name, value) WHERE crawl_id = {crawl} "
            "GROUP BY mapping, f.name"
        ),
    }


def _number(value: Any, kind: type[int] | type[float]) -> Any:
    if value is None or value == "":
        return None
    try:
        return kind(value)
    except ValueError:
        return None


def _rows(result: QueryResult) -> list[dict[str, Any]]:
    return [dict(zip(result.columns, row, strict=False)) for row in result.rows]


def from_athena(run: Run, crawl_id: str, source: str) -> CrawlFacts:
    """The crawl's facts, each query run by ``run`` (Athena in the stack's workgroup and database)."""
    sql = queries(crawl_id)
    facts = CrawlFacts(crawl_id, None, source)
    lines = UrlLines(in_order=False)
    for row in _rows(run(sql["log"])):
        lines.add(
            {
                "url": row.get("url"),
                "outcome": row.get("outcome") or "unknown",
                "reason": row.get("reason"),
                "status": _number(row.get("status"), int),
                "depth": _number(row.get("depth"), int) or 0,
                "started_at": row.get("started_at") or None,
                "fetched_at": _number(row.get("fetched_at"), float),
                "attempt": _number(row.get("attempt"), int),
            }
        )
    lines.into(facts)
    for row in _rows(run(sql["records"])):
        facts.coverage_of(str(row.get("mapping"))).records = _number(row.get("records"), int) or 0
    for row in _rows(run(sql["fields"])):
        facts.coverage_of(str(row.get("mapping"))).filled[str(row.get("name"))] = _number(row.get("filled"), int) or 0
    return facts
