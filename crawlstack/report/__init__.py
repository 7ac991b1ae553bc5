"""``crawlstack report``: a crawl's plots in one self-contained HTML file.

``facts`` gathers what to show from ``OUT/`` or Athena, ``page`` draws it.
"""

from __future__ import annotations

from pathlib import Path

from crawlstack.report.facts import CrawlFacts, from_out
from crawlstack.report.page import render

REPORT_FILE = "report.html"


def write_report(facts: CrawlFacts, path: Path) -> Path:
    """Write the report whole or not at all (a Ctrl-C midway leaves the earlier one)."""
    part = path.with_name(path.name + ".part")
    try:
        part.write_text(render(facts), encoding="utf-8")
        part.replace(path)
    finally:
        part.unlink(missing_ok=True)
    return path


def report_out(out: Path) -> Path:
    """``OUT/report.html`` from a local crawl's ``OUT/``."""
    return write_report(from_out(out), out / REPORT_FILE)


__all__ = ["REPORT_FILE", "CrawlFacts", "from_out", "render", "report_out", "write_report"]
