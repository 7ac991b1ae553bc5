"""Processors: the steps of a field's or URL parser's chain.

Each processor takes the values the previous step produced (the first step
gets the page) and returns a new list.  A processor is compiled once when the
rules load, so an invalid expression is a load-time error, not a crawl-time
one.  Register new types in ``PROCESSORS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lxml import etree

from crawlstack.rules.page import Page

Values = list[Any]
Step = Callable[[Page, Values | None], Values]


class ProcessorError(ValueError):
    """An invalid processor definition; ``location`` is relative to the processor."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(reason)
        self.location = location
        self.reason = reason


def _require_str(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise ProcessorError(f"parameters.{name}", "must be a non-empty string")
    return value


def _to_value(result: Any) -> Any:
    # Text and attribute results become plain strings; elements stay nodes so
    # a following xpath can run relative to them.
    if isinstance(result, etree._ElementUnicodeResult | str | bytes):
        return str(result)
    return result


def compile_xpath(params: dict[str, Any]) -> Step:
    expression = _require_str(params, "expression")
    try:
        compiled = etree.XPath(expression)
    except etree.XPathSyntaxError as exc:
        raise ProcessorError("parameters.expression", f"invalid XPath: {exc}") from exc

    def step(page: Page, values: Values | None) -> Values:
        contexts: Sequence[Any] = [page.tree] if values is None else values
        out: Values = []
        for context in contexts:
            if context is None or not isinstance(context, etree._Element):
                continue
            try:
                result = compiled(context)
            except etree.XPathEvalError:
                continue
            if isinstance(result, list):
                out.extend(_to_value(r) for r in result)
            elif isinstance(result, bool):
                out.append(result)
            elif isinstance(result, float):
                out.append(int(result) if result.is_integer() else result)
            else:
                out.append(_to_value(result))
        return out

    return step


def compile_trim(params: dict[str, Any]) -> Step:
    def step(page: Page, values: Values | None) -> Values:
        return [v.strip() if isinstance(v, str) else v for v in (values or [])]

    return step


PROCESSORS: dict[str, Callable[[dict[str, Any]], Step]] = {
    "xpath": compile_xpath,
    "trim": compile_trim,
}


def compile_processor(definition: Any) -> Step:
    if not isinstance(definition, dict):
        raise ProcessorError("", "a processor must be an object with 'type' and 'parameters'")
    kind = definition.get("type")
    if kind not in PROCESSORS:
        known = ", ".join(sorted(PROCESSORS))
        raise ProcessorError("type", f"unknown processor type {kind!r} (known: {known})")
    params = definition.get("parameters", {})
    if not isinstance(params, dict):
        raise ProcessorError("parameters", "must be an object")
    return PROCESSORS[kind](params)
