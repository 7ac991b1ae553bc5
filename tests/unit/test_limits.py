"""Ids and numbers past what DynamoDB, S3 or the crawl can take are refused before any request, one line each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlstack import aws, cli, jobs, limits, settings
from crawlstack.cli import common, crawl
from crawlstack.local import runner

LONGEST_CRAWL_ID = "\u00e9" * (limits.MAX_CRAWL_ID_BYTES // 2)  # 2 bytes each, 6 once percent-encoded
LONGEST_RECORD_ID = "r" * limits.MAX_RECORD_ID_BYTES


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def test_the_longest_ids_allowed_fit_every_key_built_from_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from crawlstack.extract import records_key
    from crawlstack.fetch.crawllog import partition_path

    assert _size(LONGEST_CRAWL_ID) == limits.MAX_CRAWL_ID_BYTES
    partition_keys = [
        LONGEST_CRAWL_ID,  # the crawls table
        aws.UrlStore.key(LONGEST_CRAWL_ID, "f" * 32)["pk"]["S"],
        aws.ResolvedStore.key(LONGEST_CRAWL_ID, LONGEST_RECORD_ID)["pk"]["S"],
        jobs.held_host(LONGEST_CRAWL_ID),
    ]
    assert max(map(_size, partition_keys)) <= limits.DYNAMODB_PARTITION_KEY_MAX_BYTES

    taken: list[dict[str, Any]] = []
    monkeypatch.setattr(aws.clients, "take_from_counter", lambda connection, table, key, pages, cap: taken.append(key))
    aws.ScopeStore("hosts", "urls").count_host_page(LONGEST_CRAWL_ID, "a.test", 10)
    assert _size(taken[0]["kind"]["S"]) <= limits.DYNAMODB_SORT_KEY_MAX_BYTES

    name = "0" * 24
    s3_keys = [
        records_key(f"{settings.PAGES_PREFIX}dt=2030-12-31/{name}.warc.gz", LONGEST_CRAWL_ID),
        f"{partition_path(settings.CRAWL_LOG_PREFIX, LONGEST_CRAWL_ID, 1.9e9)}{name}.jsonl.gz",
    ]
    assert max(map(_size, s3_keys)) <= limits.S3_KEY_MAX_BYTES


def _no_crawl(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    started: list[Any] = []
    monkeypatch.setattr(runner, "crawl_local", lambda seeds, options: started.append(options))
    return started


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--delay", "inf", "must be at most 300"),
        ("--delay", "1e300", "must be at most 300"),
        ("--delay", "-1", "must be 0 or more"),
        ("--delay", "nan", "not a number: 'nan'"),
        ("--delay", "1e-200", "beyond what DynamoDB stores"),
        ("--max-pages", "1" + "0" * 41, "must be at most 1000000000"),
        ("--max-pages", "0", "must be 1 or more"),
        ("--max-pages", "9" * 5000, "not an integer: '9999999999999999999999999999999999999999...'"),
        ("--max-pages-per-host", "10000000000", "must be at most 1000000000"),
        ("--max-depth", "1000001", "must be at most 1000000"),
        ("--concurrency", "100000", "must be at most 256"),
        ("--user-agent", "bot\r\nX-Evil: 1", "control characters"),
    ],
)
def test_crawl_flags_out_of_range_are_usage_errors(
    flag: str,
    value: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = _no_crawl(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["crawl", "--local", "http://a.test/", "--out", str(tmp_path / "out"), f"{flag}={value}"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"crawlstack crawl: error: argument {flag}: ") and message in error, error
    assert not started and not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "0.25", "300", "1e-3"])
def test_delays_in_range_pass(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[float] = []
    monkeypatch.setattr(crawl, "run", lambda args: started.append(args.delay) or 0)
    assert cli.main(["crawl", "--local", "http://a.test/", "--out", str(tmp_path), "--delay", value]) == 0
    assert started == [float(value)]


def test_an_over_long_record_id_is_refused_before_the_crawl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _no_crawl(monkeypatch)
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"url": "http://a.test/", "record_id": "r" * 2100}) + "\n", encoding="utf-8")
    assert cli.main(["crawl", "--local", "--out", str(tmp_path / "out"), "--seeds-file", str(seeds)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and '"record_id" is at most 1024 bytes' in err[0] and "got 2100" in err[0], err
    assert not started


def test_the_longest_record_id_allowed_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Any] = []
    monkeypatch.setattr(runner, "crawl_local", lambda seeds, options: started.append(seeds) or _summary())
    seeds = tmp_path / "seeds.jsonl"
    # Multi-byte: the limit counts UTF-8 bytes, not characters.
    seeds.write_text(json.dumps({"url": "http://a.test/", "record_id": "\u00e9" * 512}) + "\n", encoding="utf-8")
    assert cli.main(["crawl", "--local", "--out", str(tmp_path / "out"), "--seeds-file", str(seeds)]) == 0
    assert started[0][0].record_id == "\u00e9" * 512


def _summary() -> dict[str, Any]:
    return {
        "outcomes": {"fetched": 1},
        "pages_fetched": 1,  # a crawl that fetched nothing exits 3
        "elapsed_seconds": 0.0,
        "records": 0,
        "handler_errors": [],
        "dead_letter": {},
    }


def _no_stack(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    contacted: list[Any] = []
    monkeypatch.setattr(common, "stack", lambda args: contacted.append(args) or pytest.fail("contacted the stack"))
    return contacted


@pytest.mark.parametrize(
    "argv",
    [
        ["seed", "https://a.test/", "--crawl-id", "c" * 300],
        ["seed", "https://a.test/", "--crawl-id", ""],
        ["seed", "https://a.test/", "--crawl-id", "c", "--max-pages", "1" + "0" * 41],
        ["seed", "https://a.test/", "--crawl-id", "c", "--delay", "inf"],
        ["status", "c" * 2049],
        ["records", "--crawl-id", "c" * 2049],
        ["records", "--limit", "0"],
        ["query", "SELECT 1", "--timeout", "inf"],
        ["dlq", "show", "--limit", "1" + "0" * 41],
    ],
)
def test_deployed_commands_refuse_bad_ids_and_numbers_before_any_request(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_stack(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"crawlstack {argv[0]}")


def test_crawl_stop_refuses_an_over_long_crawl_id(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_stack(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["crawl", "stop", "c" * 257])
    assert exit_info.value.code == 2
    assert "a crawl id is at most 256 bytes" in capsys.readouterr().err


def test_seeding_refuses_an_over_long_record_id_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_stack(monkeypatch)
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"url": "http://a.test/", "record_id": "r" * 2100}) + "\n", encoding="utf-8")
    assert cli.main(["seed", "--crawl-id", "c", "--seeds-file", str(seeds)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("crawlstack: error: ") and "record_id" in err[0]


def test_an_oversized_crawl_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_stack(monkeypatch)
    deny = ["x" * 100_000] * 4
    argv = ["seed", "https://a.test/", "--crawl-id", "c", *(a for d in deny for a in ("--deny", d))]
    assert cli.main(argv) == 2
    assert "fit the crawl's config item" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("number", "ok"),
    [(0, True), (0.001, True), (300.0, True), (10**38, True), (10**38 + 1, False), (1e-131, False), (1e126, False)],
)
def test_dynamodb_numbers(number: float, ok: bool) -> None:
    assert (limits.dynamodb_number_problem(number) is None) == ok


LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": "/list"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [{"name": "url", "processors": [{"type": "css", "parameters": {"selector": "a"}}]}],
}


def _watch_folder(tmp_path: Path) -> Path:
    """An OUT/ holding one source, as ``sources add`` leaves it."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "listing.json").write_text(json.dumps(LISTING), encoding="utf-8")
    sources = tmp_path / "sources.jsonl"
    sources.write_text(json.dumps({"url": "http://a.test/list", "mapping": "listing", "id": "a"}) + "\n")
    out = tmp_path / "out"
    argv = ["sources", "add", "--file", str(sources), "--rules", str(tmp_path / "rules"), "--local", str(out)]
    assert cli.main(argv) == 0
    return out


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _no_watch(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from crawlstack.local import watch

    started: list[Any] = []

    def watch_local(options: Any) -> dict[str, Any]:
        started.append(options)
        raise AssertionError("the watch started")

    monkeypatch.setattr(watch, "watch_local", watch_local)
    return started


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:00:00",  # issue 27: a year-10000 crash, then every later simulation on OUT/ too
        "2101-01-01T00:00:00",
        "2100-12-31T23:00:00-14:00",  # 2101 in UTC
        "1999-12-31T23:59:59Z",
        "0001-01-01T00:00:00",
    ],
)
def test_a_sim_start_outside_2000_to_2100_is_refused_and_out_is_untouched(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _watch_folder(tmp_path)
    before = _files(out)
    started = _no_watch(monkeypatch)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["watch", "--local", str(out), "--simulate-days", "1", "--sim-start", value])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (
        "crawlstack watch: error: argument --sim-start: "
        f"must lie between 2000 and 2100 (UTC): got {value!r}"
    )
    assert not started and _files(out) == before


