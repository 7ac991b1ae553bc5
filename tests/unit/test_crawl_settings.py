"""The settings' declarations and the forms held to them: what a resume and a watch keep, the registry."""

from __future__ import annotations

from dataclasses import fields

import pytest

from crawlstack.config.schema import (
    CAP,
    HOSTS,
    INTEGER,
    NUMBER,
    OPTIONAL_INTEGER,
    PORTS,
    SETTINGS,
    SUBSET,
    TEXT,
    TEXTS,
    Kind,
    Setting,
    of_command,
    register,
)
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


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (NUMBER, 2.5),
        (INTEGER, 3),
        (OPTIONAL_INTEGER, 4),
        (CAP, 5),
        (CAP, None),
        (TEXT, "bot/1"),
        (TEXTS, ("a", "b")),
        (PORTS, (80, 8080)),
        (SUBSET, ("book",)),
        (HOSTS, frozenset({"a.test", "b.test:81"})),
    ],
)
def test_each_kind_reads_back_what_it_stores_and_what_the_stack_writes(kind: Kind, value: object) -> None:
    assert kind.load(kind.store(value)) == value  # CAP: None is stored as 0 and read back as None
    assert kind.from_text(kind.to_text(value)) == value
    assert kind.fits(list(value) if isinstance(value, tuple | frozenset) else value)


def test_a_name_is_declared_once(throwaway_setting: Setting) -> None:
    with pytest.raises(ValueError, match="exists"):
        register(SETTINGS["delay"])
    with pytest.raises(ValueError, match="exists"):
        register(throwaway_setting)
