"""``crawlstack crawl --local`` exit statuses: 1 when messages were dead-lettered (their work was lost)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawlstack import cli
from crawlstack.local import runner


def summary(**dead_letter: int) -> dict[str, Any]:
    return {
        "outcomes": {"fetched": 2},
        "pages_fetched": 2,
        "elapsed_seconds": 1.0,
        "records": 1,
        "handler_errors": [],
        "dead_letter": {"frontier": 0, "fetch": 0, "extract": 0, **dead_letter},
    }


def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, result: dict[str, Any]) -> int:
    monkeypatch.setattr(runner, "crawl_local", lambda seeds, options: result)
    return cli.main(["crawl", "--local", "http://a.test/", "--out", str(tmp_path / "out"), "--no-progress"])


def test_a_crawl_with_nothing_dead_lettered_exits_0(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, tmp_path, summary()) == 0
    assert capsys.readouterr().err == ""


def test_dead_lettered_messages_are_a_one_line_warning_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, tmp_path, summary(extract=2, fetch=1)) == 1
    out = capsys.readouterr()
    assert "crawled 2 pages" in out.out
    [line] = out.err.splitlines()
    assert line.startswith("crawlstack: warning:") and "extract 2" in line and "fetch 1" in line
    assert "frontier" not in line
