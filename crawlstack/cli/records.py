"""``crawlstack records``: extracted (or resolved) records as JSON lines or CSV, from a stack or OUT/."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crawlstack.cli import common
from crawlstack.cli.common import UsageError, cell, list_limit_flag
from crawlstack.cli.safe_text import csv_cell
from crawlstack.limits import crawl_id_lookup_flag


def register(sub: Any) -> None:
    records = sub.add_parser(
        "records",
        parents=[common.stack_options()],
        help="print extracted records from the results table",
        description="Scan the results table (filtered by crawl and mapping) and print records as JSON lines, "
        "as records.jsonl has them, or as CSV with one column per field.",
    )
    records.add_argument("--crawl-id", type=crawl_id_lookup_flag, metavar="ID", help="only this crawl's records")
    records.add_argument("--mapping", metavar="NAME", help="only this mapping's records")
    records.add_argument("--limit", type=list_limit_flag, metavar="N", help="stop after N records")
    records.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    records.add_argument(
        "--resolved",
        action="store_true",
        help="the resolved table instead: one merged record per seed record_id, as resolved.jsonl has them",
    )
    records.add_argument(
        "--local", metavar="OUT_DIR", help="a local crawl's OUT/ instead (its records.jsonl or resolved.jsonl)"
    )


def run(args: argparse.Namespace) -> int:
    if args.resolved and args.mapping:
        raise UsageError("--mapping: resolved records merge pages of any mapping; leave it out with --resolved")
    found: Iterator[dict[str, Any]]
    if args.local:
        found = _local_records(Path(args.local), args.resolved, args.crawl_id, args.mapping)
    elif args.resolved:
        from crawlstack.aws import ResolvedStore

        stack = common.stack(args)
        found = ResolvedStore(stack.table("resolved"), connection=stack.connection).lines(args.crawl_id)
    else:
        from crawlstack.aws import ResultStore

        stack = common.stack(args)
        found = ResultStore(stack.table("results"), connection=stack.connection).records(args.crawl_id, args.mapping)
    if args.resolved:
        base = ["crawl_id", "record_id", "complete"]
    else:
        base = ["mapping", "url", "crawl_id", "depth", "fetched_at", "record_id"]
    if args.limit:
        found = itertools.islice(found, args.limit)
    if args.format == "jsonl":
        for record in found:
            print(json.dumps(record, ensure_ascii=False, default=str))
        return 0
    # CSV needs every field name for its header: the records are read first.
    records = list(found)
    names = list(dict.fromkeys(n for r in records for n in (r.get("fields") or {})))
    writer = csv.writer(sys.stdout)
    writer.writerow([csv_cell(c) for c in base + [f"fields.{n}" for n in names]])
    for r in records:
        fields = r.get("fields") or {}
        row = [cell(r.get(c)) for c in base] + [cell(fields.get(n)) for n in names]
        writer.writerow([csv_cell(v) for v in row])  # no page text may become a live formula
    return 0


def _local_records(out: Path, resolved: bool, crawl_id: str | None, mapping: str | None) -> Iterator[dict[str, Any]]:
    """A local crawl's records (or resolved records), as the deployed tables give them, filtered alike."""
    path = out / ("resolved.jsonl" if resolved else "records.jsonl")
    if not path.is_file():
        raise UsageError(f"--local: {path} does not exist (is {out} a local crawl's output?)")

    def read() -> Iterator[dict[str, Any]]:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                # A line a running crawl is still writing is left for the next look.
                if line.endswith("\n") and line.strip():
                    record = json.loads(line)
                    record.pop("numbers", None)  # a copy of fields for the query tables; the results table has none
                    if (crawl_id is None or record.get("crawl_id") == crawl_id) and (
                        mapping is None or record.get("mapping") == mapping
                    ):
                        yield record

    return read()
