"""The crawl settings' flags of ``crawl --local``, ``seed`` and ``watch``, from their declarations.

Each setting a command takes (``crawlstack.config.schema.of_command``)
becomes one flag: its parser checks the setting's bounds
(``crawlstack.limits``), and its value comes back as the setting holds it
(``given_settings``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from crawlstack import limits
from crawlstack.cli.common import UsageError
from crawlstack.config.schema import NUMBER, SUBSET, TEXT, TEXTS, Setting, of_command

# Kinds whose values are text stored in the crawl's item (its size is checked up front).
_TEXT_KINDS = (TEXT, TEXTS, SUBSET)


def add_settings(parser: Any, command: str, defaults: bool) -> None:
    """``command``'s setting flags on ``parser`` (or an argument group).

    With ``defaults`` a flag not given is its setting's default; without, it
    is None: ``seed`` stores only what is given, ``watch`` keeps what it last
    ran with.
    """
    for s in of_command(command):
        extra: dict[str, Any] = {"action": "append"} if s.kind.repeatable else {}
        if defaults:
            extra["default"] = [] if s.kind.repeatable else s.default
        parser.add_argument(s.flag, dest=s.dest, type=s.flag_type(), metavar=s.metavar, help=s.help, **extra)


def given_settings(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The settings ``args`` holds (not None), by name, as ``CrawlConfig`` holds them."""
    values = {s: getattr(args, s.dest) for s in of_command(command)}
    return {s.name: s.kind.given(value) for s, value in values.items() if value is not None}


def check_config_size(command: str, values: Mapping[str, Any]) -> None:
    """Refuse text settings (by name, as ``given_settings`` gives them) too big for the crawl's item."""
    texts = [s for s in of_command(command) if s.stored and s.kind in _TEXT_KINDS]
    strings: list[str] = []
    for s in texts:
        value = values.get(s.name)
        strings.extend([value] if isinstance(value, str) else value or ())
    problem = limits.crawl_config_problem(strings, [str(s.flag) for s in texts])
    if problem:
        raise UsageError(problem)


def _span(s: Setting) -> str:
    assert s.bounds is not None
    low, high = s.bounds
    unit = " s" if s.metavar == "SECONDS" else ""
    if s.kind is NUMBER:
        return f"{low:,g}-{high:,g}{unit}"
    return f"{int(low):,}-{int(high):,}{unit}"


def ranges_help(command: str) -> str:
    """The ranges of ``command``'s numeric flags, for its ``--help``."""
    spans = [f"{s.flag} {_span(s)}" for s in of_command(command) if s.bounds is not None]
    if command == "crawl":
        spans.append(f"--concurrency {limits.CONCURRENCY[0]}-{limits.CONCURRENCY[1]}")
    return (
        f"Ranges: {', '.join(spans)}; a crawl id is at most {limits.MAX_CRAWL_ID_BYTES} bytes "
        f"and a record_id at most {limits.MAX_RECORD_ID_BYTES} bytes (UTF-8)."
    )
