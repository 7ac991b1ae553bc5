"""``crawlstack watch --local OUT`` run again goes on on the watch's own clock, and refuses flags that contradict it.

Issue 28: a killed simulation run again alone became a real-time watch at speed 1, its end forgotten,
and ``--simulate-days`` without ``--speed`` resumed it at speed 1.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from webs import ALLOW_LOOPBACK, UA, write_rules

from crawlstack.cli import main
from crawlstack.demo.server import LoopbackWeb

A = "127.0.0.2"
SPEED = 100.0
# 518 simulated seconds: 5.2 s of wall time at SPEED, from the first run's clock start to the resumed run's
# end. The kill and the restart must fall inside it: the killed run's start after its clock (its handlers'
# imports) and its two checks take about 1 s of it, and 2 s with the machine loaded.
DAYS = "0.006"
# The watch's other settings: a resume keeps them too.
OTHERS = (*ALLOW_LOOPBACK, "--delay", "10", "--user-agent", UA, "--no-progress")
LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": "/list"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [{"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]}],
}


@pytest.fixture
def listings(web: LoopbackWeb) -> LoopbackWeb:
    page = "<ul>" + "".join(f'<li><a href="/item/{i}">{i}</a></li>' for i in range(3)) + "</ul>"
    web.add_host(A, {"/list/a1": page, "/list/a2": page})
    return web


def added(out: Path, web: LoopbackWeb) -> Path:
    """``out`` with two sources on one host, as ``sources add`` leaves it."""
    rules = write_rules(out.parent / f"{out.name}-rules", [LISTING])
    lines = out.parent / f"{out.name}.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"url": web.url(A, f"/list/{name}"), "mapping": "listing", "id": name, "priority_max": 1440})
            + "\n"
            for name in ("a1", "a2")
        )
    )
    assert main(["sources", "add", "--file", str(lines), "--rules", str(rules), "--local", str(out)]) == 0
    return out


def watch_cli(out: Path, *flags: str) -> list[str]:
    return [str(Path(sys.executable).parent / "crawlstack"), "watch", "--local", str(out), *flags]


def killed_when(out: Path, ready: Callable[[], bool], *flags: str) -> None:
    """Start a watch on ``out`` and SIGKILL it once ``ready``."""
    with (out.parent / f"{out.name}.stderr").open("w+") as stderr:
        proc = subprocess.Popen(watch_cli(out, *flags), stderr=stderr)
        deadline = time.monotonic() + 30
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                stderr.seek(0)
                pytest.fail(f"the watch ended or hung before it was killed: {stderr.read()}")
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


def checked_twice(web: LoopbackWeb) -> Callable[[], bool]:
    return lambda: sum(r.bare_path.startswith("/list/") for r in web.log) >= 2


def saved_clock(out: Path) -> Any:
    with sqlite3.connect(out / "state.sqlite") as db:
        (value,) = db.execute("SELECT value FROM crawl_meta WHERE key = 'watch_clock'").fetchone()
    return json.loads(value)


@pytest.mark.parametrize("flags", [(), ("--simulate-days", DAYS)], ids=["alone", "days-without-speed"])
def test_a_killed_simulation_run_again_goes_on_as_the_same_simulation(
    tmp_path: Path, listings: LoopbackWeb, flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    out = added(tmp_path / "watch", listings)
    killed_when(out, checked_twice(listings), "--simulate-days", DAYS, "--speed", str(SPEED), *OTHERS)
    clock, saved = (out / "clock.json").read_text(), saved_clock(out)
    assert saved["simulated"] and saved["speed"] == SPEED
    before = len(listings.log)
    capsys.readouterr()
    # Run again with no other flag: not even --allow-private, which the loopback listings need.
    # In this process, its modules loaded: the simulation runs on while it is stopped, and a new
    # interpreter's start (seconds on a loaded machine) could pass its end before the watch reads its clock.
    code = main(["watch", "--local", str(out), *flags])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    # The same clock (anchors, speed) and end: not a real-time one, not speed 1.
    assert (out / "clock.json").read_text() == clock and saved_clock(out) == saved
    assert "resuming the simulation at " in stderr and f"at speed {SPEED:g}" in stderr
    # Its other settings too: loopback still allowed, the same user agent.
    resumed = listings.log[before:]
    assert resumed and all(r.user_agent == UA for r in resumed), [(r.path, r.user_agent) for r in resumed]
    reached = stdout.removeprefix("watched until ").split("Z:")[0]
    assert datetime.fromisoformat(reached).replace(tzinfo=UTC).timestamp() >= int(saved["end"]), stdout


def snapshot(out: Path) -> tuple[dict[str, bytes], list[str]]:
    """OUT's files beside the state, its folders' too (not its lock, which names the last process to take it), and
    the state's content."""
    kept = [p for p in sorted(out.rglob("*")) if p.is_file() and not p.name.startswith(("state.sqlite", ".crawl.lock"))]
    files = {str(p.relative_to(out)): p.read_bytes() for p in kept}
    with sqlite3.connect(out / "state.sqlite") as db:
        return files, list(db.iterdump())


def test_flags_that_contradict_the_stored_clock_are_refused_and_change_nothing(
    tmp_path: Path, listings: LoopbackWeb, capsys: pytest.CaptureFixture[str]
) -> None:
    simulated = added(tmp_path / "simulated", listings)
    short = ("--simulate-days", "0.0005", "--speed", "1000", "--sim-start", "2030-01-01T00:00:00")
    done = subprocess.run(watch_cli(simulated, *short, *OTHERS), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    real = added(tmp_path / "real", listings)
    killed_when(real, (real / "clock.json").exists, *OTHERS)  # written before its first request
    assert saved_clock(real)["simulated"] is False
    capsys.readouterr()
    for out, flags, problem in [
        (simulated, ("--simulate-days", "0.001"), "holds a simulation from 2030-01-01T00:00:00Z to "
         "2030-01-01T00:00:43Z: --simulate-days 0.001 would make another"),
        (simulated, ("--sim-start", "2030-01-02T00:00:00", "--simulate-days", "0.0005"), "--sim-start 2030-01-02"),
        (real, ("--simulate-days", "0.0005", "--speed", "1000"), "in real time: --simulate-days, --speed would make"),
        (real, ("--speed", "10"), "holds a watch in real time: --speed would make it a simulation"),
    ]:  # fmt: skip
        before = snapshot(out)
        code = main(["watch", "--local", str(out), *flags, *OTHERS])
        _, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and problem in err, (flags, err)
        assert err.startswith("crawlstack: error: ") and "nothing was changed" in err
        assert snapshot(out) == before, flags
