"""What a crawl setting is, and the registry of them all.

Each setting is declared once, as a field of ``crawlstack.config.CrawlConfig``
made with ``setting(...)``: its name, kind (type), default, bounds, flag and
help, whether it is stored with the crawl, and which environment variable
gives a function its default (and whether the stack sets that variable from
CDK context ``crawlstack:<name>``).  Everything else is derived from the
registry, ``SETTINGS``:

* the flags of ``crawl --local``, ``seed`` and ``watch`` (``crawlstack.cli``),
  their ranges in ``--help``, and the size check of their strings;
* ``LocalOptions.config`` and what a resume keeps, and ``WatchOptions`` and
  what a watch keeps (``crawlstack.local``);
* the crawl's item on both backends (``CrawlConfig.to_item`` / ``from_item``);
* the defaults a function reads from its environment
  (``CrawlConfig.defaults_from_env``), and the stack's context keys that set
  them (``infra.config``);
* the settings' tables of docs/reference.md (``python scripts/settings_doc.py``
  writes them; tests/unit/test_reference_doc.py checks them).

``register`` adds a setting at run time, with no field of its own: its value
lives in ``CrawlConfig.extra`` (a test registers a throwaway one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any

from crawlstack import limits

# The commands that take settings as flags: a local crawl, a deployed crawl's seeding, a watch.
COMMANDS = ("crawl", "seed", "watch")
# dataclasses.Field.metadata key of a declaration.
_SPEC = "crawlstack.setting"


def _same(value: Any) -> Any:
    return value


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _items(text: str) -> list[str]:
    """The items of a comma-separated environment variable, blank ones left out."""
    return [c for c in text.split(",") if c.strip()]


def _all_of(kind: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list | tuple) and all(type(x) is kind for x in v)


@dataclass(frozen=True)
class Kind:
    """How a setting's value is given, stored in the crawl's item, and read back."""

    name: str
    fits: Callable[[Any], bool]  # a value kept as JSON (a watch's or a resume's) is one of this kind
    repeatable: bool = False  # a flag given many times; a list in the item
    given: Callable[[Any], Any] = _same  # the flag's value as the setting holds it
    store: Callable[[Any], Any] = _same  # the value as the item holds it; None: no attribute
    load: Callable[[Any], Any] = _same  # the item's attribute (or JSON's) as the value
    from_text: Callable[[str], Any] = str  # an environment variable's text as the value
    to_text: Callable[[Any], str] = str  # the value as the stack writes it to the environment


NUMBER = Kind(
    "number",
    lambda v: type(v) in (int, float) and math.isfinite(v),
    store=lambda v: Decimal(str(v)),
    load=float,
    from_text=float,
    to_text=_number_text,
)
INTEGER = Kind("integer", lambda v: type(v) is int, store=int, load=int, from_text=int)
# None: no value, no attribute (max_pages: no budget).
OPTIONAL_INTEGER = Kind("optional integer", lambda v: v is None or type(v) is int, load=int, from_text=int)
# 0 given or stored means "no cap", None in the value: an absent attribute means the default cap.
CAP = Kind(
    "cap",
    lambda v: v is None or type(v) is int,
    given=lambda v: v or None,
    store=lambda v: v or 0,
    load=lambda v: int(v) or None,
    from_text=lambda t: int(t) or None,
    to_text=lambda v: str(v or 0),
)
TEXT = Kind("text", lambda v: isinstance(v, str), load=str)
# DynamoDB refuses empty sets; empty lists are fine but left out too, to keep the item small.
TEXTS = Kind(
    "texts",
    _all_of(str),
    repeatable=True,
    given=tuple,
    store=lambda v: list(v) or None,
    load=lambda v: tuple(str(x) for x in v),
    from_text=lambda t: tuple(_items(t)),
    to_text=",".join,
)
PORTS = Kind(
    "ports",
    _all_of(int),
    repeatable=True,
    given=lambda v: tuple(dict.fromkeys(v)),
    store=lambda v: [int(p) for p in v] or None,
    load=lambda v: tuple(int(p) for p in v),
    from_text=lambda t: tuple(int(p) for p in _items(t)),
    to_text=lambda v: ",".join(map(str, v)),
)
# A chosen subset; None: all.  A list, not a set: an empty subset is a valid choice.
SUBSET = Kind(
    "subset",
    lambda v: v is None or _all_of(str)(v),
    repeatable=True,
    given=lambda v: tuple(dict.fromkeys(v)),
    store=lambda v: None if v is None else list(v),
    load=lambda v: tuple(str(x) for x in v),
    from_text=lambda t: tuple(_items(t)),
    to_text=",".join,
)
HOSTS = Kind(
    "hosts",
    _all_of(str),
    store=lambda v: set(v) or None,
    load=frozenset,
    from_text=lambda t: frozenset(_items(t)),
    to_text=lambda v: ",".join(sorted(v)),
)


@dataclass(frozen=True)
class Setting:
    """One crawl setting (see the module docstring)."""

    name: str
    kind: Kind
    default: Any
    help: str = ""  # --help's line; the reference's too unless ``doc`` says more
    doc: str = ""
    flag: str | None = None  # none: not set from the command line
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  # one flag value; default: the kind's number within ``bounds``
    bounds: tuple[float, float] | None = None
    commands: tuple[str, ...] = ()  # of COMMANDS
    stored: bool = True  # in the crawl's item
    omit_default: bool = False  # stored only when not the default
    env: str | None = None  # the environment variable a function reads the crawl's default from
    stack_default: bool = False  # the stack sets ``env`` from CDK context ``context_key``

    @property
    def dest(self) -> str:
        """The argparse destination: the flag's name (``--allow-port``: ``allow_port``)."""
        return (self.flag or self.name).lstrip("-").replace("-", "_")

    @property
    def context_key(self) -> str:
        return f"crawlstack:{self.name}"

    def flag_type(self) -> Callable[[str], Any]:
        """The argparse ``type`` of one value: ``parse``, or a number within ``bounds`` (``crawlstack.limits``)."""
        if self.parse is not None:
            return self.parse
        if self.bounds is None:
            return str
        if self.kind is NUMBER:
            return limits.number_flag(self.bounds, stored=self.stored)
        low, high = self.bounds
        return limits.integer_flag((int(low), int(high)))

    def to_item(self, value: Any) -> Any:
        """The item's attribute for ``value``; None for none."""
        if self.omit_default and value == self.default:
            return None
        return self.kind.store(value)

    def fits(self, value: Any) -> bool:
        """Whether a kept value (JSON) is one this setting may hold."""
        if not self.kind.fits(value):
            return False
        if self.bounds is None or not isinstance(value, int | float):
            return True
        return self.bounds[0] <= value <= self.bounds[1]

    def to_json(self, value: Any) -> Any:
        """``value`` as JSON holds it (a resume's and a watch's saved settings)."""
        return list(value) if isinstance(value, tuple | frozenset) else value

    def from_json(self, value: Any) -> Any:
        return None if value is None else self.kind.load(value)


