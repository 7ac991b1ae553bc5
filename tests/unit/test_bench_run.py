"""bench/run.py renders BENCHMARKS.md from result dicts: one table, every figure, failures, met marks.

Pure rendering logic on made-up results; nothing is run or timed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import benches
import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def run() -> ModuleType:
    return benches.load("run")


def fig(label: str, value: Any, unit: str = "", target: str | None = None, meets: bool | None = None) -> dict:
    return {"label": label, "value": value, "unit": unit, "target": target, "meets": meets}


POLITENESS = {
    "name": "politeness",
    "machine": "x86_64, 2 cores, CPython 3.11.7, Linux",
    "method": "Server log | per host.",
    "started": "2026-11-22T07:58:00Z",
    "date": "2026-11-22T08:00:00Z",
    "load": {"before": 1.5, "after": 1.7},
    "figures": [
        fig("efficiency", 0.93, "", "≥ 0.9", True),
        fig("smallest gap", 0.42, "s", "≥ 0.5 s", False),
        fig("crawl wall time", 35.71, "s"),
    ],
    "notes": "Per-host rows are in the JSON.",
}
FAILED = {"name": "scrapy_compare", "machine": "x86_64, 2 cores, CPython 3.11.7, Linux", "figures": [],
          "method": "", "failed": "exit 1: RuntimeError: scrapy bench exited 1: boom"}  # fmt: skip
COLD = {
    "name": "cold_start",
    "machine": "x86_64, 2 cores, CPython 3.11.7, Linux",
    "method": "Fresh interpreters.",
    "figures": [fig("dispatch import, best", 412, "ms", "≤ 300 ms", False), fig("layer", "not measured")],
}


def table_lines(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_one_table_with_every_figure_and_the_failure(run: ModuleType) -> None:
    md = run.render([COLD, POLITENESS, FAILED])
    lines = table_lines(md)
    header = "| Benchmark | Figure | Value | Target | Met | Machine | How measured |"
    assert md.count(header) == 1
    assert lines[0] == header
    # header, alignment row, 2 + 3 figure rows, 1 failure row, all contiguous: one table
    assert len(lines) == 2 + 2 + 3 + 1
    block = md.split(header, 1)[1].split("\n\n", 1)[0]
    assert block.count("\n|") == len(lines) - 1
    for result in (COLD, POLITENESS):
        for figure in result["figures"]:
            assert any(f"| {figure['label']} |" in line for line in lines)
    failed = [line for line in lines if line.startswith("| scrapy_compare |")]
    assert len(failed) == 1
    assert "| failed |" in failed[0]
    assert "exit 1: RuntimeError: scrapy bench exited 1: boom" in failed[0]


def test_met_marks_values_and_cells(run: ModuleType) -> None:
    lines = table_lines(run.render([POLITENESS]))
    row = {line.split(" | ")[1]: [c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]}
    assert row["efficiency"][2:5] == ["0.93", "≥ 0.9", "yes"]
    assert row["smallest gap"][2:5] == ["0.42 s", "≥ 0.5 s", "**no**"]
    assert row["crawl wall time"][2:5] == ["35.7 s", "", "-"]
    # machine and method on the benchmark's first row, with when and how loaded; a pipe is escaped
    first = row["efficiency"]
    assert first[0] == "politeness"
    assert first[5] == "x86_64, 2 cores, CPython 3.11.7, Linux; 2026-11-22 07:58 UTC; load 1.5→1.7"
    assert first[6] == "Server log \\| per host."
    assert row["smallest gap"][0] == "" and row["smallest gap"][5] == run.SAME


def test_string_values_and_big_numbers(run: ModuleType) -> None:
    assert run.format_value("not measured") == "not measured"
    assert run.format_value(1234, "pages") == "1,234 pages"
    assert run.format_value(231.46, "s") == "231 s"
    assert run.format_value(2.936, "x") == "2.94x"
    assert run.format_value(0.5, "s") == "0.5 s"
    assert run.format_value(19.66, "$") == "$19.7"
    assert run.format_value(0.04219) == "0.0422"
    assert run.format_met(None) == run.format_met("?") == "-"


def test_notes_sections_then_hand_written_notes_verbatim(run: ModuleType) -> None:
    notes = "## Earlier measurements\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    md = run.render([POLITENESS, FAILED], notes=notes, skipped=["cost (bench/cost.py is not in this checkout)"])
    assert "make bench" in md.split("\n\n")[1]
    assert "## Notes\n\n### politeness\n\nPer-host rows are in the JSON." in md
    assert md.index("### politeness") > md.index("| politeness |")
    assert md.rstrip().endswith(notes.rstrip())
    assert "Not run: cost (bench/cost.py is not in this checkout)." in md


def test_results_load_in_run_order_and_a_broken_file_is_a_failure(run: ModuleType, tmp_path: Path) -> None:
    for result in (POLITENESS, COLD):
        (tmp_path / f"{result['name']}.json").write_text(json.dumps(result))
    (tmp_path / "aaa_other.json").write_text(json.dumps({**COLD, "name": "aaa_other"}))
    (tmp_path / "paper.json").write_text("{not json")
    results = run.load_results(tmp_path)
    assert [r["name"] for r in results] == ["cold_start", "politeness", "paper", "aaa_other"]
    assert results[2]["failed"].startswith("unreadable result paper.json")
    assert "| paper | - | failed |" in run.render(results)


def test_last_error_line(run: ModuleType) -> None:
    stderr = "Traceback (most recent call last):\n  File 'x'\nRuntimeError: no server\n\n"
    assert run.last_error_line(stderr) == "RuntimeError: no server"
    assert run.last_error_line("", "only stdout\n") == "only stdout"
    assert run.last_error_line("") == "no output"
