"""bench/baseline.py's pure logic: ratios, the 10% target, turn order, summaries and figures.

Made-up child results; nothing is run or timed (a bad ref only asks git).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import benches
import pytest


@pytest.fixture(scope="module")
def baseline() -> ModuleType:
    return benches.load("baseline")


def child(cpu_s: float, maxrss_mb: float, digest: str = "d") -> dict[str, Any]:
    return {"cpu_s": cpu_s, "wall_s": cpu_s, "rss_before_mb": 30.0, "maxrss_mb": maxrss_mb, "digest": digest}


def test_ratio_is_the_median_of_paired_ratios_and_meets_at_ten_percent(baseline: ModuleType) -> None:
    assert baseline.paired_ratio([1.1, 2.0, 3.3], [1.0, 1.0, 3.0]) == 1.1
    assert baseline.within(1.10) and not baseline.within(1.101)
    ok, slow = baseline.ratio_figure("t", 1.1), baseline.ratio_figure("t", 1.2)
    assert ok == {"label": "t", "value": 1.1, "unit": "x", "target": "≤ 1.10x", "meets": True}
    assert slow["meets"] is False


def test_turns_alternate_and_rss_units(baseline: ModuleType) -> None:
    assert baseline.order(0) == ("current", "baseline")
    assert baseline.order(1) == ("baseline", "current")
    assert baseline.rss_mb(2048, "linux") == 2.0
    assert baseline.rss_mb(2 << 20, "darwin") == 2.0


def test_summary_and_figures(baseline: ModuleType) -> None:
    runs = {
        "rules": {"current": [child(1.0, 44.0), child(1.2, 44.0)], "baseline": [child(1.0, 40.0), child(1.0, 40.0)]},
        "object": {"current": [child(2.0, 60.0, "x")], "baseline": [child(2.0, 60.0, "y")]},
    }
    summary = baseline.summarise(runs, pages=100)
    rules = summary["rules"]
    assert rules["current"]["cpu_ms_per_page"] == 11.0  # median 1.1 s over 100 pages
    assert rules["time_ratio"] == 1.1 and rules["rss_ratio"] == 1.1
    assert rules["same_output"] and not summary["object"]["same_output"]
    figures = baseline.figures(summary, "abc1234")
    by_label = {f["label"]: f for f in figures}
    assert by_label["extraction CPU ms/page, baseline abc1234"]["value"] == 10.0
    assert by_label["extraction time, current / baseline"]["meets"] is True
    assert by_label["extract_object peak RSS, current / baseline"]["value"] == 1.0
    assert all(f["meets"] is not None for f in figures if f["unit"] == "x")


def test_an_unknown_ref_is_a_reason_not_a_crash(baseline: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(baseline.BaselineUnavailable):
        baseline.materialise("no-such-ref-at-all", tmp_path)
    figure = baseline.unavailable_figure("no-such-ref-at-all", "git rev-parse failed")
    assert figure["value"] == "not measured: git rev-parse failed" and figure["meets"] is None
