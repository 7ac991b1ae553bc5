"""The crawl flags for spider traps and ports: ``--max-pages-per-host`` and the repeatable ``--allow-port``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawlstack import cli, settings
from crawlstack.config import CrawlConfig
from crawlstack.local import runner

DEFAULT_CAP = settings.DEFAULT_MAX_PAGES_PER_HOST

SUMMARY = {
    "outcomes": {"fetched": 1},
    "pages_fetched": 1,  # a crawl that fetched nothing exits 3
    "elapsed_seconds": 0.0,
    "records": 0,
    "handler_errors": [],
    "dead_letter": {},
}


def options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *flags: str) -> CrawlConfig:
    """The crawl settings (``LocalOptions.config``) the flags give."""
    seen: list[runner.LocalOptions] = []

    def fake(seeds: Any, opts: runner.LocalOptions) -> dict[str, Any]:
        seen.append(opts)
        return SUMMARY

    monkeypatch.setattr(runner, "crawl_local", fake)
    argv = ["crawl", "--local", "http://a.test/", "--out", str(tmp_path / "out"), "--no-progress", *flags]
    assert cli.main(argv) == 0
    return seen[0].config


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    opts = options(monkeypatch, tmp_path)
    assert (opts.max_pages_per_host, opts.allow_ports) == (settings.DEFAULT_MAX_PAGES_PER_HOST, ())


def test_flags_reach_the_crawl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    opts = options(monkeypatch, tmp_path, "--max-pages-per-host", "50", "--allow-port", "8081", "--allow-port", "9000")
    assert (opts.max_pages_per_host, opts.allow_ports) == (50, (8081, 9000))
    assert options(monkeypatch, tmp_path, "--max-pages-per-host", "0").max_pages_per_host is None  # no cap


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--allow-port", "99999"], "port 99999 out of range (1-65535)"),
        (["--allow-port", "http"], "not a port number: 'http'"),
        (["--max-pages-per-host", "-1"], "must be 0 or more"),
    ],
)
def test_bad_values_are_one_line_usage_errors(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["crawl", "--local", "http://a.test/", "--out", str(tmp_path), *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("cap", "stored", "back"),
    [(settings.DEFAULT_MAX_PAGES_PER_HOST, DEFAULT_CAP, DEFAULT_CAP), (7, 7, 7), (None, 0, None)],
)
def test_the_crawl_config_stores_the_cap_and_ports(cap: int | None, stored: int, back: int | None) -> None:
    config = CrawlConfig(crawl_id="c", max_pages_per_host=cap, allow_ports=(8081,))
    item = config.to_item()
    assert (item["max_pages_per_host"], item["allow_ports"]) == (stored, [8081])
    again = CrawlConfig.from_item(item, CrawlConfig())
    assert (again.max_pages_per_host, again.allow_ports) == (back, (8081,))
    # An item from before the cap existed gets the default cap.
    assert CrawlConfig.from_item({"crawl_id": "old"}, CrawlConfig()).max_pages_per_host == DEFAULT_CAP