@pytest.mark.parametrize(
    ("value", "epoch"), [("2000-01-01T00:00:00", 946_684_800.0), ("2100-12-31T23:59:59Z", 4_133_980_799.0)]
)
def test_a_sim_start_from_2000_to_2100_is_taken(value: str, epoch: float, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _no_watch(monkeypatch)
    with pytest.raises(AssertionError, match="the watch started"):
        cli.main(["watch", "--local", "OUT", "--simulate-days", "1", "--sim-start", value])
    assert [options.sim_start for options in started] == [epoch]


NOT_UTF8 = "is not valid UTF-8 text (it holds a lone surrogate, such as JSON's \\ud800)"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # Issue 27: it passed, and failed its dispatch batch, good seeds and all, to the DLQ.
        ({"url": "http://a.test/", "record_id": "\ud800"}, f'"record_id" {NOT_UTF8}'),
        ({"url": "http://a.test/", "record_id": "a", "want": ["\udcff"]}, f'"want" {NOT_UTF8}'),
        ({"url": "http://a.test/\ud800"}, f'"url" {NOT_UTF8}'),
    ],
)
def test_a_seed_that_is_not_utf8_is_refused_before_the_crawl(
    line: dict[str, Any],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = _no_crawl(monkeypatch)
    seeds = tmp_path / "seeds.jsonl"
    good = json.dumps({"url": "http://a.test/good", "record_id": "good"})
    seeds.write_text(f"{good}\n{json.dumps(line)}\n", encoding="utf-8")  # json.dumps writes "\ud800" as an escape
    assert cli.main(["crawl", "--local", "--out", str(tmp_path / "out"), "--seeds-file", str(seeds)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"crawlstack: error: {seeds}:2: {message}"]
    assert not started and not (tmp_path / "out").exists()


def test_seeding_refuses_a_record_id_that_is_not_utf8_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_stack(monkeypatch)
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"url": "http://a.test/", "record_id": "\ud800"}) + "\n", encoding="utf-8")
    assert cli.main(["seed", "--crawl-id", "c", "--seeds-file", str(seeds)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f'crawlstack: error: {seeds}:1: "record_id" {NOT_UTF8}']


def test_seeding_refuses_a_crawl_id_or_user_agent_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A byte that is not UTF-8 in argv reaches Python as a lone surrogate (surrogateescape).
    _no_stack(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["seed", "https://a.test/", "--crawl-id", "c\udcff"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"--crawl-id: a crawl id {NOT_UTF8}")
    assert cli.main(["seed", "https://a.test/", "--crawl-id", "c", "--user-agent", "bot/1 \udcff"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"crawlstack: error: --user-agent, --allow, --deny or --rules-set {NOT_UTF8}"
    ]