# Every setting, in declaration order, then those registered at run time.
SETTINGS: dict[str, Setting] = {}


def setting(default: Any, kind: Kind, **spec: Any) -> Any:
    """A ``CrawlConfig`` field that declares a setting (``Setting``'s fields but its name)."""
    return field(default=default, metadata={_SPEC: (kind, spec)})


def declare(cls: type) -> None:
    """Register the settings ``cls`` (``CrawlConfig``) declares with ``setting``, in field order."""
    for f in fields(cls):
        if _SPEC in f.metadata:
            kind, spec = f.metadata[_SPEC]
            register(Setting(f.name, kind, f.default, **spec))


def register(new: Setting) -> Setting:
    """Add a setting; a name already taken is a ValueError."""
    if new.name in SETTINGS:
        raise ValueError(f"a crawl setting named {new.name!r} exists")
    unknown = set(new.commands) - set(COMMANDS)
    if unknown:
        raise ValueError(f"setting {new.name!r}: unknown commands {sorted(unknown)}")
    SETTINGS[new.name] = new
    return new


def unregister(name: str) -> None:
    del SETTINGS[name]


def of_command(command: str) -> list[Setting]:
    """The settings ``command`` takes as flags, in order."""
    return [s for s in SETTINGS.values() if command in s.commands and s.flag]


# The declarations are CrawlConfig's fields: importing this module registers them too.
from crawlstack import config as _declarations  # noqa: E402,F401
