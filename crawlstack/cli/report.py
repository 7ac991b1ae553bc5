"""``crawlstack report``: a crawl's plots in one self-contained HTML file, from OUT/ or from Athena."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.cli import common
from crawlstack.cli.common import UsageError, add_athena_timeout
from crawlstack.limits import crawl_id_lookup_flag


def register(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        parents=[common.stack_options()],
        help="draw a crawl's plots into one self-contained HTML file",
        description="Rebuild OUT_DIR/report.html from a local crawl's output, or with --crawl-id build the "
        "report of a deployed crawl from its Athena tables into --out FILE. The file makes no network "
        "request: plotly.js is embedded.",
    )
    report.add_argument("out_dir", nargs="?", metavar="OUT_DIR", help="a local crawl's output directory")
    report.add_argument("--crawl-id", type=crawl_id_lookup_flag, metavar="ID", help="a deployed crawl, from Athena")
    report.add_argument("--out", metavar="FILE", help="where to write the report (default OUT_DIR/report.html)")
    add_athena_timeout(report)


def run(args: argparse.Namespace) -> int:
    from crawlstack.report import REPORT_FILE, from_out, write_report

    if (args.out_dir is None) == (args.crawl_id is None):
        raise UsageError("give a local crawl's OUT_DIR, or --crawl-id ID --out FILE for a deployed crawl")
    if args.out_dir is not None:
        out = Path(args.out_dir)
        if not (out / "crawl-log.jsonl").is_file():
            raise UsageError(f"{out}: no crawl-log.jsonl (is it a local crawl's output directory?)")
        target = Path(args.out) if args.out else out / REPORT_FILE
        try:
            facts = from_out(out)
        except OSError as exc:
            raise UsageError(f"cannot read {out}: {exc.strerror or exc}") from exc
    else:
        from crawlstack.aws.athena import Athena
        from crawlstack.report.athena import from_athena

        if not args.out:
            raise UsageError("--crawl-id: give --out FILE for the report")
        target = Path(args.out)
        stack = common.stack(args)
        workgroup, database = stack.output(settings.OUTPUT_WORKGROUP), stack.output(settings.OUTPUT_GLUE_DATABASE)
        athena = Athena(stack.connection)
        facts = from_athena(
            lambda sql: athena.run(sql, workgroup, database, args.timeout), args.crawl_id, f"Athena ({database})"
        )
    try:
        write_report(facts, target)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    print(f"wrote {target}")
    return 0
