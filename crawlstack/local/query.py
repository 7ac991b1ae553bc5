"""``crawlstack query --local OUT_DIR``: SQL on DuckDB over a local crawl's ``OUT/``.

The views have the stack's Glue tables' names, columns and types, from the
one definition in ``crawlstack.records.tables`` (partition columns ``crawl_id`` and
``dt`` included), so the same SQL gives the same answer on both:

* ``records``: ``records.jsonl``;
* ``crawl_log``: ``crawl-log.jsonl``, one line a URL: its last try's ``started_at``,
  ``fetched_at`` and ``attempt``; the host comes from the URL, ``crawl_id`` from
  ``summary.json``, ``dt`` from the try's start (Athena's is the day its batch was
  written); local lines have no ``warc``;
* ``resolved``: ``resolved.jsonl`` (record_id, fields, sources, complete), local only.

``from_unixtime`` and ``from_iso8601_timestamp`` are defined as in Athena.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from crawlstack.aws.errors import DeployedError
from crawlstack.records import tables
from crawlstack.records.tables import QueryResult

_MAP = "MAP(VARCHAR, VARCHAR)"
_HOST = "lower(regexp_extract(url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/]*@)?([^/:?#]+)', 1))"
_DAY_FETCHED = "strftime(from_unixtime(fetched_at), '%Y-%m-%d')"


@dataclass(frozen=True)
class LocalTable:
    """A view over one file of ``OUT/``: the columns read (name -> DuckDB type), and SQL for the view's others."""

    file: str
    read: dict[str, str]
    derived: dict[str, str] = field(default_factory=dict)


def _table_columns(name: str) -> dict[str, str]:
    return {c.name: tables.duckdb_type(c) for c in tables.COLUMNS[name]}


VIEWS = {
    tables.RECORDS: LocalTable(
        "records.jsonl", {**_table_columns(tables.RECORDS), "crawl_id": "VARCHAR"}, {"dt": _DAY_FETCHED}
    ),
    tables.CRAWL_LOG: LocalTable(
        "crawl-log.jsonl",
        {**_table_columns(tables.CRAWL_LOG), "attempts": "INTEGER"},
        {
            "host": f"coalesce(host, {_HOST})",
            "attempt": "coalesce(attempt, attempts, 1)",
            "crawl_id": "{crawl_id}",
            "dt": "strftime(from_iso8601_timestamp(started_at), '%Y-%m-%d')",
        },
    ),
    "resolved": LocalTable(
        "resolved.jsonl", {"record_id": "VARCHAR", "fields": _MAP, "sources": _MAP, "complete": "BOOLEAN"}
    ),
}
# The view's columns in the Glue table's order, partitions last; a file's own extra columns are left out.
_ORDER = {name: [c.name for c in (*cols, *tables.PARTITION_KEYS)] for name, cols in tables.COLUMNS.items()}
# DuckDB's to_timestamp and TIMESTAMPTZ give times with a zone, which need pytz to fetch: plain UTC timestamps.
_MACROS = (
    "CREATE MACRO from_unixtime(x) AS make_timestamp(CAST(x * 1000000 AS BIGINT))",
    "CREATE MACRO from_iso8601_timestamp(x) AS make_timestamp(CAST(epoch_us(CAST(x AS TIMESTAMPTZ)) AS BIGINT))",
)


def _view_sql(view: str, table: LocalTable, path: Path, crawl_id: object) -> str:
    columns = table.read
    cols = "{" + ", ".join(f"{tables.sql_literal(c)}: {tables.sql_literal(t)}" for c, t in columns.items()) + "}"
    if path.is_file():
        source = f"read_json({tables.sql_literal(str(path))}, format='newline_delimited', columns={cols})"
    else:
        # A crawl that wrote no such file still has the table, empty.
        source = "(SELECT " + ", ".join(f"NULL::{t} AS {c}" for c, t in columns.items()) + " WHERE false)"
    crawl = tables.sql_literal(crawl_id) if isinstance(crawl_id, str) else "NULL::VARCHAR"
    exprs = {c: c for c in columns}
    exprs.update({c: sql.replace("{crawl_id}", crawl) for c, sql in table.derived.items()})
    order = _ORDER.get(view, list(exprs))
    select = ", ".join(f"{exprs[c]} AS {c}" for c in order)
    return f"CREATE VIEW {view} AS SELECT {select} FROM {source}"


def query_local(out_dir: str, sql: str) -> QueryResult:
    import duckdb

    out = Path(out_dir)
    if not out.is_dir():
        raise DeployedError(f"--local: {out}: no such directory (the --out of a local crawl)", 2)
    crawl_id = None
    # Without a readable summary (an interrupted crawl's), the crawl log's crawl_id is null.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        crawl_id = json.loads((out / "summary.json").read_text(encoding="utf-8")).get("crawl_id")
    con = duckdb.connect(":memory:")
    try:
        for macro in _MACROS:
            con.execute(macro)
        for view, table in VIEWS.items():
            con.execute(_view_sql(view, table, out / table.file, crawl_id))
        try:
            cursor = con.execute(sql)
            columns_out = [d[0] for d in cursor.description or []]
            rows = [list(r) for r in cursor.fetchall()] if cursor.description else []
        except duckdb.Error as exc:
            raise DeployedError(f"query: {str(exc).splitlines()[0]}", 2) from exc
    finally:
        con.close()
    return QueryResult(columns_out, rows)
