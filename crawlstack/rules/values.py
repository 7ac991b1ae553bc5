"""Values as text: an element's visible text, built no longer than the chain's allowance.

A value is an lxml element, a string, a number, a boolean, or a JSON value.
An element's text includes all its descendants', so the text of each of
N nested elements is the page's text again: ``text_of`` stops building at
the characters the chain has left (``crawlstack.rules.sizes``) and looks
at the page's time budget while it walks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from lxml import etree

from crawlstack.rules import budget, sizes


def is_node(value: Any) -> bool:
    return isinstance(value, etree._Element)


# An element's text is what a reader sees: the code and styles inside it are
# left out, unless the element is itself a <script> or <style> (JSON-LD).
_INVISIBLE = frozenset({"script", "style", "noscript", "template"})
# What the fast walk must not meet: lxml's itertext takes time quadratic in
# the comments and processing instructions among an element's children
# (a minute for a page of a million ``<!---->``).
_LEFT_OUT = (*_INVISIBLE, etree.Comment, etree.ProcessingInstruction)


def _visible_text(element: Any, limit: int) -> str:
    """The text of ``element`` outside invisible elements, at most ``limit`` characters, in time linear in its size.

    (An XPath of ``text()[not(ancestor::script ...)]`` looks up every text
    node's ancestors: text nodes x depth, seconds on a page nested 2,000 deep.)
    """
    if next(element.iterancestors(*_INVISIBLE), None) is not None:
        return ""
    if next(element.iter(*_LEFT_OUT), None) is None:
        return sizes.bounded_join(element.itertext(), limit)  # nothing to leave out: lxml's own walk
    return sizes.bounded_join(_visible_pieces(element), limit)


def _visible_pieces(element: Any) -> Iterator[str]:
    """The text and tails under ``element``, in document order, outside invisible elements and comments."""
    stack: list[Any] = [element]
    while stack:
        item = stack.pop()
        if isinstance(item, str):  # a tail, after its element's subtree
            yield item
            continue
        if not isinstance(item.tag, str) or item.tag in _INVISIBLE:  # a comment's text is not the page's
            continue
        if item.text:
            yield item.text
        for child in reversed(item):
            if child.tail:
                stack.append(child.tail)
            stack.append(child)


def text_of(value: Any, limit: int | None = None) -> str | None:
    """A value as text: an element's text content, a string as is, a number in JSON form.

    At most ``limit`` characters (by default, what the chain's allowance
    holds); a longer text is cut there, and the cut noted on the allowance.
    """
    if limit is None:
        limit = sizes.current().chars
    if isinstance(value, str):
        return value if len(value) <= limit else sizes.cut_text(value, limit)
    if is_node(value):
        if not isinstance(value.tag, str):  # comment or processing instruction
            return sizes.cut_text(value.text or "", limit)
        if value.tag in _INVISIBLE:
            return sizes.bounded_join(value.itertext(), limit)
        return _visible_text(value, limit)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return None
    return sizes.cut_text(json.dumps(value, ensure_ascii=False, sort_keys=True), limit)


def finalize(value: Any, limit: int | None = None) -> Any:
    """What a field holds: elements become their text; JSON values stay as they are."""
    return text_of(value, limit) if is_node(value) else value


def kept(found: list[Any], chars: int, wanted: int) -> tuple[list[Any], int]:
    """The first ``wanted`` of a chain's values as a record keeps them, within ``chars`` characters; and their size.

    Elements become their text, cut to what is left; a JSON value that does
    not fit is left out; either cut is marked on the allowance.
    """
    values: list[Any] = []
    used = 0
    for value in found:
        budget.check()
        left = chars - used
        if left <= 0:
            sizes.mark_cut()
            break
        final = finalize(value, left)
        if final is None:
            continue
        size = len(final) if isinstance(final, str) else sizes.json_chars(final, left)
        if size > left:  # a JSON value too large for what is left
            sizes.mark_cut()
            break
        values.append(final)
        used += size
        if len(values) >= wanted:
            break
    return values, used
