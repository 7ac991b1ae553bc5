"""User patterns: the regexes a user writes, each call run with a time limit.

A mapping's ``url_patterns``, the ``regex`` and ``replace`` processors and a
crawl's ``--allow``/``--deny`` are regexes from users, run on hrefs and page
text that anyone can write.  A pattern like ``(\\w+-?)+\\.html$`` can
backtrack exponentially on a crafted input, and Python's ``re`` has no way to
stop a match.  So these run on the third-party ``regex`` module, a drop-in
for ``re`` (version 0 behaviour: ``re``'s syntax and meaning, lookarounds and
Unicode classes included), whose every call here takes
``timeout=settings.USER_PATTERN_TIMEOUT_SECONDS``.

A call that runs out of time counts as no match (``search`` gives None,
``sub`` the text unchanged).  Each time-out is counted in the current page
context (``page_context(url)``, which the extractor opens around a page) and
logged once per pattern per page; outside a page context, once per pattern
per process (the last ``_LOGGED_OUTSIDE_PAGES`` patterns remembered).

Compiling is bounded too: the engine unrolls counted repeats, so
``((a{1000}){1000}){1000}`` (24 bytes) would take gigabytes to compile.
``compile`` first reads the pattern with the engine's own parser and refuses
one whose counted repeats stand for more than
``settings.USER_PATTERN_MAX_COPIES`` copies (``PatternTooLarge``).

The project's own fixed regexes stay on ``re``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import regex

# The engine's own parser, private but unchanged for a decade: a second parser
# of ours could read a pattern differently (verbose mode, comments, classes)
# and miss the repeats the engine would unroll.
from regex import _regex_core

from crawlstack import settings

log = logging.getLogger(__name__)


class PatternTooLarge(ValueError):
    """A pattern whose counted repeats stand for more than ``settings.USER_PATTERN_MAX_COPIES`` copies."""


# What compile() may raise for a bad pattern: regex.error, RecursionError for
# hundreds of nested groups, OverflowError for a repeat count past C's range,
# ValueError for clashing inline flags ("(?V1)", "(?a)(?u)"), and
# PatternTooLarge for repeats that would unroll past what compiling can hold.
error = regex.error
COMPILE_ERRORS: tuple[type[Exception], ...] = (regex.error, RecursionError, OverflowError, ValueError, PatternTooLarge)

# How much of a pattern a log line quotes.
_SHOWN_PATTERN_CHARS = 80
# Patterns remembered as logged outside any page context.
_LOGGED_OUTSIDE_PAGES = 1024


@dataclass
class PageContext:
    """The page whose patterns are running: its URL and how many pattern calls timed out on it."""

    url: str
    timeouts: int = 0
    logged: set[str] = field(default_factory=set, repr=False)


_current_page: ContextVar[PageContext | None] = ContextVar("crawlstack_pattern_page", default=None)
_logged_outside_pages: OrderedDict[str, None] = OrderedDict()
_logged_outside_lock = threading.Lock()


@contextlib.contextmanager
def page_context(url: str) -> Iterator[PageContext]:
    """Attribute the pattern time-outs inside the block to page ``url``: counted, and each pattern logged once."""
    context = PageContext(url)
    token = _current_page.set(context)
    try:
        yield context
    finally:
        _current_page.reset(token)


def problem(exc: Exception) -> str:
    """What is wrong with a pattern ``compile`` refused, in a few words."""
    if isinstance(exc, RecursionError):  # hundreds of nested groups
        return "nested too deeply"
    if isinstance(exc, PatternTooLarge):
        return f"too large (its counted repeats stand for over {settings.USER_PATTERN_MAX_COPIES:,} copies)"
    return str(exc)  # regex.error ("missing ) at position 1"), or OverflowError


class UserPattern:
    """A compiled user regex whose calls give up after ``settings.USER_PATTERN_TIMEOUT_SECONDS``."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled = regex.compile(pattern, regex.V0)

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r})"

    @property
    def groups(self) -> int:
        return int(self._compiled.groups)

    @property
    def groupindex(self) -> dict[str, int]:
        return dict(self._compiled.groupindex)

    def search(self, text: str) -> Any:
        """The first match in ``text`` (a ``regex.Match``), or None: also when the call timed out."""
        try:
            return _bounded(lambda timeout: self._compiled.search(text, timeout=timeout))
        except TimeoutError:
            _timed_out(self.pattern)
            return None

    def sub(self, replacement: str, text: str, count: int = 0) -> str:
        """``text`` with matches replaced (``re.sub``'s template syntax); unchanged when the call timed out.

        A bad group reference in ``replacement`` raises ``error``.
        """
        try:
            return str(_bounded(lambda timeout: self._compiled.sub(replacement, text, count=count, timeout=timeout)))
        except TimeoutError:
            _timed_out(self.pattern)
            return text


