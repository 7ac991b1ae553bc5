"""``crawlstack query``: SQL on Athena in the stack's workgroup, or with --local on DuckDB over OUT/."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from crawlstack import settings
from crawlstack.cli import common
from crawlstack.cli.common import add_athena_timeout, cell, print_table
from crawlstack.cli.safe_text import csv_cell


def register(sub: Any) -> None:
    query = sub.add_parser(
        "query",
        parents=[common.stack_options()],
        help="run SQL on Athena, or with --local on DuckDB over OUT/",
        description="Run SQL on Athena in the stack's workgroup and Glue database, wait, print a table. "
        "With --local OUT_DIR the same SQL runs on DuckDB over a local crawl's output: tables records, "
        "crawl_log and resolved, with the Glue tables' columns and types; fields['name'] reads a record's field "
        "as text on both, numbers['name'] a numeric field as a number.",
    )
    query.add_argument("sql", metavar="SQL")
    query.add_argument("--local", metavar="OUT_DIR", help="query a local crawl's output directory instead")
    add_athena_timeout(query)
    query.add_argument("--format", choices=("table", "csv", "jsonl"), default="table")


def run(args: argparse.Namespace) -> int:
    if args.local:
        from crawlstack.local.query import query_local  # DuckDB

        result = query_local(args.local, args.sql)
    else:
        from crawlstack.aws.athena import Athena

        stack = common.stack(args)
        workgroup, database = stack.output(settings.OUTPUT_WORKGROUP), stack.output(settings.OUTPUT_GLUE_DATABASE)
        result = Athena(stack.connection).run(args.sql, workgroup, database, args.timeout)
    if args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow([csv_cell(c) for c in result.columns])
        writer.writerows([csv_cell(cell(v)) for v in row] for row in result.rows)
    elif args.format == "jsonl":
        for row in result.rows:
            print(json.dumps(dict(zip(result.columns, row, strict=False)), ensure_ascii=False, default=str))
    else:
        print_table(result.columns, result.rows)
        print(f"({len(result.rows)} row{'' if len(result.rows) == 1 else 's'})")
    return 0
