"""``crawlstack watch --local OUT``: re-check OUT's sources on their schedule until stopped, on the local backend.

Checks go through the crawl's own handlers, so they keep its politeness:
each is a frontier message of the ``watch`` crawl carrying its ``CheckRef``;
dispatch admits it under its check's own key, the host's run fetches it (a
conditional GET), and extract decides which items are new
(``crawlstack.watch.pages``).  Each tick of the event pump:

1. plans the next day when the last one is over (``watch.schedule.plan_day``,
   the day's checks and the tokens they spend stored together);
2. sends the checks that have fallen due, once each (a watch that was down
   or stalled first moves its plan later by how late its checks are, so they
   keep their spacing rather than crowd in at once);
3. appends the events in the outbox to ``OUT/events.jsonl``.

A simulation (``--simulate-days N --speed X``) runs the schedule on a clock
of ``sim_start + X * (wall time since the watch started)``, written to
``OUT/clock.json`` before the first request so that servers under test read
the same clock.  Its events' times are simulated times, and so are the host
delay and robots.txt's Crawl-delay (``CrawlConfig.time_scale``): a host's
wall gaps are its delay over ``X``.  Retry-After and the backoff of a host
that answers 429 or 503 keep wall time, which is only stricter.

A killed or stopped watch goes on with ``watch --local OUT`` again, no
other flag needed: its plan, sent checks and outbox are in the state, and
so are its settings (``WatchSettings``: a flag given replaces one) and its
clock (``crawlstack.local.watch_clock``): a simulation goes on as the same
simulation, as if it had run on, at its speed, to its end.  A new
``--speed`` changes only the rate from the time reached; ``--simulate-days``
or ``--sim-start`` other than the simulation's, or any of them on a
real-time watch, are refused before anything is changed.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any, cast

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.config.schema import Setting, of_command
from crawlstack.fetch.crawllog import iso_time
from crawlstack.lambdas.environment import HandlerSettings
from crawlstack.local.backend import LocalState, StateError, has_state, read_meta, write_meta
from crawlstack.local.metrics import MetricsFile, serialised_metrics
from crawlstack.local.pump import EventPump
from crawlstack.local.runner import _pump, seed_hosts
from crawlstack.local.services import handler_env, local_handlers
from crawlstack.local.sources import stored_rules
from crawlstack.local.sqlite.db import stops_when_full
from crawlstack.local.sqlite.sources import SqliteSources
from crawlstack.local.sqlite.watch import SqliteWatch
from crawlstack.local.watch_clock import ResumedClock, WatchClock, anchors, resume_clock
from crawlstack.watch import scheduler
from crawlstack.watch.pages import WATCH_CRAWL_ID, CheckPages
from crawlstack.wiring import Services, WatchPorts, stop_runs

PROGRESS_SECONDS = 10.0
# A check still open this long after it was sent (wall time) met no extract: it ends with what its pages found.
STALE_CHECK_SECONDS = 300.0
SETTLE_EVERY_SECONDS = 5.0
# Watch seconds between the scheduler's ticks in a simulation, and the wall seconds they may not go below or
# past: at --speed 1200 the pump's usual quarter second would be five simulated minutes a tick, and every
# check that late.
SIM_TICK_SECONDS = 30.0
TICK_WALL_SECONDS = (0.01, 0.25)


@dataclass(frozen=True)
class WatchSettings:
    """What a watch keeps in its state for its next run (``watch_settings``): a flag given replaces it.

    Besides ``checks_per_day``, the crawl settings ``watch`` takes (``crawlstack.config.schema``): a field
    each (tests/unit/test_watch_settings.py holds them to their declarations); one with no field here (a
    setting registered at run time) is in ``extra``.
    """

    checks_per_day: int | None = None  # None: no budget
    delay: float = settings.DEFAULT_DELAY_SECONDS
    user_agent: str = settings.DEFAULT_USER_AGENT
    allow_private: tuple[str, ...] = ()
    allow_ports: tuple[int, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()

    def crawl_settings(self) -> dict[str, Any]:
        """The crawl settings, by name."""
        return {s.name: getattr(self, s.name) for s in of_command("watch") if s.name in _KEPT} | dict(self.extra)

    def saved(self) -> dict[str, Any]:
        """As the state keeps them: JSON, one key a setting."""
        kept = {s.name: s.to_json(value) for s, value in _by_setting(self.crawl_settings())}
        return {"checks_per_day": self.checks_per_day} | kept


@dataclass(frozen=True)
class WatchOptions:
    """A run's flags; a setting not given is the watch's own, or the default (``WatchSettings``)."""

    out: str
    checks_per_day: int | None = None
    # The crawl settings given, by name (``watch``'s setting flags).
    given: Mapping[str, Any] = field(default_factory=dict)
    # The clock's flags (``watch_clock``).
    simulate_days: float | None = None
    speed: float | None = None
    sim_start: float | None = None
    fetch_concurrency: int = 8
    progress: bool = True


def watch_local(options: WatchOptions) -> dict[str, Any]:
    """Run the watch until Ctrl-C, or the simulated days' end; what it did."""
    out = Path(options.out)
    if not has_state(out):
        raise StateError(f"{out} holds no sources: add some with crawlstack sources add ... --local {out}")
    with stops_when_full(out):
        return _watch_local(out, options)