def _bounded(call: Callable[[float], Any]) -> Any:
    """``call(timeout)``, tried once more when it timed out on a busy machine rather than by backtracking.

    The timeout is wall-clock time: a thread kept off the CPU by others (two
    cores, many threads) can run out of it on an ordinary match.  A pattern
    that backtracks spends its time on the CPU; a call that timed out having
    used less than half of it was waiting, and gets a second go.
    """
    timeout = settings.USER_PATTERN_TIMEOUT_SECONDS
    cpu = time.thread_time()
    try:
        return call(timeout)
    except TimeoutError:
        if time.thread_time() - cpu >= timeout / 2:
            raise
    return call(timeout)


def compile(pattern: str) -> UserPattern:
    """``pattern`` compiled; raises one of ``COMPILE_ERRORS`` (``problem`` says what is wrong)."""
    _check_copies(pattern)
    return UserPattern(pattern)


def _check_copies(pattern: str) -> None:
    """Raise ``PatternTooLarge`` if ``pattern``'s counted repeats stand for over USER_PATTERN_MAX_COPIES copies.

    Each atom counts the product of the repeats around it (``{m,n}`` counts
    n, ``{m,}`` m; ``*``, ``+`` and ``?`` count 1), atoms outside any counted
    repeat nothing: ``\\d{4}-\\d{2}`` stands for 6, ``(a{100}){100}`` for 10,000.
    Sums count as well as products, so a long run of allowed repeats is
    refused too.  The walk is linear in the pattern and stops at the limit.
    """
    parsed = _parsed(pattern)
    if parsed is None:
        return
    limit = settings.USER_PATTERN_MAX_COPIES
    copies = 0
    stack: list[tuple[Any, int]] = [(parsed, 1)]
    while stack:
        node, times = stack.pop()
        if isinstance(node, _regex_core.GreedyRepeat):  # lazy and possessive repeats are subclasses
            count = node.max_count if node.max_count is not None else node.min_count
            times *= max(1, count)
            if times > limit:  # even an empty body: refused before anything is multiplied further
                raise PatternTooLarge(pattern)
            stack.append((node.subpattern, times))
            continue
        children = _subpatterns(node)
        if children:
            stack.extend((child, times) for child in children)
        elif times > 1:
            copies += times
            if copies > limit:
                raise PatternTooLarge(pattern)


def _parsed(pattern: str) -> Any:
    """``pattern`` as the engine's parse tree (as ``regex.compile`` parses it, at V0), or None if it fails to parse.

    A pattern that fails to parse is left to ``regex.compile`` to refuse, with its own message.
    """
    flags = regex.V0
    while True:
        source = _regex_core.Source(pattern)
        info = _regex_core.Info(flags, source.char_type, {})
        info.guess_encoding = regex.UNICODE
        source.ignore_space = bool(info.flags & regex.VERBOSE)
        try:
            return _regex_core._parse_pattern(source, info)
        except _regex_core._UnscopedFlagSet:
            flags = info.global_flags  # a global flag set mid-pattern: parse again with it, as regex does
        except (regex.error, ValueError, OverflowError, IndexError, KeyError):
            return None


def _subpatterns(node: Any) -> list[Any]:
    """The parse-tree nodes directly inside ``node``; a character set counts as one atom."""
    if isinstance(node, _regex_core.SetBase):
        return []
    found: list[Any] = []
    for value in vars(node).values():
        if isinstance(value, _regex_core.RegexBase):
            found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(item for item in value if isinstance(item, _regex_core.RegexBase))
    return found


def _timed_out(pattern: str) -> None:
    page = _current_page.get()
    if page is not None:
        page.timeouts += 1
        if pattern in page.logged:
            return
        page.logged.add(pattern)
    else:
        with _logged_outside_lock:
            if pattern in _logged_outside_pages:
                return
            _logged_outside_pages[pattern] = None
            if len(_logged_outside_pages) > _LOGGED_OUTSIDE_PAGES:
                _logged_outside_pages.popitem(last=False)
    shown = pattern if len(pattern) <= _SHOWN_PATTERN_CHARS else pattern[: _SHOWN_PATTERN_CHARS - 1] + "…"
    log.warning(
        "pattern %r took over %ss on %s; treated as no match",
        shown,
        settings.USER_PATTERN_TIMEOUT_SECONDS,
        page.url if page is not None else "a URL or text outside any page",
    )
