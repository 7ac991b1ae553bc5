"""Processors: the steps of a field's or URL parser's chain.

Each processor is ``{"type", "parameters"}``.  It takes the values the
previous step produced (the first step gets the page) and returns a new list.
Values are lxml elements, strings, numbers, booleans, or JSON values; a
string processor reads an element as its text.  Every processor is compiled
once when the rules load (XPath and CSS compiled, regexes compiled and kept),
so an invalid expression is a load-time error with its location, never a
crawl-time one.

The catalogue is ``PROCESSORS``; docs/rules.md has an example of each.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urljoin

from lxml import etree

from crawlstack.rules import budget, patterns, sizes
from crawlstack.rules.page import Page
from crawlstack.rules.values import finalize, is_node, text_of

__all__ = ["PROCESSORS", "ProcessorError", "Step", "Values", "compile_processor", "finalize", "is_node", "text_of"]

Values = list[Any]
Step = Callable[[Page, Values | None], Values]
Compiler = Callable[[dict[str, Any]], Step]


class ProcessorError(ValueError):
    """An invalid processor definition; ``location`` is relative to the processor."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(reason)
        self.location = location
        self.reason = reason


# --- parameters ------------------------------------------------------------------
def _str_param(params: dict[str, Any], name: str, *, required: bool = True, empty: bool = False) -> str | None:
    if name not in params:
        if required:
            raise ProcessorError(f"parameters.{name}", "required")
        return None
    value = params[name]
    if not isinstance(value, str):
        raise ProcessorError(f"parameters.{name}", "must be a string")
    if not value and not empty:
        raise ProcessorError(f"parameters.{name}", "must not be empty")
    return value


def _required_str(params: dict[str, Any], name: str, *, empty: bool = False) -> str:
    value = _str_param(params, name, empty=empty)
    assert value is not None
    return value


