"""The progress line of a local crawl (``crawlstack.local.progress``)."""

from __future__ import annotations

import pytest

from crawlstack.local import progress
from crawlstack.local.progress import Snapshot, render


def test_the_line_says_pages_rate_records_failures_waiting_urls_and_hosts() -> None:
    line = render(Snapshot(10.0, fetched=50, failed=2, skipped=1, records=40, waiting=300, hosts_working=5,
                           hosts_lingering=2))  # fmt: skip
    assert line == (
        "10s  pages 50 (5.0/s)  records 40  failed 2  skipped 1  URLs waiting 300  hosts 3 busy, 2 waiting for links"
    )


def test_a_page_budget_gives_an_eta_and_unknown_figures_are_left_out() -> None:
    line = render(Snapshot(60.0, fetched=600, failed=0, skipped=0), max_pages=1800)
    assert line.endswith("ETA 2m00s") and "records" not in line and "URLs waiting" not in line
    assert "ETA" not in render(Snapshot(60.0, fetched=1800, failed=0, skipped=0), max_pages=1800)


def test_off_a_terminal_a_line_goes_to_stderr_now_and_then(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    with progress.progress(None, lambda started: Snapshot(clock[0] - started, 3, 0, 0)) as tick:
        tick(None)
        clock[0] += progress.LOG_EVERY_SECONDS
        tick(None)
        tick(None)
    lines = capsys.readouterr().err.splitlines()
    seconds = f"{progress.LOG_EVERY_SECONDS:.0f}s"
    assert lines == [f"crawlstack: {seconds}  pages 3 (0.3/s)  failed 0  skipped 0  hosts 0 busy, 0 waiting for links"]