def _watch_local(out: Path, options: WatchOptions) -> dict[str, Any]:
    state = LocalState(out, "resume")
    try:
        # Before anything is changed: flags that contradict the watch's own clock are refused.
        resumed = resume_clock(
            str(out),
            read_meta(state.db, "watch_clock"),
            options.simulate_days,
            options.speed,
            options.sim_start,
            time.time(),
        )
        state.check_files()
        store = SqliteWatch(state.db, out / "events.jsonl")
        store.claim_events()  # before anything is changed: an events file not the state's is refused
        state.recover()
        store.release_claims()  # the last run's, if it was killed between a claim and its send
        sources = SqliteSources(state.db)
        if not sources.list():
            raise StateError(f"{out} holds no sources: add some with crawlstack sources add ... --local {out}")
        clock, end = _clock(state, out, resumed)
        kept = kept_settings(options, read_meta(state.db, "watch_settings"))
        write_meta(state.db, "watch_settings", kept.saved())
        with tempfile.TemporaryDirectory(prefix="crawlstack-rules-") as rules_dir:
            for name, text in stored_rules(state.db).items():
                (Path(rules_dir) / name).write_text(text, encoding="utf-8")
            return _watch(state, sources, store, clock, end, options, kept, rules_dir)
    finally:
        state.close()


def _clock(state: LocalState, out: Path, resumed: ResumedClock) -> tuple[WatchClock, float | None]:
    """The watch's clock and the simulation's end (None: until stopped), kept in the state and OUT/clock.json."""
    if resumed.note:
        print(f"crawlstack: {resumed.note}", file=sys.stderr)
    write_meta(state.db, "watch_clock", resumed.saved)
    (out / "clock.json").write_text(json.dumps(anchors(resumed.clock)) + "\n", encoding="utf-8")
    return resumed.clock, resumed.end


def kept_settings(options: WatchOptions, saved: Any) -> WatchSettings:
    """The run's settings: each flag given, else the one the watch kept (``saved``), else the default.

    A kept value of the wrong kind (a damaged state) gives way to the default.
    """
    kept = saved if isinstance(saved, dict) else {}
    checks = options.checks_per_day if options.checks_per_day is not None else kept.get("checks_per_day")
    values: dict[str, Any] = {}
    for s in of_command("watch"):
        raw = kept.get(s.name)
        values[s.name] = options.given.get(s.name, s.from_json(raw) if raw is not None and s.fits(raw) else s.default)
    own = {name: value for name, value in values.items() if name in _KEPT}
    extra = tuple(sorted((name, value) for name, value in values.items() if name not in _KEPT))
    return WatchSettings(checks_per_day=checks if type(checks) is int else None, **own, extra=extra)


def _by_setting(values: dict[str, Any]) -> list[tuple[Setting, Any]]:
    return [(s, values[s.name]) for s in of_command("watch") if s.name in values]