def _bool_param(params: dict[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise ProcessorError(f"parameters.{name}", "must be true or false")
    return value


def _compile_regex(pattern: str, where: str) -> patterns.UserPattern:
    try:
        return patterns.compile(pattern)
    except patterns.COMPILE_ERRORS as exc:
        raise ProcessorError(where, f"invalid regex: {patterns.problem(exc)}") from exc


# --- values ----------------------------------------------------------------------
def _texts(values: Values | None) -> Iterable[str]:
    """The values as text, each cut to what the step may still build; none once that is spent."""
    room = sizes.current().chars
    for value in values or []:
        budget.check()
        if room <= 0:
            sizes.mark_cut()
            return
        text = text_of(value, room)
        if text is not None:
            room -= len(text)
            yield text


def _map_text(fn: Callable[[str], str]) -> Step:
    def step(page: Page, values: Values | None) -> Values:
        room = sizes.current().chars
        out: Values = []
        for text in _texts(values):
            result = fn(text)
            if len(result) > room:  # replace can lengthen a text
                result = sizes.cut_text(result, room)
            room -= len(result)
            out.append(result)
        return out

    return step


def _xpath_results(result: Any) -> Values:
    # Text and attribute results become plain strings; elements stay nodes so
    # a following xpath or css step runs relative to them.
    if isinstance(result, list):
        return [str(r) if isinstance(r, str | bytes) else r for r in result]
    if isinstance(result, bool):
        return [result]
    if isinstance(result, float):
        if result != result:  # NaN: number() of something that is not a number
            return []
        return [int(result) if result.is_integer() else result]
    return [str(result)]


Select = Callable[[Any, int], Any]


_PROBE_DOCUMENT = etree.fromstring("<html><body><p>x</p></body></html>")


def _run_on_nodes(page: Page, values: Values | None, select: Select) -> Values:
    """``select`` run on each node (the page's root first), until the step has its matches."""
    cap = sizes.current().matches
    contexts: Sequence[Any] = [page.tree] if values is None else values
    out: Values = []
    for context in contexts:
        budget.check()
        if not is_node(context):
            continue
        try:
            out.extend(_xpath_results(select(context, cap))[: cap - len(out)])
        except etree.XPathEvalError:
            continue
        if len(out) >= cap:
            break
    return out


def _selector(path: str, compiled: etree.XPath) -> Select:
    """``compiled`` run for at most ``n`` results.

    A path that selects nodes is evaluated as ``(path)[position() <= n]``:
    libxml2 hands over the first n, not every match made a Python object
    (a million text nodes of ``//text()`` on a page of tiny tags).
    """
    try:
        etree.XPath(f"({path})[position() <= 1]")(_PROBE_DOCUMENT)
    except (etree.XPathSyntaxError, etree.XPathEvalError):  # a string, number or boolean: one result
        return lambda context, n: compiled(context)
    firsts: dict[int, etree.XPath] = {}  # n is a step's cap: one or two values

    def select(context: Any, n: int) -> Any:
        first = firsts.get(n)
        if first is None:
            first = firsts[n] = etree.XPath(f"({path})[position() <= {n}]", smart_strings=False)
        return first(context)

    return select


# --- the catalogue ---------------------------------------------------------------
def compile_xpath(params: dict[str, Any]) -> Step:
    expression = _required_str(params, "expression")
    try:
        compiled = etree.XPath(expression, smart_strings=False)
    except etree.XPathSyntaxError as exc:
        raise ProcessorError("parameters.expression", f"invalid XPath: {exc}") from exc
    _check_runs(compiled, "parameters.expression")
    select = _selector(expression, compiled)

    def step(page: Page, values: Values | None) -> Values:
        return _run_on_nodes(page, values, select)

    return step


def _check_runs(compiled: etree.XPath, where: str) -> None:
    """Run once on a tiny document: an undefined namespace prefix, function or
    variable compiles but fails on every page, so it is a load-time error too."""
    try:
        compiled(_PROBE_DOCUMENT)
    except etree.XPathEvalError as exc:
        hint = (
            " (namespaces are removed from XML pages: write //creator, not //dc:creator)"
            if ":" in str(compiled.path)
            else ""
        )
        raise ProcessorError(where, f"invalid XPath: {exc}{hint}") from exc


# Parsel's pseudo-elements, which Scrapy users write out of habit: `h1::text`
# (the element's own text nodes) and `a::attr(href)`.
_PSEUDO = re.compile(r"::(?:(text)|attr\(\s*([^)\s]+)\s*\))\s*$")


def compile_css(params: dict[str, Any]) -> Step:
    selector = _required_str(params, "selector")
    attribute = _str_param(params, "attribute", required=False)
    from cssselect import ExpressionError, GenericTranslator, HTMLTranslator, SelectorError

    own_text = False
    pseudo = _PSEUDO.search(selector)
    if pseudo:
        if attribute is not None:
            raise ProcessorError("parameters.attribute", f"the selector already ends in {pseudo.group(0)!r}; drop one")
        if pseudo.group(1):
            own_text = True
        else:
            attribute = pseudo.group(2)
        selector = selector[: pseudo.start()]
    try:
        html_path = HTMLTranslator().css_to_xpath(selector)
        xml_path = GenericTranslator().css_to_xpath(selector)
    except (SelectorError, ExpressionError) as exc:
        raise ProcessorError("parameters.selector", f"invalid CSS selector: {exc}") from exc
    if own_text:
        suffix = "/text()"
    elif attribute is not None:
        if not re.fullmatch(r"[\w:.-]+", attribute):
            raise ProcessorError("parameters.attribute", f"not an attribute name: {attribute!r}")
        suffix = f"/@{attribute}"
    else:
        suffix = ""
    try:
        html_xpath = _selector(html_path + suffix, etree.XPath(html_path + suffix, smart_strings=False))
        xml_xpath = _selector(xml_path + suffix, etree.XPath(xml_path + suffix, smart_strings=False))
    except etree.XPathSyntaxError as exc:
        raise ProcessorError("parameters.selector", f"invalid CSS selector: {exc}") from exc

    def step(page: Page, values: Values | None) -> Values:
        # HTML matching is case-insensitive on element names, XML's is not.
        return _run_on_nodes(page, values, xml_xpath if page.kind == "xml" else html_xpath)

    return step


def compile_jsonpath(params: dict[str, Any]) -> Step:
    expression = _required_str(params, "expression")
    from jsonpath_ng.exceptions import JSONPathError
    from jsonpath_ng.ext import parse

    from crawlstack.rules import jsonpaths

    try:
        compiled = parse(expression)
    except (JSONPathError, Exception) as exc:  # the lexer raises bare Exceptions too
        raise ProcessorError("parameters.expression", f"invalid JSONPath: {exc}") from exc

    def step(page: Page, values: Values | None) -> Values:
        # Relative to each JSON value before it, or to a string holding JSON
        # (a <script type="application/ld+json"> block, say).
        allowance = sizes.current()
        room = allowance.chars  # for the texts read as JSON
        contexts: Iterable[Any] = [page.json] if values is None else values
        out: Values = []
        for context in contexts:
            budget.check()
            if isinstance(context, str) or is_node(context):
                text = text_of(context, max(room, 0)) or ""
                room -= len(text)
                context = page.embedded_json(text)
            if not isinstance(context, dict | list):
                continue
            for value in jsonpaths.values(compiled, context):
                out.append(value)
                if len(out) >= allowance.matches:
                    return out
        return out

    return step


def compile_regex(params: dict[str, Any]) -> Step:
    pattern = _compile_regex(_required_str(params, "pattern"), "parameters.pattern")
    group: int | str
    if "group" not in params:
        group = 1 if pattern.groups else 0
    else:
        group = params["group"]
        if isinstance(group, bool) or not isinstance(group, int | str):
            raise ProcessorError("parameters.group", "must be a group number or name")
        if isinstance(group, int) and not 0 <= group <= pattern.groups:
            raise ProcessorError("parameters.group", f"the pattern has {pattern.groups} group(s); no group {group}")
        if isinstance(group, str) and group not in pattern.groupindex:
            raise ProcessorError("parameters.group", f"the pattern has no group named {group!r}")

    def step(page: Page, values: Values | None) -> Values:
        out: Values = []
        for text in _texts(values):
            match = pattern.search(text)
            if match is not None and match.group(group) is not None:
                out.append(match.group(group))
        return out

    return step


def compile_replace(params: dict[str, Any]) -> Step:
    find = _required_str(params, "find")
    replacement = _required_str(params, "replace", empty=True)
    if _bool_param(params, "regex"):
        pattern = _compile_regex(find, "parameters.find")
        # Expand the template once now, so a bad group reference is a
        # load-time error: this pattern has the same groups and always
        # matches the empty string.
        try:
            probe: patterns.UserPattern | None = patterns.compile(f"(?:{find})|")
        except patterns.COMPILE_ERRORS:
            probe = None  # wrapping broke it (a verbose pattern ending in a comment): checked at run time
        if probe is not None:
            try:
                probe.sub(replacement, "", count=1)
            except patterns.error as exc:
                raise ProcessorError("parameters.replace", f"invalid replacement: {exc}") from exc

        def substitute(text: str) -> str:
            try:
                return pattern.sub(replacement, text)
            except patterns.error:
                return text

        return _map_text(substitute)
    return _map_text(lambda text: text.replace(find, replacement))


def compile_split(params: dict[str, Any]) -> Step:
    separator = _required_str(params, "separator")

    def step(page: Page, values: Values | None) -> Values:
        cap = sizes.current().matches
        out: Values = []
        for text in _texts(values):
            for piece in text.split(separator):
                if piece:
                    out.append(piece)
                    if len(out) >= cap:
                        return out
        return out

    return step


def compile_join(params: dict[str, Any]) -> Step:
    separator = _required_str(params, "separator", empty=True)

    def step(page: Page, values: Values | None) -> Values:
        allowance = sizes.current()
        if values is not None and len(values) >= allowance.matches:
            # The step before stopped at its cap, one more than is kept: there were more.
            values = values[: allowance.matches - 1]
            sizes.mark_cut_values()
        texts = iter(_texts(values))
        first = next(texts, None)
        if first is None:
            return []
        # Stops reading texts once the joined text has its characters.
        return [sizes.bounded_join(itertools.chain([first], (separator + text for text in texts)), allowance.chars)]

    return step


def compile_first(params: dict[str, Any]) -> Step:
    return lambda page, values: (values or [])[:1]


def compile_absolute_url(params: dict[str, Any]) -> Step:
    def step(page: Page, values: Values | None) -> Values:
        base = page.base_url
        out: Values = []
        for text in _texts(values):
            text = text.strip()
            if not text:
                continue
            try:
                out.append(urljoin(base, text))
            except ValueError:  # e.g. a broken IPv6 literal
                continue
        return out

    return step


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
TEMPLATE_PLACEHOLDERS = ("page_url", "value")


def compile_url_template(params: dict[str, Any]) -> Step:
    """A URL from the page's own URL and each value: ``{page_url}?max_id={value}``, for cursor pagination.

    The value is percent-encoded.  A query parameter the template sets
    replaces the page URL's own of that name, so a cursor page's next URL
    does not pile up ``max_id`` after ``max_id``.  With no values, it gives nothing.
    """
    template = _required_str(params, "template")
    names = _PLACEHOLDER.findall(template)
    unknown = sorted(set(names) - set(TEMPLATE_PLACEHOLDERS))
    if unknown:
        raise ProcessorError(
            "parameters.template", f"unknown placeholder {{{unknown[0]}}} (known: {{page_url}}, {{value}})"
        )
    if "value" not in names:
        raise ProcessorError("parameters.template", "must hold {value}, the value extracted")

    def step(page: Page, values: Values | None) -> Values:
        out: Values = []
        for text in _texts(values):
            filled = {"page_url": page.url, "value": quote(text.strip(), safe="")}
            out.append(_merge_query(_PLACEHOLDER.sub(partial(_placeholder, filled), template)))
        return out

    return step


def _placeholder(filled: dict[str, str], match: re.Match[str]) -> str:
    return filled[match.group(1)]


def _merge_query(url: str) -> str:
    """Everything after the first ``?`` as one query, a later parameter of a name replacing an earlier one."""
    head, mark, rest = url.partition("?")
    if not mark or "?" not in rest:
        return url
    rest, hash_mark, fragment = rest.partition("#")
    merged: dict[str, str] = {}
    for key, value in parse_qsl(rest.replace("?", "&"), keep_blank_values=True):
        merged[key] = value
    return f"{head}?{urlencode(list(merged.items()))}" + (f"#{fragment}" if hash_mark else "")


def to_number(value: Any) -> int | float | None:
    """``"1,234.50"`` -> 1234.5, ``"42"`` -> 42, ``"$9.99"`` -> 9.99; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    text = text_of(value)
    if text is None:
        return None
    text = text.strip()
    # Currency signs at either end ("$9.99", "9,99 €" is not supported: the
    # comma is read as a thousands separator).
    while text and unicodedata.category(text[0]) == "Sc":
        text = text[1:].lstrip()
    while text and unicodedata.category(text[-1]) == "Sc":
        text = text[:-1].rstrip()
    text = re.sub(r"(?<=\d)[,_\s\u00a0\u202f](?=\d)", "", text)
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        return None
    if re.fullmatch(r"[+-]?\d+", text) and len(text) <= 4000:  # int() refuses more than 4300 digits
        return int(text)
    number = float(text)
    return number if number not in (float("inf"), float("-inf")) else None


def compile_to_number(params: dict[str, Any]) -> Step:
    def step(page: Page, values: Values | None) -> Values:
        out: Values = []
        for value in values or []:
            budget.check()
            number = to_number(value)
            if number is not None:
                out.append(number)
        return out

    return step


_TIME_DIRECTIVES = re.compile(r"%[HIMSfpXcTRrz]")
_PROBE = datetime(2001, 2, 3, 4, 5, 6)


def _iso(moment: datetime, has_time: bool) -> str:
    return moment.isoformat() if has_time else moment.date().isoformat()


def compile_parse_date(params: dict[str, Any]) -> Step:
    fmt = _str_param(params, "format", required=False)
    if fmt is not None:
        try:
            datetime.strptime(_PROBE.strftime(fmt), fmt)
        except ValueError as exc:
            if "directive" in str(exc) or "stray" in str(exc):
                raise ProcessorError("parameters.format", f"invalid date format: {exc}") from exc
        with_time = bool(_TIME_DIRECTIVES.search(fmt))

        def parse(text: str) -> str | None:
            try:
                return _iso(datetime.strptime(text.strip(), fmt), with_time)
            except ValueError:
                return None

    else:
        from dateutil import parser as dateparser

        def parse(text: str) -> str | None:
            # A date without a year ("Mar 5") is taken to be in the current
            # year, as dateutil and dateparser do.
            year = datetime.now(UTC).year
            early, late = datetime(year, 1, 1, 0, 0, 0), datetime(year, 1, 1, 1, 1, 1)
            try:
                moment = dateparser.parse(text, default=early)
                # Parsed again with another default time: if every part of the
                # time came from the defaults, the text had none: a date.
                has_time = moment.time() != early.time() or dateparser.parse(text, default=late).time() != late.time()
            except (ValueError, OverflowError, TypeError):
                return None
            return _iso(moment, has_time)

    def step(page: Page, values: Values | None) -> Values:
        out: Values = []
        for value in values or []:
            budget.check()
            if isinstance(value, int | float) and not isinstance(value, bool):
                # Unix time, in seconds.
                with contextlib.suppress(ValueError, OverflowError, OSError):
                    out.append(datetime.fromtimestamp(value, UTC).isoformat())
                continue
            text = text_of(value)
            parsed = parse(text) if text else None
            if parsed is not None:
                out.append(parsed)
        return out

    return step


def compile_default(params: dict[str, Any]) -> Step:
    if "value" not in params:
        raise ProcessorError("parameters.value", "required")
    value = params["value"]
    if isinstance(value, dict | list) or value is None:
        raise ProcessorError("parameters.value", "must be a string, number or boolean")
    if isinstance(value, float) and not math.isfinite(value):
        raise ProcessorError("parameters.value", "must be a finite number (NaN and Infinity are not JSON)")

    def step(page: Page, values: Values | None) -> Values:
        return values if values else [value]

    return step


def _no_parameters(fn: Callable[[str], str]) -> Compiler:
    return lambda params: _map_text(fn)


PROCESSORS: dict[str, Compiler] = {
    "xpath": compile_xpath,
    "css": compile_css,
    "jsonpath": compile_jsonpath,
    "regex": compile_regex,
    "replace": compile_replace,
    "trim": _no_parameters(str.strip),
    "normalize_space": _no_parameters(lambda text: " ".join(text.split())),
    "lower": _no_parameters(str.lower),
    "upper": _no_parameters(str.upper),
    "split": compile_split,
    "join": compile_join,
    "first": compile_first,
    "absolute_url": compile_absolute_url,
    "to_number": compile_to_number,
    "parse_date": compile_parse_date,
    "default": compile_default,
    "url_template": compile_url_template,
}

# The parameters each processor accepts; anything else is an error.
PARAMETERS: dict[str, frozenset[str]] = {
    "xpath": frozenset({"expression"}),
    "css": frozenset({"selector", "attribute"}),
    "jsonpath": frozenset({"expression"}),
    "regex": frozenset({"pattern", "group"}),
    "replace": frozenset({"find", "replace", "regex"}),
    "split": frozenset({"separator"}),
    "join": frozenset({"separator"}),
    "parse_date": frozenset({"format"}),
    "default": frozenset({"value"}),
    "url_template": frozenset({"template"}),
}


def compile_processor(definition: Any) -> Step:
    if not isinstance(definition, dict):
        raise ProcessorError("", "a processor must be an object with 'type' and 'parameters'")
    extra = sorted(set(definition) - {"type", "parameters"})
    if extra:
        raise ProcessorError(extra[0], "unknown key (a processor has 'type' and 'parameters')")
    kind = definition.get("type")
    if not isinstance(kind, str) or kind not in PROCESSORS:
        known = ", ".join(sorted(PROCESSORS))
        raise ProcessorError("type", f"unknown processor type {kind!r} (known: {known})")
    params = definition.get("parameters", {})
    if not isinstance(params, dict):
        raise ProcessorError("parameters", "must be an object")
    unknown = sorted(set(params) - PARAMETERS.get(kind, frozenset()))
    if unknown:
        accepted = ", ".join(sorted(PARAMETERS.get(kind, ()))) or "none"
        raise ProcessorError(f"parameters.{unknown[0]}", f"unknown parameter for {kind} (accepted: {accepted})")
    return PROCESSORS[kind](params)
