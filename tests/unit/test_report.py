"""The crawl report: facts from OUT/ or Athena's rows, and a page that keeps page strings as text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hostile_report import HOSTILE, hostile_facts

from crawlstack.records.tables import QueryResult
from crawlstack.report import from_out, render, report_out
from crawlstack.report.athena import from_athena, queries
from crawlstack.report.facts import empty, epoch
from crawlstack.report.page import figures


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_facts_from_out_count_ends_tries_and_field_coverage(tmp_path: Path) -> None:
    write(
        tmp_path / "crawl-log.jsonl",
        [
            {
                "url": "http://a.test/",
                "outcome": "fetched",
                "status": 200,
                "depth": 0,
                "started_at": "2026-01-01T00:00:00.000000+00:00",
                "fetched_at": 1767225600.25,
            },
            {
                "url": "http://a.test/x",
                "outcome": "failed",
                "status": 503,
                "depth": 1,
                "reason": "503 Service Unavailable after 3 attempts",
                "earlier_tries": ["2026-01-01T00:00:01.000000+00:00", "2026-01-01T00:00:02.000000+00:00"],
                "started_at": "2026-01-01T00:00:04.000000+00:00",
                "fetched_at": 1767225604.5,
            },
            {"url": "http://b.test:81/", "outcome": "dropped", "depth": 1, "reason": "port 81 is not allowed"},
        ],
    )
    write(
        tmp_path / "records.jsonl",
        [
            {"mapping": "doc", "fields": {"title": "T", "tags": [], "n": 0}},
            {"mapping": "doc", "fields": {"title": " ", "tags": ["a"], "n": None}},
        ],
    )
    (tmp_path / "summary.json").write_text(json.dumps({"crawl_id": "c9", "settings": {"delay": 1.5}}))
    facts = from_out(tmp_path)
    assert (facts.crawl_id, facts.delay) == ("c9", 1.5)
    assert facts.outcomes == {"fetched": 1, "failed": 1, "dropped": 1}
    assert facts.statuses == {"200": 1, "503": 1} and facts.depths == {0: 1, 1: 2}
    assert [(r.outcome, r.seconds) for r in facts.requests["a.test"]] == [
        ("fetched", 0.25),
        ("retry", None),
        ("retry", None),
        ("failed", 0.5),
    ]
    assert facts.endings.reasons["dropped"] == {"port 81 is not allowed": 1}
    cover = facts.coverage["doc"]
    # A zero is a value; a blank string, an empty list and a null are not.
    assert cover.records == 2 and cover.filled == {"title": 1, "tags": 1, "n": 1}


def test_empty_values() -> None:
    assert all(empty(v) for v in (None, "", "  ", [], {}, "[]", "{}"))
    assert not any(empty(v) for v in (0, False, "0", ["x"], {"k": 1}))


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def test_every_string_from_a_page_is_escaped_before_plotly_sees_it() -> None:
    facts = hostile_facts()
    plotted = [s for _, _, figure in figures(facts) if figure is not None for s in strings(figure.to_dict())]
    # Plotly renders some HTML in labels: no raw markup may reach a label, a name or a hover text.
    assert not [s for s in plotted if "<script" in s or "<img" in s]
    assert sum("&lt;script&gt;" in s for s in plotted) >= 4  # the host, the reasons, the mapping and the field
    page = render(facts)
    assert HOSTILE not in page and "&lt;script&gt;" in page.split("<script>", 1)[0]  # the <title>


def test_the_report_embeds_plotly_and_asks_for_nothing_over_the_network(tmp_path: Path) -> None:
    write(tmp_path / "crawl-log.jsonl", [{"url": "http://a.test/", "outcome": "fetched", "depth": 0, "status": 200}])
    page = report_out(tmp_path).read_text(encoding="utf-8")
    # plotly.js itself names its CDN (for map tiles, unused here); what matters is no tag loads from anywhere.
    assert "Plotly" in page
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?https?:""", page)
    assert "default-src 'none'" in page


def athena_rows(columns: list[str], *rows: list[Any]) -> QueryResult:
    return QueryResult(columns, [[None if v is None else str(v) for v in row] for row in rows])


