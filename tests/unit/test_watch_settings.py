"""``kept_settings``: a watch run again keeps the settings it ran with; a flag given replaces one."""

from __future__ import annotations

import json
from dataclasses import asdict

from crawlstack import settings
from crawlstack.local.watch import WatchOptions, WatchSettings, kept_settings

LAST = WatchSettings(checks_per_day=300, delay=10.0, user_agent="bot/1", allow_private=("127.0.0.0/8",),
                     allow_ports=(8080,))  # fmt: skip


def test_a_run_with_no_flag_keeps_the_last_runs_settings() -> None:
    stored = json.loads(json.dumps(asdict(LAST)))  # as the state keeps them: lists, not tuples
    assert kept_settings(WatchOptions("OUT"), stored) == LAST


def test_a_flag_given_replaces_its_setting_only() -> None:
    given = WatchOptions("OUT", given={"delay": 2.0, "allow_private": ()})
    assert kept_settings(given, asdict(LAST)) == WatchSettings(300, 2.0, "bot/1", (), (8080,))


def test_a_first_run_or_a_damaged_setting_takes_the_default() -> None:
    assert kept_settings(WatchOptions("OUT"), None) == WatchSettings()
    damaged = {**asdict(LAST), "delay": "soon", "allow_ports": ["80"], "checks_per_day": True}
    kept = kept_settings(WatchOptions("OUT"), damaged)
    assert (kept.delay, kept.allow_ports, kept.checks_per_day) == (settings.DEFAULT_DELAY_SECONDS, (), None)
    assert kept.user_agent == "bot/1"