# The crawl settings WatchSettings has a field for.
_KEPT = frozenset(f.name for f in fields(WatchSettings)) - {"checks_per_day", "extra"}


def tick_seconds(speed: float) -> float:
    """Wall seconds between the scheduler's ticks: ``SIM_TICK_SECONDS`` of the watch's time, within bounds."""
    low, high = TICK_WALL_SECONDS
    return min(high, max(low, SIM_TICK_SECONDS / speed))


def _watch(
    state: LocalState,
    sources: SqliteSources,
    store: SqliteWatch,
    clock: WatchClock,
    end: float | None,
    options: WatchOptions,
    kept: WatchSettings,
    rules_dir: str,
) -> dict[str, Any]:
    out = Path(options.out)
    every = sources.list()
    stores = state.stores()
    stores.crawls.put(
        CrawlConfig(
            crawl_id=WATCH_CRAWL_ID,
            max_depth=0,
            max_pages_per_host=0,  # a host's re-checks are no spider trap
            seed_hosts=seed_hosts([s.url for s in every]),
            time_scale=clock.speed,  # 1 in real time
        ).with_values(**kept.crawl_settings())
    )
    handler_settings = HandlerSettings.from_env(handler_env(WATCH_CRAWL_ID, rules_dir), stack=False)
    pump = _pump(stores, local_handlers(lambda: svc), options.fetch_concurrency, time_scale=clock.speed)
    svc = Services(
        handler_settings.rules(),
        stores,
        watch=WatchPorts(
            checks=lambda send: CheckPages(sources, store, send, clock.now, clock.of), sources=sources, plans=store
        ),
        run_hooks=state.run_hooks(settled=pump.settled),
    )
    sent = 0
    last_progress = time.monotonic()
    next_settle = 0.0

    def tick(ticking: EventPump) -> None:
        nonlocal sent, last_progress, next_settle
        if ticking.finished:  # the pump's last call, its handlers gone: nothing more is sent
            store.publish()
            return
        # Old checks are looked at every few seconds, not on every turn of the pump.
        settling = time.monotonic() >= next_settle
        if settling:
            next_settle = time.monotonic() + SETTLE_EVERY_SECONDS
        done = scheduler.tick(
            sources,
            store,
            lambda bodies: stores.frontier_queue.send([(body, 0) for body in bodies]),
            clock.now(),
            time.time(),
            kept.checks_per_day,
            STALE_CHECK_SECONDS if settling else math.inf,
            end,
            late_after=settings.WATCH_LATE_SECONDS,
        )
        sent += done.sent
        store.publish()
        if options.progress and time.monotonic() - last_progress >= PROGRESS_SECONDS:
            last_progress = time.monotonic()
            checks = store.checks_counted()
            ended, found = sum(c for c, _ in checks.values()), sum(n for _, n in checks.values())
            print(
                f"watch {iso_time(clock.now())[:19]}Z: {sent} checks sent, {ended} done, {found} items seen",
                file=sys.stderr,
            )

    interrupted = False
    with (
        MetricsFile(out / "metrics.jsonl", append=True, note=state.db.note) as emf,
        contextlib.redirect_stdout(cast(IO[str], emf)),
        serialised_metrics(),
        warnings.catch_warnings(),
    ):
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        try:
            pump.run(
                on_tick=tick,
                tick_seconds=tick_seconds(clock.speed),
                on_interrupt=lambda: stop_runs(svc),
                fault=lambda: state.db.fault,
                stay=lambda: end is None or clock.now() < end,
            )
        except KeyboardInterrupt:
            if not pump.finished:
                raise
            interrupted = True
    published = store.publish()
    checks = store.checks_counted()
    return {
        "checks_sent": sent,
        "checks_done": sum(c for c, _ in checks.values()),
        "items_seen": sum(n for _, n in checks.values()),
        "events_published_at_end": published,
        "interrupted": interrupted,
        "sim_reached": iso_time(clock.now() if end is None else min(clock.now(), end)),
    }
