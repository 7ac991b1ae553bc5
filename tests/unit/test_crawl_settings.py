"""The settings' declarations and the forms held to them: what a resume and a watch keep, the registry."""

from __future__ import annotations

from dataclasses import fields

import pytest

from crawlstack.crawl_settings import SETTINGS, Setting, of_command, register
from crawlstack.local.options import LocalOptions, restored_options, saved_options
from crawlstack.local.watch import WatchSettings

# What a crawl's state has kept for --resume since before the settings were declared: an OUT/ of then resumes.
KEPT_FOR_RESUME = {
    "max_depth", "max_pages", "delay", "user_agent", "allow_private", "allow", "deny",
    "max_pages_per_host", "allow_ports", "extract_concurrency", "crawl_id", "extra_env",
}  # fmt: skip


def test_a_resume_keeps_what_it_always_kept() -> None:
    saved = saved_options(LocalOptions(rules_dir=None, out_dir="OUT"))
    assert set(saved) == KEPT_FOR_RESUME
    assert LocalOptions(rules_dir=None, out_dir="OUT", **restored_options(saved)) == LocalOptions(None, "OUT")


def test_a_watch_keeps_a_field_for_each_watch_setting_declared() -> None:
    kept = {f.name: f.default for f in fields(WatchSettings) if f.name not in ("checks_per_day", "extra")}
    assert kept == {s.name: s.default for s in of_command("watch")}


def test_a_name_is_declared_once(throwaway_setting: Setting) -> None:
    with pytest.raises(ValueError, match="exists"):
        register(SETTINGS["delay"])
    with pytest.raises(ValueError, match="exists"):
        register(throwaway_setting)
