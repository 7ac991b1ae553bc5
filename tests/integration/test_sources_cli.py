"""``crawlstack sources add|list|show|remove --local OUT``: a bad source is one line, exit 2, and changes nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from webs import write_rules

from crawlstack.cli import main

LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "domain", "pattern": "news.example"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [
        {"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]},
        {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "a"}}]},
    ],
}
PAGE = {"name": "page", "url_patterns": [{"type": "domain", "pattern": "other.example"}], "fields": []}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["sources", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    return write_rules(tmp_path / "rules", [LISTING, PAGE])


def test_sources_are_added_listed_shown_and_removed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rules: Path
) -> None:
    out = str(tmp_path / "watch")
    code, printed, err = run(
        capsys,
        "add",
        "http://news.example/latest",
        "--mapping",
        "listing",
        "--id",
        "news",
        "--priority-max",
        "4",
        "--pagination",
        "page",
        "--rules",
        str(rules),
        "--local",
        out,
    )
    assert (code, err, printed) == (0, "", "added 1 source: news\n")
    lines = tmp_path / "sources.jsonl"
    lines.write_text(
        json.dumps({"url": "http://news.example/api", "mapping": "listing", "id": "api", "identity": "title"})
        + "\n\n"
        + json.dumps({"url": "http://news.example/b", "mapping": "listing", "strategy": "velocity"})
        + "\n"
    )
    # Without --rules, the rules stored by the first add check them.
    code, printed, err = run(capsys, "add", "--file", str(lines), "--local", out)
    assert code == 0 and printed.startswith("added 2 sources: api, s-"), err
    code, printed, _ = run(capsys, "list", "--local", out)
    assert [line.split()[0] for line in printed.splitlines()[2:]][:2] == ["api", "news"]
    code, printed, _ = run(capsys, "show", "news", "--local", out)
    shown = json.loads(printed)
    assert (shown["priority_max"], shown["pagination"], shown["pagination_parameter"]) == (4.0, "page", "page")
    assert run(capsys, "remove", "news", "--local", out)[:2] == (0, "removed news\n")
    code, _, err = run(capsys, "remove", "news", "--local", out)
    assert code == 2 and err.count("\n") == 1 and "no source with id 'news'" in err


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"url": "http://news.example/x", "mapping": "nope"}, "no mapping named 'nope'"),
        ({"url": "http://news.example/x", "mapping": "page"}, "has no items"),
        ({"url": "not a url", "mapping": "listing"}, "invalid URL"),
        ({"url": "http://news.example/x", "mapping": "listing", "priority_min": -1}, "must be above 0"),
        ({"url": "http://news.example/x", "mapping": "listing", "id": "first"}, "'first' already exists"),
    ],
)
def test_a_bad_line_changes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rules: Path, line: dict[str, object], problem: str
) -> None:
    out = str(tmp_path / "watch")
    assert (
        run(
            capsys,
            "add",
            "http://news.example/",
            "--mapping",
            "listing",
            "--id",
            "first",
            "--rules",
            str(rules),
            "--local",
            out,
        )[0]
        == 0
    )
    good = {"url": "http://news.example/good", "mapping": "listing", "id": "good"}
    lines = tmp_path / "sources.jsonl"
    lines.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    code, _, err = run(capsys, "add", "--file", str(lines), "--local", out)
    assert code == 2 and err.count("\n") == 1 and problem in err and f"{lines}:2:" in err
    assert [row.split()[0] for row in run(capsys, "list", "--local", out)[1].splitlines()[2:]] == ["first"]


def test_sources_of_an_out_with_none_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "list", "--local", str(tmp_path / "none"))
    assert code == 2 and err.count("\n") == 1 and "holds no sources" in err
    code, _, err = run(capsys, "add", "http://news.example/", "--local", str(tmp_path / "none"))
    assert code == 2 and "no mapping named None" in err


def test_new_rules_keep_the_stored_ones_and_may_not_break_a_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rules: Path
) -> None:
    out = str(tmp_path / "watch")
    first = ("add", "http://news.example/", "--mapping", "listing", "--id", "news", "--rules", str(rules))
    assert run(capsys, *first, "--local", out)[0] == 0
    # Another rules directory, without listing.json: the stored listing mapping stays.
    more = write_rules(tmp_path / "more", [{**LISTING, "name": "feed"}])
    (more / "listing.json").unlink(missing_ok=True)
    code, _, err = run(
        capsys, "add", "http://news.example/f", "--mapping", "feed", "--rules", str(more), "--local", out
    )
    assert code == 0, err
    # A listing.json whose mapping has no items any more would break "news": refused, nothing changed.
    broken = write_rules(tmp_path / "broken", [{**PAGE, "name": "listing"}])
    code, _, err = run(
        capsys, "add", "http://news.example/g", "--mapping", "feed", "--rules", str(broken), "--local", out
    )
    assert code == 2 and "source 'news' would no longer load" in err and err.count("\n") == 1
    rows = [row.split()[0] for row in run(capsys, "list", "--local", out)[1].splitlines()[2:]]
    assert len(rows) == 2 and "news" in rows


def test_status_and_dlq_show_read_an_out_that_sources_add_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rules: Path
) -> None:
    # Issue 28: a reader cannot create the tables a watch or a crawl would make; status --local
    # right after sources add ended in "attempt to write a readonly database".
    one, many = str(tmp_path / "one"), str(tmp_path / "many")
    added = run(capsys, "add", "http://news.example/", "--mapping", "listing", "--id", "news", "--rules", str(rules),
                "--local", one)  # fmt: skip
    assert added[0] == 0, added[2]
    lines = tmp_path / "sources.jsonl"
    lines.write_text(json.dumps({"url": "http://news.example/b", "mapping": "listing", "id": "b"}) + "\n")
    assert run(capsys, "add", "--file", str(lines), "--rules", str(rules), "--local", many)[0] == 0
    for out, source in ((one, "news"), (many, "b")):
        code = main(["status", "--local", out])
        printed, err = capsys.readouterr()
        assert (code, err) == (0, ""), err
        assert printed.startswith("queue ") and "no crawl has seen a URL yet" in printed
        # The source is listed, not yet checked.
        assert printed.splitlines()[-1].split() == [source, "0", "0"], printed
        code = main(["dlq", "show", "--local", out])
        printed, err = capsys.readouterr()
        assert (code, err) == (0, "") and "frontier dead-letter queue: 0 messages" in printed, err
        # Nothing was written to the state: it holds the sources' table alone, as sources add left it.
        with sqlite3.connect(Path(out) / "state.sqlite") as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"crawl_meta", "sources"}
