"""The query tables' schema: one definition for Athena's Glue tables and local mode's DuckDB views.

``infra/analytics.py`` declares the Glue tables from it and
``crawlstack.local.query`` types its views from it, so the same SQL reads
the same columns with the same types on both engines.  Types are spelled as
Hive spells them; ``duckdb_type`` gives DuckDB's spelling.

A record's ``fields`` hold any JSON value, and a Hive map has one value
type, so ``fields`` is a map of strings (nested values as their JSON text,
as the JSON SerDe reads them).  Its numbers are also in ``numbers``, a map of
doubles written beside it (``numbers_of``): ``max(numbers['price'])``
compares numbers, where ``max(fields['price'])`` compares text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from crawlstack import settings


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Hive's spelling


@dataclass(frozen=True)
class QueryResult:
    """A query's answer, from either engine (``crawlstack.aws.athena``, ``crawlstack.local.query``)."""

    columns: list[str]
    rows: list[list[Any]]


RECORDS = settings.QUERY_TABLES["records"]
CRAWL_LOG = settings.QUERY_TABLES["crawl_log"]

# The partition columns come from the objects' keys (``crawl_id=<id>/dt=<day>/``), never from a line.
PARTITION_KEYS = (Column("crawl_id", "string"), Column("dt", "string"))

COLUMNS: dict[str, tuple[Column, ...]] = {
    RECORDS: (
        Column("mapping", "string"),
        Column("url", "string"),
        Column("fields", "map<string,string>"),
        Column("numbers", "map<string,double>"),
        Column("depth", "int"),
        Column("fp", "string"),
        Column("fetched_at", "double"),
        Column("record_id", "string"),
        # A listing's item: its place on the page (a mapping with items gives a record per item).
        Column("item", "int"),
    ),
    CRAWL_LOG: (
        Column("url", "string"),
        Column("outcome", "string"),
        Column("reason", "string"),
        Column("status", "int"),
        Column("depth", "int"),
        Column("host", "string"),
        Column("fetched_at", "double"),
        # ISO 8601 text: the JSON SerDe reads no ISO timestamp; from_iso8601_timestamp() reads it on both engines.
        Column("started_at", "string"),
        Column("truncated", "boolean"),
        Column("attempt", "int"),
        Column("warc", "string"),
    ),
}

_DUCKDB_TYPES = {
    "string": "VARCHAR",
    "int": "INTEGER",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "map<string,string>": "MAP(VARCHAR, VARCHAR)",
    "map<string,double>": "MAP(VARCHAR, DOUBLE)",
}


def sql_literal(text: str) -> str:
    """``text`` as an SQL string literal, on Athena and DuckDB alike."""
    return "'" + text.replace("'", "''") + "'"


def duckdb_type(column: Column) -> str:
    return _DUCKDB_TYPES[column.type]


def numbers_of(fields: dict[str, Any]) -> dict[str, float | int]:
    """The fields whose values are numbers a double holds (not booleans), for the ``numbers`` column.

    An integer past a double's range (``to_number`` reads up to thousands of
    digits) is left out: it would overflow the column, and ``fields`` keeps it.
    """
    return {name: value for name, value in fields.items() if _double(value)}


def _double(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False