def test_facts_from_athena_take_each_urls_last_line_and_every_try() -> None:
    log_columns = ["url", "outcome", "reason", "status", "depth", "started_at", "fetched_at", "attempt"]
    t0 = "2026-01-01T00:00:00.000000+00:00"
    t1 = "2026-01-01T00:00:03.000000+00:00"
    answers = {
        "log": athena_rows(
            log_columns,
            ["http://a.test/x", "fetched", None, 200, 1, t1, 1767225603.5, 2],
            ["http://a.test/x", "retry", "503 on attempt 1", 503, 1, t0, 1767225600.1, 1],
            ["http://a.test/y", "fetched", None, 200, 1, t0, 1767225600.2, 1],
            # An extraction's failure, after the fetch of the same page.
            ["http://a.test/y", "failed", "extraction failed: boom", None, 1, None, None, None],
        ),
        "records": athena_rows(["mapping", "records"], ["doc", 4]),
        "fields": athena_rows(["mapping", "name", "filled"], ["doc", "title", 3], ["doc", "tags", 0]),
    }
    sql = queries("it's")
    assert "crawl_id = 'it''s'" in sql["log"]
    # Athena returns rows in no order: every order gives the same facts.
    for rows in (answers["log"].rows, answers["log"].rows[::-1]):
        asked: list[str] = []
        replies = {**answers, "log": QueryResult(answers["log"].columns, rows)}

        def run(statement: str, asked: list[str] = asked, replies: dict[str, QueryResult] = replies) -> QueryResult:
            asked.append(statement)
            return replies[next(k for k, v in sql.items() if v == statement)]

        facts = from_athena(run, "it's", "Athena (db)")
        assert asked == list(sql.values())
        assert facts.outcomes == {"fetched": 1, "failed": 1}
        assert facts.endings.reasons["failed"] == {"extraction failed": 1}
        # Each URL ends at its last request's start, whichever line says how it ended.
        assert sorted(facts.ended_at["failed"]) == [epoch(t0)] and sorted(facts.ended_at["fetched"]) == [epoch(t1)]
        assert sorted(r.outcome for r in facts.requests["a.test"]) == ["fetched", "fetched", "retry"]
        assert facts.coverage["doc"].records == 4 and facts.coverage["doc"].filled == {"title": 3, "tags": 0}
    assert "Athena (db)" in render(facts)


def test_a_running_or_killed_crawls_log_counts_each_url_once(tmp_path: Path) -> None:
    """While a crawl runs, crawl-log.jsonl has a line per try (a resumed one after the earlier per-URL lines)."""
    write(
        tmp_path / "crawl-log.jsonl",
        [
            # The earlier run's end-of-crawl line, then the resumed run's tries of the same URL.
            {
                "url": "http://a.test/x",
                "outcome": "failed",
                "reason": "interrupted: left in state 'queued'",
                "depth": 1,
            },
            {
                "url": "http://a.test/x",
                "outcome": "retry",
                "status": 503,
                "depth": 1,
                "attempt": 1,
                "started_at": "2026-01-01T00:00:00",
                "fetched_at": 1767225600.5,
            },
            {
                "url": "http://a.test/x",
                "outcome": "fetched",
                "status": 200,
                "depth": 1,
                "attempt": 2,
                "started_at": "2026-01-01T00:00:05.000000+00:00",
                "fetched_at": 1767225605.25,
            },
            {
                "url": "http://a.test/y",
                "outcome": "fetched",
                "status": 200,
                "depth": 1,
                "attempt": 1,
                "started_at": "2026-01-01T00:00:06.000000+00:00",
                "fetched_at": 1767225606.5,
            },
            {"url": "http://a.test/y", "outcome": "failed", "reason": "extraction failed: boom", "depth": 1},
        ],
    )
    facts = from_out(tmp_path)
    assert facts.outcomes == {"fetched": 1, "failed": 1}
    assert facts.endings.reasons == {"failed": {"extraction failed": 1}}
    # A time without a zone is UTC, as the crawl log writes them.
    assert [(r.started, r.seconds) for r in sorted(facts.requests["a.test"], key=lambda r: r.started)] == [
        (1767225600.0, 0.5),
        (1767225605.0, 0.25),
        (1767225606.0, 0.5),
    ]


def test_a_damaged_out_gives_a_report_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("[1, 2]")
    good = {"url": "http://a.test/", "outcome": "fetched", "depth": 0, "status": 200}
    odd = {"url": "http://a.test/z", "outcome": "fetched", "depth": "x", "earlier_tries": 5, "status": "200"}
    cut = b'{"url": "http://a.test/w", "outcome": "fetched", "title": "caf\xc3'  # a kill mid-character
    (tmp_path / "crawl-log.jsonl").write_bytes(
        b"\n".join(json.dumps(x).encode() for x in (good, odd, [1])) + b"\nnot json\n" + cut
    )
    (tmp_path / "records.jsonl").write_bytes(b'{"mapping": "m", "fields": "oops"}\n\xff\xfe\n')
    facts = from_out(tmp_path)
    assert facts.outcomes == {"fetched": 2} and facts.depths == {0: 2} and facts.statuses == {"200": 1}
    assert facts.coverage["m"].records == 1
    assert "Crawl" in render(facts)
