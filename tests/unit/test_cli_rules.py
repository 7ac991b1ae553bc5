"""``crawlstack rules validate`` and ``crawlstack rules test --file``: exit codes and one-line messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlstack import settings
from crawlstack.cli import main

GOOD = {
    "name": "posts",
    "url_patterns": [{"type": "domain", "pattern": "api.example"}],
    "content_types": ["application/json"],
    "url_parsers": [{"processors": [{"type": "jsonpath", "parameters": {"expression": "$.next"}}]}],
    "fields": [
        {
            "name": "blogs",
            "multiple": True,
            "processors": [{"type": "jsonpath", "parameters": {"expression": "$.posts[*].blog"}}],
        },
        {"name": "total", "processors": [{"type": "jsonpath", "parameters": {"expression": "$.total"}}]},
    ],
}
BROKEN = {
    "name": "broken",
    "url_patterns": [{"type": "regex", "pattern": "(unclosed"}],
    "fields": [
        {"name": "a", "processors": [{"type": "xpath", "parameters": {"expression": "//a["}}]},
        {"name": "b", "processors": [{"type": "css", "parameters": {"selector": "a["}}]},
    ],
}


def write(directory: Path, name: str, data: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_validate_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "posts.json", GOOD)
    assert main(["rules", "validate", str(tmp_path)]) == 0
    assert "1 mapping(s) OK" in capsys.readouterr().out


def test_validate_reports_every_error_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "good.json", GOOD)
    bad = write(tmp_path, "broken.json", BROKEN)
    write(tmp_path, "typo.json", '{"name": "x",}')
    assert main(["rules", "validate", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert f"crawlstack: {bad}: url_patterns[0].pattern: invalid regex: missing ) at position" in lines[0]
    assert any("fields[0].processors[0].parameters.expression: invalid XPath" in line for line in lines)
    assert any("fields[1].processors[0].parameters.selector: invalid CSS selector" in line for line in lines)
    assert any("typo.json: line 1 column 14: invalid JSON" in line for line in lines)
    assert not any("Traceback" in line for line in lines)


def test_validate_schema_errors_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = dict(GOOD, fields=[{"name": "a", "processors": [{"type": "xpath", "parameters": {"expresion": "//a"}}]}])
    write(tmp_path, "m.json", data)
    assert main(["rules", "validate", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "fields[0].processors[0].parameters" in err
    assert len(err.strip().splitlines()) >= 1


@pytest.mark.parametrize("kind", ["missing", "empty dir"])
def test_validate_nothing_to_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    path = tmp_path / "nope" if kind == "missing" else tmp_path
    assert main(["rules", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1


def test_rules_test_on_a_saved_json_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path / "rules", "posts.json", GOOD)
    saved = write(tmp_path, "page.json", {"posts": [{"blog": "a"}, {"blog": "b"}], "next": "?page=2", "total": 2})
    code = main(["rules", "test", str(rules), "--url", "https://api.example/v2/posts?page=1", "--file", str(saved)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mapping"] == "posts"
    assert out["fields"] == {"blogs": ["a", "b"], "total": 2}
    assert out["links"] == ["https://api.example/v2/posts?page=2"]
    assert out["content_type"] == "application/json"


def test_rules_test_links_without_url_parsers_are_the_in_scope_hrefs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = {
        "name": "article",
        "url_patterns": [{"type": "regex", "pattern": "/post/"}],
        "fields": [{"name": "title", "processors": [{"type": "css", "parameters": {"selector": "h1::text"}}]}],
    }
    rules = write(tmp_path / "rules", "article.json", mapping)
    saved = write(
        tmp_path,
        "post.html",
        '<h1>Hi</h1><a href="/post/2">same site</a><a href="http://elsewhere.example/">off-site</a>'
        '<a href="javascript:void(0)">js</a>',
    )
    assert main(["rules", "test", str(rules), "--url", "http://blog.example/post/1", "--file", str(saved)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fields"] == {"title": "Hi"}
    assert out["links"] == ["http://blog.example/post/2"]


def test_rules_test_without_a_matching_mapping_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = write(tmp_path / "rules", "posts.json", GOOD)
    saved = write(tmp_path, "page.html", "<p>x</p>")
    assert main(["rules", "test", str(rules), "--url", "http://other.example/", "--file", str(saved)]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["mapping"] is None
    assert "no mapping" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "not a url", "--file", "page.html"], "--url: invalid URL"),
        (["--url", "http://api.example/", "--file", "absent.html"], "cannot read"),
    ],
)
def test_rules_test_user_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    rules = write(tmp_path / "rules", "posts.json", GOOD)
    write(tmp_path, "page.html", "<p>x</p>")
    argv = [str(tmp_path / a) if a.endswith(".html") else a for a in argv]
    assert main(["rules", "test", str(rules), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_validate_a_path_with_no_mappings_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "validate", "/dev/null"]) == 2
    assert "no mappings" in capsys.readouterr().err


def test_rules_test_shows_the_notes_a_crawl_log_line_would_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A field cut at its cap is said on the page's crawl-log line; trying the rule shows it too.
    monkeypatch.setattr(settings, "MAX_FIELD_CHARS", 100)
    mapping = {
        "name": "article",
        "url_patterns": [{"type": "regex", "pattern": "/post/"}],
        "fields": [{"name": "body", "processors": [{"type": "css", "parameters": {"selector": "p"}}]}],
    }
    rules = write(tmp_path / "rules", "article.json", mapping)
    saved = write(tmp_path, "post.html", "<p>" + "word " * 100 + "</p>")
    assert main(["rules", "test", str(rules), "--url", "http://blog.example/post/1", "--file", str(saved)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["fields"]["body"]) == 100
    assert out["notes"] == ["field 'body' cut at 100 characters"]
