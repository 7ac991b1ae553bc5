"""``query --local`` reads OUT/ with the query tables' one schema (crawlstack.records.tables): types kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlstack.extract import record_line
from crawlstack.local.query import query_local
from crawlstack.records import tables
from crawlstack.records.tables import numbers_of


def write_lines(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    # records.jsonl as the extractor writes it (record_line adds "numbers").
    records = [
        {"mapping": "doc", "url": f"http://a.test/{n}", "fields": {"sections": n, "title": f"t{n}"}, "depth": 1}
        for n in (9, 44, 10)
    ]
    records.append({"mapping": "doc", "url": "http://a.test/x", "fields": {"sections": True, "title": "x"}, "depth": 1})
    (tmp_path / "records.jsonl").write_text(
        "".join(record_line({**r, "crawl_id": "c1", "fetched_at": 1_700_000_000.0}) for r in records),
        encoding="utf-8",
    )
    write_lines(
        tmp_path / "crawl-log.jsonl",
        [
            {
                "url": "http://a.test/9",
                "outcome": "fetched",
                "status": 200,
                "depth": 1,
                "started_at": "2023-11-14T22:13:20.250000+00:00",
            },
            {"url": "http://B.test:81/x", "outcome": "failed", "status": 503, "depth": 2, "attempts": 3},
        ],
    )
    (tmp_path / "summary.json").write_text(json.dumps({"crawl_id": "c1"}), encoding="utf-8")
    return tmp_path


def test_numbers_compare_as_numbers_where_fields_compare_as_text(out: Path) -> None:
    result = query_local(
        str(out), "SELECT max(fields['sections']), max(numbers['sections']) FROM records WHERE url <> 'http://a.test/x'"
    )
    assert result.rows == [["9", 44.0]]
    # A boolean is not a number.
    flag = query_local(str(out), "SELECT numbers['sections'] FROM records WHERE url = 'http://a.test/x'")
    assert flag.rows == [[None]]


@pytest.mark.parametrize("table", list(tables.COLUMNS))
def test_the_views_have_the_glue_tables_columns_and_types(out: Path, table: str) -> None:
    described = query_local(str(out), f"DESCRIBE {table}").rows
    expected = [(c.name, tables.duckdb_type(c)) for c in (*tables.COLUMNS[table], *tables.PARTITION_KEYS)]
    assert [(row[0], row[1].replace(" ", "")) for row in described] == [
        (name, kind.replace(" ", "")) for name, kind in expected
    ]


def test_crawl_log_view_fills_what_a_local_line_leaves_out(out: Path) -> None:
    result = query_local(
        str(out),
        "SELECT url, host, attempt, crawl_id, dt, from_iso8601_timestamp(started_at) FROM crawl_log ORDER BY url",
    )
    rows = [[str(v) for v in row] for row in result.rows]
    assert rows == [
        ["http://B.test:81/x", "b.test", "3", "c1", "None", "None"],
        ["http://a.test/9", "a.test", "1", "c1", "2023-11-14", "2023-11-14 22:13:20.250000"],
    ]


def test_numbers_leave_out_what_a_double_cannot_hold() -> None:
    huge = int("9" * 400)  # to_number reads an integer of any length
    assert numbers_of({"a": huge, "b": 2**60, "c": float("inf"), "d": 1.5, "e": False}) == {"b": 2**60, "d": 1.5}
    # The record's line is still written, the huge number whole in fields.
    line = json.loads(record_line({"mapping": "m", "fields": {"a": huge}}))
    assert line["fields"]["a"] == huge and line["numbers"] == {}
