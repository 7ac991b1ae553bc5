"""``crawlstack query --local OUT_DIR``: SQL on DuckDB over a local crawl's ``OUT/``.

The views carry the names and columns of the stack's Glue tables
(``settings.QUERY_TABLES``, ``infra/analytics.py``), partition columns
``crawl_id`` and ``dt`` included, and ``fields`` is a map of strings as in
the Athena table, so that ``fields['title']`` and the stack's named queries
mean the same on both:

* ``records``: ``records.jsonl`` (mapping, url, fields, depth, fetched_at, record_id, crawl_id, dt);
* ``crawl_log``: ``crawl-log.jsonl`` (url, outcome, reason, status, depth, host, fetched_at, truncated,
  crawl_id, dt); local lines have no host (taken from the URL), fetched_at or dt, nor a crawl id
  (``summary.json``'s);
* ``resolved``: ``resolved.jsonl`` (record_id, fields, sources, complete), local only.

Nested values in ``fields`` read as their JSON text, as Athena's JSON SerDe gives them.
``from_unixtime`` is defined as in Athena.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from crawlstack import settings
from crawlstack.deployed import DeployedError, QueryResult

_MAP = "MAP(VARCHAR, VARCHAR)"
# file, its columns as read, and the view's extra columns (SQL over those).
VIEWS: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    settings.QUERY_TABLES["records"]: (
        "records.jsonl",
        {
            "mapping": "VARCHAR",
            "url": "VARCHAR",
            "fields": _MAP,
            "depth": "INTEGER",
            "fetched_at": "DOUBLE",
            "record_id": "VARCHAR",
            "crawl_id": "VARCHAR",
        },
        {"dt": "strftime(from_unixtime(fetched_at), '%Y-%m-%d')"},
    ),
    settings.QUERY_TABLES["crawl_log"]: (
        "crawl-log.jsonl",
        {
            "url": "VARCHAR",
            "outcome": "VARCHAR",
            "reason": "VARCHAR",
            "status": "INTEGER",
            "depth": "INTEGER",
            "host": "VARCHAR",
            "fetched_at": "DOUBLE",
            "truncated": "BOOLEAN",
        },
        {"crawl_id": "{crawl_id}", "dt": "strftime(from_unixtime(fetched_at), '%Y-%m-%d')"},
    ),
    "resolved": (
        "resolved.jsonl",
        {"record_id": "VARCHAR", "fields": _MAP, "sources": _MAP, "complete": "BOOLEAN"},
        {},
    ),
}
_HOST = "lower(regexp_extract(url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/]*@)?([^/:?#]+)', 1))"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
        # A plain UTC timestamp: DuckDB's to_timestamp gives one with a time zone, which needs pytz to fetch.
        con.execute("CREATE MACRO from_unixtime(x) AS make_timestamp(CAST(x * 1000000 AS BIGINT))")
        for view, (name, columns, extra) in VIEWS.items():
            path = out / name
            cols = "{" + ", ".join(f"{_literal(c)}: {_literal(t)}" for c, t in columns.items()) + "}"
            if path.is_file():
                source = f"read_json({_literal(str(path))}, format='newline_delimited', columns={cols})"
            else:
                # A crawl that wrote no such file still has the table, empty.
                source = "(SELECT " + ", ".join(f"NULL::{t} AS {c}" for c, t in columns.items()) + " WHERE false)"
            select = [("coalesce(host, " + _HOST + ") AS host") if c == "host" else c for c in columns]
            crawl = _literal(crawl_id) if isinstance(crawl_id, str) else "NULL::VARCHAR"
            select += [f"{sql.replace('{crawl_id}', crawl)} AS {c}" for c, sql in extra.items()]
            con.execute(f"CREATE VIEW {view} AS SELECT {', '.join(select)} FROM {source}")
        try:
            cursor = con.execute(sql)
            columns_out = [d[0] for d in cursor.description or []]
            rows = [list(r) for r in cursor.fetchall()] if cursor.description else []
        except duckdb.Error as exc:
            raise DeployedError(f"query: {str(exc).splitlines()[0]}", 2) from exc
    finally:
        con.close()
    return QueryResult(columns_out, rows)
