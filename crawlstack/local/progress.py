"""What a local crawl shows while it runs: pages, their rate, records, failures, URLs waiting and hosts at work.

On a terminal the line is redrawn a few times a second (rich's ``Live``);
off one, or with ``--no-progress`` on a terminal, nothing is redrawn, and off
a terminal a line goes to stderr every ``LOG_EVERY_SECONDS``, as Scrapy's
LogStats does.  With ``--max-pages`` the line has an ETA.

The figures come from the container's own tally (``HostRunner.hosts``:
outcomes flushed, hosts at work and lingering for links), the local
backend's streamed records (``LocalBlobs.records_streamed``) and its
backlogs (``SqliteBacklog.waiting``); on the AWS adapters the last two are
not shown, as each would be a scan.

Settings: ``LOG_EVERY_SECONDS`` (here).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from crawlstack.local.sqlite import SqliteBacklog

LOG_EVERY_SECONDS = 10.0


@dataclass(frozen=True)
class Snapshot:
    seconds: float
    fetched: int
    failed: int
    skipped: int
    records: int | None = None
    waiting: int | None = None
    hosts_working: int = 0
    hosts_lingering: int = 0


def render(now: Snapshot, max_pages: int | None = None) -> str:
    """One line of progress (plain text)."""
    rate = now.fetched / now.seconds if now.seconds > 0 else 0.0
    parts = [f"{now.seconds:.0f}s", f"pages {now.fetched} ({rate:.1f}/s)"]
    if now.records is not None:
        parts.append(f"records {now.records}")
    parts.append(f"failed {now.failed}")
    parts.append(f"skipped {now.skipped}")
    if now.waiting is not None:
        parts.append(f"URLs waiting {now.waiting}")
    parts.append(f"hosts {now.hosts_working - now.hosts_lingering} busy, {now.hosts_lingering} waiting for links")
    if max_pages and rate > 0 and now.fetched < max_pages:
        parts.append(f"ETA {_duration((max_pages - now.fetched) / rate)}")
    return "  ".join(parts)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def snapshot(services: Any, started: float) -> Snapshot:
    """The crawl's figures now, from ``services`` (``crawlstack.wiring.Services``) as far as it can tell cheaply."""
    counts, working, lingering = {}, 0, 0
    if "runner" in services.__dict__:  # built by the first fetch invocation
        hosts = services.runner.hosts
        counts, working, lingering = dict(hosts.outcomes), hosts.working, hosts.lingering
    blobs, backlog = services.stores.blobs, services.stores.backlog
    return Snapshot(
        seconds=time.monotonic() - started,
        fetched=counts.get("fetched", 0),
        failed=counts.get("failed", 0),
        skipped=counts.get("skipped", 0),
        records=getattr(blobs, "records_streamed", None),
        waiting=backlog.waiting() if isinstance(backlog, SqliteBacklog) else None,
        hosts_working=working,
        hosts_lingering=lingering,
    )


@contextlib.contextmanager
def progress(
    enabled: bool | None, read: Callable[[float], Snapshot], max_pages: int | None = None
) -> Iterator[Callable[[Any], None]]:
    """A tick for the pump: redraws on a terminal, else (or ``enabled`` False) logs a line now and then."""
    started = time.monotonic()
    if not (sys.stderr.isatty() and enabled is not False):
        last = [started]

        def log(pump: Any) -> None:
            if time.monotonic() - last[0] >= LOG_EVERY_SECONDS:
                last[0] = time.monotonic()
                print(f"crawlstack: {render(read(started), max_pages)}", file=sys.stderr, flush=True)

        yield log
        return
    from rich.console import Console
    from rich.live import Live

    with Live(console=Console(stderr=True), refresh_per_second=4, transient=True) as live:
        yield lambda pump: live.update(f"[bold]crawling[/] {render(read(started), max_pages)}")
