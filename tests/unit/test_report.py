"""The crawl report: facts from OUT/ or Athena's rows, and a page that keeps page strings as text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from crawlstack.deployed import QueryResult
from crawlstack.report import from_out, render, report_out
from crawlstack.report.athena import from_athena, queries
from crawlstack.report.facts import CrawlFacts, Request, empty

HOSTILE = "<script>window.__xss = 1</script><img src=x onerror=alert(1)>"


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


def hostile_facts() -> CrawlFacts:
    facts = CrawlFacts(HOSTILE, 1.0, HOSTILE)
    for n, outcome in enumerate(("fetched", "failed", "skipped")):
        facts.add_end(
            {
                "url": f"http://{n}.test/",
                "outcome": outcome,
                "status": 200,
                "depth": n,
                "reason": None if outcome == "fetched" else f"{HOSTILE}: why",
                "started_at": f"2026-01-01T00:00:0{n}.000000+00:00",
            }
        )
    facts.requests[HOSTILE] = [Request(1_767_225_600.0 + i, 0.1, "fetched", 200) for i in range(3)]
    facts.add_record(HOSTILE, {HOSTILE: "x", "title": ""})
    return facts


def test_every_string_from_a_page_is_escaped() -> None:
    page = render(hostile_facts())
    assert HOSTILE not in page
    assert "<img src=x" not in page and "<script>window" not in page
    assert "&lt;script&gt;" in page  # the title and summary hold it as text


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
    asked: list[str] = []
    sql = queries("it's")

    def run(statement: str) -> QueryResult:
        asked.append(statement)
        return answers[next(k for k, v in sql.items() if v == statement)]

    facts = from_athena(run, "it's", "Athena (db)")
    assert asked == list(sql.values()) and "crawl_id = 'it''s'" in sql["log"]
    assert facts.outcomes == {"fetched": 1, "failed": 1}
    assert facts.endings.reasons["failed"] == {"extraction failed": 1}
    assert sorted(r.outcome for r in facts.requests["a.test"]) == ["fetched", "fetched", "retry"]
    assert facts.coverage["doc"].records == 4 and facts.coverage["doc"].filled == {"title": 3, "tags": 0}
    assert "Athena (db)" in render(facts)
