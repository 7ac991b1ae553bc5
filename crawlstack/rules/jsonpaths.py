"""JSONPath matches one at a time, so a step can stop at its cap instead of building every match first.

jsonpath_ng's ``find`` returns the list of every match: a 10 MB listing read
with ``$.posts[*]`` is millions of match objects (over a gigabyte) before the
caller can take the first thousand.  ``values`` walks the same parsed
expression lazily, in ``find``'s order, for the forms that fan out
(``.``, ``..``, ``*``, slices, filters, ``|``, ``where``); every other node
selects from one value with its own ``find``.  A filter's condition
(``[?(@.tags[*] == 'x')]``) looks at the first ``settings.MAX_ITEMS_PER_PAGE``
+ 1 values its own paths select.  The walks look at the page's time budget
as they go.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

from jsonpath_ng import jsonpath as jp
from jsonpath_ng.ext import filter as ext_filter

from crawlstack import settings
from crawlstack.rules import budget

_WILDCARD = getattr(jp, "Wildcard", None)
_UNION = getattr(jp, "_Union", None) or getattr(jp, "Union", None)
_FILTER = getattr(ext_filter, "Filter", None)
_EXPRESSION = getattr(ext_filter, "Expression", None)
_BOOLEANS = tuple(c for c in (getattr(ext_filter, "And", None), getattr(ext_filter, "Or", None)) if c is not None)
# jsonpath_ng 1.7 and later: slices and wildcards as RFC 9535 has them, which the lazy walks follow.
_RFC_SLICES = hasattr(jp.Slice, "_compliant_constructor")


def _field_path(key: str) -> jp.JSONPath:
    maker = getattr(jp.Fields, "_compliant_constructor", jp.Fields)
    return maker(key)


def values(expression: jp.JSONPath, data: Any) -> Iterator[Any]:
    """The values ``expression`` selects from ``data``, in ``find``'s order, one at a time."""
    for datum in _walk(expression, jp.DatumInContext.wrap(data)):
        yield datum.value


def _members(datum: jp.DatumInContext, keys: Any = None) -> Iterator[jp.DatumInContext]:
    """A list's elements (those at ``keys``, a range, if given) or an object's members, each in its context."""
    value = datum.value
    if isinstance(value, dict):
        for key, member in value.items():
            budget.check()
            yield jp.DatumInContext(member, path=_field_path(key), context=datum)
        return
    for index in range(len(value)) if keys is None else keys:
        budget.check()
        yield jp.DatumInContext(value[index], path=jp.Index(index), context=datum)


def _found(node: Any, datum: jp.DatumInContext) -> list[Any]:
    found = node.find(datum)
    return found if isinstance(found, list) else [found]  # a few ext nodes give one datum


def _walk(node: Any, datum: jp.DatumInContext) -> Iterator[jp.DatumInContext]:
    kind = type(node)
    if kind is jp.Child:
        for sub in _walk(node.left, datum):
            if not isinstance(sub, jp.AutoIdForDatum):  # as find: an auto id has no children
                yield from _walk(node.right, sub)
    elif kind is jp.Descendants:
        yield from _descendants(node, datum)
    elif _UNION is not None and kind is _UNION:
        yield from _walk(node.left, datum)
        yield from _walk(node.right, datum)
    elif kind is jp.Where or kind is jp.WhereNot:
        wanted = kind is jp.Where
        for sub in _walk(node.left, datum):
            if (next(_walk(node.right, sub), None) is not None) is wanted:
                yield sub
    elif _WILDCARD is not None and kind is _WILDCARD and _RFC_SLICES:
        if isinstance(datum.value, list | tuple) or (isinstance(datum.value, dict) and jp.auto_id_field is None):
            yield from _members(datum)
        else:
            yield from _found(node, datum)
    elif kind is jp.Slice and _RFC_SLICES:
        yield from _slice(node, datum)
    elif _FILTER is not None and kind is _FILTER and node.expressions and hasattr(node, "_references_root"):
        yield from _filter(node, datum)
    else:
        yield from _found(node, datum)


def _descendants(node: Any, datum: jp.DatumInContext) -> Iterator[jp.DatumInContext]:
    """``left..right``: every value under each left match, pre-order, matched against right."""
    for top in _walk(node.left, datum):
        stack: list[Iterator[jp.DatumInContext]] = [iter([top])]
        while stack:
            here = next(stack[-1], None)
            if here is None:
                stack.pop()
                continue
            yield from _walk(node.right, here)
            if isinstance(here.value, list | dict):
                stack.append(_members(here))


def _slice(node: Any, datum: jp.DatumInContext) -> Iterator[jp.DatumInContext]:
    value = datum.value
    if node._deprecated_wildcard_use and isinstance(value, dict):
        yield from _members(datum)
    elif isinstance(value, list | tuple) and node.step != 0:
        yield from _members(datum, range(len(value))[node.start : node.end : node.step])


def _filter(node: Any, datum: jp.DatumInContext) -> Iterator[jp.DatumInContext]:
    """``[?(...)]``: each member whose conditions hold, tested one at a time."""
    if not isinstance(datum.value, list | dict):
        return
    expressions = getattr(node, "_bounded_expressions", None)
    if expressions is None:  # made once per compiled filter
        expressions = node._bounded_expressions = [_bounded(expression) for expression in node.expressions]
    with_root = node._references_root()  # as find: `$` needs the member in its context
    for member in _members(datum):
        tested = member if with_root else member.value
        if all(expression.find(tested) for expression in expressions):
            yield member


class _FirstMatches(jp.JSONPath):
    """A path that finds only the first matches of another: a filter's condition cannot build millions."""

    def __init__(self, path: jp.JSONPath) -> None:
        self.path = path

    def find(self, datum: Any) -> list[Any]:
        limit = settings.MAX_ITEMS_PER_PAGE + 1
        return list(itertools.islice(_walk(self.path, jp.DatumInContext.wrap(datum)), limit))

    def __str__(self) -> str:
        return str(self.path)


def _bounded(expression: Any) -> Any:
    """A filter condition whose own paths find at most the first matches (a copy; the compiled one is untouched)."""
    if _EXPRESSION is not None and isinstance(expression, _EXPRESSION):
        bounded = copy.copy(expression)
        bounded.target = _FirstMatches(expression.target)
        if isinstance(expression.value, jp.JSONPath):
            bounded.value = _FirstMatches(expression.value)
        return bounded
    if _BOOLEANS and isinstance(expression, _BOOLEANS):
        bounded = copy.copy(expression)
        bounded.operands = [_bounded(operand) for operand in expression.operands]
        return bounded
    return expression
