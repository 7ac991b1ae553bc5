"""``crawl --local``: mistakes in seeds files and flags are refused before any request, one line each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlstack.cli import main

MAPPING = {
    "name": "shop",
    "url_patterns": [{"type": "domain", "pattern": "shop.example"}],
    "fields": [
        {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "h1"}}]},
        {"name": "country", "processors": [{"type": "css", "parameters": {"selector": ".country"}}]},
    ],
}


@pytest.fixture
def rules(tmp_path: Path) -> str:
    path = tmp_path / "rules" / "shop.json"
    path.parent.mkdir()
    path.write_text(json.dumps(MAPPING), encoding="utf-8")
    return str(path.parent)


def crawl(tmp_path: Path, rules: str | None, lines: list[Any], *extra: str) -> int:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    argv = ["crawl", "--local", "--out", str(tmp_path / "out"), "--seeds-file", str(seeds), *extra]
    return main([*argv, "--rules", rules] if rules else argv)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([{"url": "http://shop.example/", "wnat": ["title"], "record_id": "a"}], "unknown key 'wnat'"),
        ([{"url": "http://shop.example/", "want": ["title"]}], '"want" needs a "record_id"'),
        ([{"url": "http://shop.example/", "record_id": ""}], '"record_id" must not be empty'),
        ([{"url": "http://shop.example/", "record_id": [1]}], '"record_id" must be a string'),
        ([{"url": "http://shop.example/", "record_id": "a", "want": ["colour"]}], "no mapping extracts a field named"),
        ([{"url": "http://shop.example/", "record_id": "a", "want": "title"}], '"want" must be a list'),
        (
            [
                {"url": "http://shop.example/1", "record_id": "a", "want": ["title"]},
                {"url": "http://shop.example/2", "record_id": "a", "want": ["country"]},
            ],
            "already has a different",
        ),
        (["{not json"], "invalid JSON"),
        ([{"url": "not a url"}], "invalid URL"),
        ([], "has no seed lines"),
    ],
)
def test_seed_file_mistakes_are_one_line(
    tmp_path: Path, rules: str, capsys: pytest.CaptureFixture[str], lines: list[Any], message: str
) -> None:
    assert crawl(tmp_path, rules, lines) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()


def test_want_without_rules_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert crawl(tmp_path, None, [{"url": "http://shop.example/", "record_id": "a", "want": ["title"]}]) == 2
    assert "needs --rules" in capsys.readouterr().err


def test_out_must_be_a_directory(tmp_path: Path, rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").write_text("a file")
    assert crawl(tmp_path, rules, [{"url": "http://shop.example/"}]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--deny", "--allow"])
def test_bad_allow_and_deny_regexes_are_refused(
    tmp_path: Path, rules: str, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    with pytest.raises(SystemExit) as info:
        crawl(tmp_path, rules, [{"url": "http://shop.example/"}], flag, "(")
    assert info.value.code == 2
    assert f"argument {flag}: invalid regex '('" in capsys.readouterr().err
