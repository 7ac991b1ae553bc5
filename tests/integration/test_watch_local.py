"""``crawlstack watch --local``: a simulated watch of growing listings, judged from the servers' logs and events.jsonl.

Each listing gains an item every ``EVERY`` wall seconds.  The listing records what it served at each
request, so "every item visible at some check is published exactly once" is checked against what the
server showed, not against a schedule.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from webs import ALLOW_LOOPBACK, check_spacing, describe, write_rules

from crawlstack.demo.server import LoopbackWeb, Request, Response

A, B = "127.0.0.2", "127.0.0.3"
EVERY = 0.4
SPEED = 100.0
DELAY = 10.0  # simulated seconds: 0.1 s of wall time at SPEED
LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": "/list"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [
        {
            "name": "url",
            "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}, {"type": "absolute_url"}],
        },
        {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "a"}}]},
    ],
}


class Listing:
    """A listing that gains an item every EVERY seconds, newest first; what each request was shown."""

    def __init__(self, name: str) -> None:
        self.name, self.start = name, time.time()
        self.served: list[set[str]] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        count = int((time.time() - self.start) / EVERY) + 2
        paths = [f"/{self.name}/{i}" for i in range(count, 0, -1)]
        with self.lock:
            self.served.append(set(paths))
        items = "".join(f'<li><a href="{p}">{p}</a></li>' for p in paths)
        return Response(f"<html><body><ul>{items}</ul></body></html>")


def cli(*argv: str) -> list[str]:
    return [str(Path(sys.executable).parent / "crawlstack"), *argv]


def setup(tmp_path: Path, web: LoopbackWeb) -> tuple[Path, dict[str, Listing]]:
    listings = {"a1": Listing("a1"), "a2": Listing("a2"), "b1": Listing("b1")}
    web.add_host(A, {"/list/a1": listings["a1"], "/list/a2": listings["a2"]})
    web.add_host(B, {"/list/b1": listings["b1"]})
    rules = write_rules(tmp_path / "rules", [LISTING])
    out = tmp_path / "watch"
    lines = [
        {"url": web.url(host, f"/list/{name}"), "mapping": "listing", "id": name, "priority_max": 1440}
        for host, name in ((A, "a1"), (A, "a2"), (B, "b1"))
    ]
    sources = tmp_path / "sources.jsonl"
    sources.write_text("".join(json.dumps(line) + "\n" for line in lines))
    added = subprocess.run(cli("sources", "add", "--file", str(sources), "--rules", str(rules), "--local", str(out)),
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert added.returncode == 0, added.stderr
    return out, listings


WATCH = ("--simulate-days", "0.006", "--speed", str(SPEED), "--delay", str(DELAY), *ALLOW_LOOPBACK, "--no-progress")


def assert_exactly_once(out: Path, listings: dict[str, Listing], web: LoopbackWeb) -> list[dict[str, object]]:
    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids)), "an event was published twice"
    for name, listing in listings.items():
        shown = set().union(*listing.served)
        published = {urlsplit(str(e["url"])).path for e in events if e["source_id"] == name}
        assert shown == published, (name, describe(web.log))
    return events


def test_a_simulated_watch_publishes_every_item_shown_once_and_keeps_each_hosts_delay(
    tmp_path: Path, web: LoopbackWeb
) -> None:
    out, listings = setup(tmp_path, web)
    done = subprocess.run(
        cli("watch", "--local", str(out), *WATCH), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert all(len(listing.served) >= 3 for listing in listings.values()), "each source was checked a few times"
    events = assert_exactly_once(out, listings, web)
    assert len(events) > sum(len(listing.served[0]) for listing in listings.values())  # items that came later too
    for host in (A, B):  # the delay is simulated time: its wall gap is DELAY / SPEED
        assert not check_spacing(web.requests_for(host), DELAY / SPEED), describe(web.log)
    shown = subprocess.run(cli("status", "--local", str(out)), capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    *_, sources = shown.stdout.split("\n\n")
    rows = {line.split()[0]: line.split() for line in sources.splitlines()[2:]}
    assert set(rows) == {"a1", "a2", "b1"} and all(int(row[-2]) >= 3 for row in rows.values()), shown.stdout
    assert "watch  stopped" in shown.stdout
    clock = json.loads((out / "clock.json").read_text())
    assert clock["speed"] == SPEED
    # Event times are simulated: the checks ran over much of the 0.006 simulated days (518 s), seconds of wall time.
    checked = sorted(datetime.fromisoformat(str(e["checked_at"])).timestamp() for e in events)
    assert checked[-1] - checked[0] > 0.3 * 0.006 * 86_400


def test_a_watch_killed_and_run_again_publishes_each_item_once(tmp_path: Path, web: LoopbackWeb) -> None:
    out, listings = setup(tmp_path, web)
    proc = subprocess.Popen(cli("watch", "--local", str(out), *WATCH), stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while sum(len(listing.served) for listing in listings.values()) < 6 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    clock = (out / "clock.json").read_text()
    again = subprocess.run(
        cli("watch", "--local", str(out), *WATCH), capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 0, again.stderr
    # The simulation went on with its own clock, not one started afresh.
    assert (out / "clock.json").read_text() == clock and "resuming the simulation" in again.stderr
    assert_exactly_once(out, listings, web)


def test_a_saved_simulation_in_year_9999_no_longer_traps_its_folder(tmp_path: Path, web: LoopbackWeb) -> None:
    # Issue 27: an older version let --sim-start 9999-12-31T23:00:00 through; its saved clock
    # crashed every later simulated watch on that OUT/ with "year 10000 is out of range".
    out, _ = setup(tmp_path, web)
    short = ("--simulate-days", "0.001", "--speed", str(SPEED), *ALLOW_LOOPBACK, "--no-progress")
    first = subprocess.run(cli("watch", "--local", str(out), *short), capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(out / "state.sqlite") as db:
        (value,) = db.execute("SELECT value FROM crawl_meta WHERE key = 'watch_clock'").fetchone()
        far = datetime(9999, 12, 31, 23, tzinfo=UTC).timestamp()
        saved = {**json.loads(value), "sim_start": far, "end": far + 86_400, "simulated": True}
        db.execute("UPDATE crawl_meta SET value = ? WHERE key = 'watch_clock'", (json.dumps(saved),))
    again = subprocess.run(cli("watch", "--local", str(out), *short), capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert "the saved simulation's clock lies outside the years 2000 to 2100" in again.stderr
    anchors = json.loads((out / "clock.json").read_text())
    assert datetime.fromtimestamp(anchors["sim_start"], UTC).year < 2101


def test_a_simulations_batching_windows_are_of_its_own_time(tmp_path: Path) -> None:
    # Issue 28: fetch's 1 s window, gathering while another run worked, was 20 simulated minutes at 1,200x,
    # and a host's checks due within it went out back to back.
    from crawlstack import settings
    from crawlstack.local.backend import LocalState
    from crawlstack.local.runner import _pump
    from crawlstack.local.services import local_handlers

    state = LocalState(tmp_path / "out", "new")
    try:
        # The pump is only looked at: no handler is invoked, so none needs services.
        pump = _pump(state.stores(), local_handlers(lambda: None), 2, time_scale=1200.0)  # type: ignore[arg-type,return-value]
        windows = {source.key: source.batching_window for source in pump.sources}
    finally:
        state.close()
    assert windows["fetch"] == settings.QUEUES["fetch"].batching_window_seconds / 1200.0 > 0
