"""A crawl setting registered at run time is in every form a setting takes, with no other edit.

``throwaway_setting`` (tests/conftest.py) registers ``--throwaway-budget N``
(1-99, default 7, on ``crawl``, ``seed`` and ``watch``; its default from
``CRAWLSTACK_THROWAWAY_BUDGET``, which the stack sets). Here: each ``--help``
and its ranges, the check of its bounds, ``LocalOptions`` and what a resume
keeps, ``WatchOptions`` and what a watch keeps, the stored item on moto and
on SQLite and its default from the environment, and the reference's row. The
synthesised stack's environment: tests/infra/test_stack.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from crawlstack import aws, cli
from crawlstack.config import CrawlConfig
from crawlstack.config.schema import Setting
from crawlstack.local import runner
from crawlstack.local import watch as local_watch
from crawlstack.local.options import restored_options, saved_options
from crawlstack.local.sqlite import SqliteCrawls, StateDb

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = {
    "outcomes": {"fetched": 1},
    "pages_fetched": 1,
    "elapsed_seconds": 0.0,
    "records": 0,
    "handler_errors": [],
    "dead_letter": {},
}


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


@pytest.mark.parametrize(("command", "ranged"), [("crawl", True), ("seed", True), ("watch", False)])
def test_its_flag_is_in_each_commands_help(
    throwaway_setting: Setting, capsys: pytest.CaptureFixture[str], command: str, ranged: bool
) -> None:
    text = _help(capsys, command)
    assert "--throwaway-budget N a throwaway setting of the tests (default 7)" in text
    assert ("--throwaway-budget 1-99" in text) is ranged  # the ranges crawl's and seed's help list


def test_its_bounds_are_checked_as_every_settings_are(
    throwaway_setting: Setting, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["crawl", "--local", "http://a.test/", "--out", str(tmp_path)], ["watch", "--local", "OUT"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*argv, "--throwaway-budget", "100"])
        assert exit_info.value.code == 2
        assert "argument --throwaway-budget: must be at most 99" in capsys.readouterr().err


def test_a_local_crawl_takes_it_and_a_resume_keeps_it(
    throwaway_setting: Setting, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(runner, "crawl_local", lambda seeds, options: seen.append(options) or SUMMARY)
    argv = ["crawl", "--local", "http://a.test/", "--out", str(tmp_path / "out"), "--no-progress"]
    assert cli.main([*argv, "--throwaway-budget", "12"]) == 0
    assert cli.main(argv) == 0
    given, default = seen
    assert (given.config.value("throwaway_budget"), default.config.value("throwaway_budget")) == (12, 7)
    saved = saved_options(given)
    assert saved["throwaway_budget"] == 12
    assert restored_options(saved)["config"].value("throwaway_budget") == 12
    # A crawl saved before the setting existed resumes with its default.
    del saved["throwaway_budget"]
    assert restored_options(saved)["config"].value("throwaway_budget") == 7


def test_a_watch_takes_it_and_keeps_it_for_its_next_run(
    throwaway_setting: Setting, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[local_watch.WatchOptions] = []

    def watch_local(options: local_watch.WatchOptions) -> dict[str, Any]:
        seen.append(options)
        raise KeyboardInterrupt  # the watch would start here

    monkeypatch.setattr(local_watch, "watch_local", watch_local)
    assert cli.main(["watch", "--local", "OUT", "--throwaway-budget", "12"]) == 130
    [options] = seen
    assert options.given == {"throwaway_budget": 12}
    kept = local_watch.kept_settings(options, None)
    assert kept.crawl_settings()["throwaway_budget"] == 12 and kept.saved()["throwaway_budget"] == 12
    # The next run, without the flag, keeps it; a damaged value gives way to the default.
    again = local_watch.kept_settings(local_watch.WatchOptions("OUT"), kept.saved())
    assert again.crawl_settings()["throwaway_budget"] == 12
    damaged = local_watch.kept_settings(local_watch.WatchOptions("OUT"), {"throwaway_budget": 500})
    assert damaged.crawl_settings()["throwaway_budget"] == 7


@pytest.fixture(params=["moto", "sqlite"])
def crawls(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SqliteCrawls(StateDb(tmp_path / "state.sqlite"))
    names: aws.StackNames = request.getfixturevalue("stack_names")
    return aws.CrawlStore(names.crawls, cache_seconds=0)


def test_both_backends_store_it_and_default_it_from_the_environment(
    throwaway_setting: Setting, crawls: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = CrawlConfig(crawl_id="c1").with_values(throwaway_budget=12)
    assert config.to_item()["throwaway_budget"] == 12
    assert crawls.put_new(config)
    assert crawls.get("c1", max_age=0).value("throwaway_budget") == 12
    # Stored as seed stores a crawl: only the settings given; the rest from the function's environment.
    monkeypatch.setenv("CRAWLSTACK_THROWAWAY_BUDGET", "5")
    assert crawls.put_new(CrawlConfig(crawl_id="c2", max_depth=1), only=("max_depth",))
    assert crawls.get("c2", max_age=0).value("throwaway_budget") == 5
    assert crawls.get("c1", max_age=0).value("throwaway_budget") == 12


def test_the_reference_has_its_row(throwaway_setting: Setting) -> None:
    spec = importlib.util.spec_from_file_location("settings_doc", ROOT / "scripts" / "settings_doc.py")
    assert spec is not None and spec.loader is not None
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)
    assert "| `--throwaway-budget N` | a throwaway setting of the tests (default 7) |" in doc.rows("crawl")
    assert "| `--throwaway-budget N` | as for `crawl` |" in doc.rows("watch")
