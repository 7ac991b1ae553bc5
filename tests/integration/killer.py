"""Run the ``crawlstack`` CLI in a process that a page kills (SIGKILL, as the OOM killer would), as a plan says.

    python killer.py PLAN_FILE extract|fetch URL_SUFFIX crawl --local ...

Each time the stage meets the page whose URL ends with URL_SUFFIX (extract
reads it; fetch is about to request it), the first line of PLAN_FILE is taken:

* ``kill``: SIGKILL this process there, its handler's message in flight;
* ``fail``: raise, so the message fails and its handler returns (extract only);
* ``ok``, or no line left: go on as usual.

A line is taken (the file rewritten whole) before it is acted on, so a
kill never leaves it to be taken again.  Failed messages come back at once
rather than after the usual 2 s, to keep the tests fast.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any


def take(plan: Path) -> str:
    lines = plan.read_text(encoding="utf-8").split()
    part = plan.with_name(plan.name + ".part")
    part.write_text("\n".join(lines[1:]), encoding="utf-8")
    os.replace(part, plan)
    return lines[0] if lines else "ok"


def act(plan: Path, url: str, suffix: str) -> None:
    if not url.endswith(suffix):
        return
    step = take(plan)
    if step == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if step == "fail":
        raise RuntimeError(f"killer: {url} fails, as planned")


def main() -> int:
    plan, stage, suffix, *argv = sys.argv[1:]
    from crawlstack.extract import Extractor
    from crawlstack.local import runner
    from crawlstack.local.sqlite import SqliteJournal

    runner.LOCAL_RETRY_SECONDS["extract"] = 0
    if stage == "extract":
        real_page = Extractor._extract_page

        def extract_page(self: Extractor, archived: Any, *args: Any) -> None:
            act(Path(plan), archived.url, suffix)
            real_page(self, archived, *args)

        Extractor._extract_page = extract_page  # type: ignore[method-assign]
    else:
        real_started = SqliteJournal.started

        def started(self: SqliteJournal, task: Any) -> None:
            act(Path(plan), task.url, suffix)
            real_started(self, task)

        SqliteJournal.started = started  # type: ignore[method-assign]
    from crawlstack.cli import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
