"""How much one chain may build: matches per step and characters of values, enforced while they are built.

Settings: ``settings.MAX_ITEMS_PER_PAGE`` (a field's values; a selector
step stops at one more), ``settings.MAX_FIELD_CHARS`` (a field's
characters), ``settings.MAX_PAGE_VALUE_CHARS`` (a page's records together,
and each url_parser's values).

A page's text multiplies when the selected elements nest: each one's text
holds all its descendants', so ``li`` nested 500 deep repeats the page's
text 500 times.  So the mapping opens an ``allowance`` around each chain
(a field's, the items', a url_parser's), and the processors read it while
they build: element text stops growing at the characters left
(``bounded_join``), a step at its matches, ``join`` at its characters.
Whatever was cut sets ``cut``, which the field turns into a crawl-log note.

The allowance lives in a context variable, like the time budget
(``crawlstack.rules.budget``); code run outside one gets a field's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from crawlstack import settings
from crawlstack.rules import budget

# Text pieces joined at once, between two looks at the page's time budget.
_BATCH = 1024
# JSON members walked between two looks at it.
_CHECK_EVERY = 4096


@dataclass
class Allowance:
    """What one chain may build: ``matches`` values a step, ``chars`` characters of them.

    ``cut`` once it cut characters; ``cut_values`` once a step that reads all
    the values before it (``join``) read a step's cap of them.
    """

    matches: int
    chars: int
    cut: bool = False
    cut_values: bool = False


_current: ContextVar[Allowance | None] = ContextVar("value_allowance", default=None)


def field_allowance() -> Allowance:
    """A field's: one match more than the values it keeps, and its characters."""
    return Allowance(settings.MAX_ITEMS_PER_PAGE + 1, settings.MAX_FIELD_CHARS)


def current() -> Allowance:
    """The allowance of the chain being run; outside any, a field's."""
    found = _current.get()
    return found if found is not None else field_allowance()


def allowance(matches: int, chars: int) -> _Opening:
    """Within the block, the processors build at most ``matches`` values a step and ``chars`` characters."""
    return _Opening(Allowance(matches, chars))


class _Opening:
    """``with allowance(...) as opened``: a class, not a generator, since every field opens one."""

    def __init__(self, opened: Allowance) -> None:
        self.opened = opened

    def __enter__(self) -> Allowance:
        self._token = _current.set(self.opened)
        return self.opened

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def mark_cut() -> None:
    """Something the chain found was left out."""
    found = _current.get()
    if found is not None:
        found.cut = True


def mark_cut_values() -> None:
    """A step read as many values as the step before could give: there may have been more."""
    found = _current.get()
    if found is not None:
        found.cut_values = True


def cut_text(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters (noted as a cut)."""
    if len(text) <= limit:
        return text
    mark_cut()
    return text[: max(limit, 0)]


def bounded_join(pieces: Iterable[str], limit: int) -> str:
    """The pieces joined, stopping at ``limit`` characters: never more is built, however many pieces follow.

    Joined a batch at a time (in C), so a text of a million one-letter pieces
    costs no Python step per piece; the time budget is looked at between batches.
    """
    pieces = iter(pieces)
    parts: list[str] = []
    size = 0
    while batch := list(itertools.islice(pieces, _BATCH)):
        text = "".join(batch)
        size += len(text)
        if size > limit:
            parts.append(text[: len(text) - (size - limit)])
            mark_cut()
            break
        parts.append(text)
        if len(batch) == _BATCH:
            budget.check()
    return "".join(parts)


def json_chars(value: Any, limit: int) -> int:
    """About how many characters ``value`` takes as JSON text; counting stops once past ``limit``.

    Walked without recursion, so a value of millions of members costs no
    more than ``limit`` characters' worth of steps before the answer is known.
    """
    size = 0
    walked = 0
    # Iterators over (key, member) pairs: a list's members have no key.
    stack: list[Iterator[tuple[Any, Any]]] = [iter([(None, value)])]
    while stack:
        pair = next(stack[-1], None)
        if pair is None:  # this container is done
            stack.pop()
            continue
        key, item = pair
        walked += 1
        if not walked % _CHECK_EVERY:
            budget.check()
        if key is not None:
            size += len(str(key)) + 4  # quotes, colon, comma
        if isinstance(item, dict):
            size += 2
            stack.append(iter(item.items()))
        elif isinstance(item, list | tuple):
            size += 2 + len(item)  # brackets and commas
            stack.append((None, member) for member in item)
        elif isinstance(item, str):
            size += len(item) + 2
        else:
            size += len(str(item))
        if size > limit:
            return size
    return size
