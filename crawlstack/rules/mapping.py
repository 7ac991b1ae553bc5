"""Mappings: which pages a rule applies to, the fields it extracts, the links it follows.

A mapping applies to a page when one of its ``url_patterns`` matches the URL
(``regex``: searched in the whole URL; ``domain``: the host or any subdomain)
and, if it lists ``content_types``, the response's media type is one of them
(``type/*`` matches a whole family).  The first mapping that applies wins.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from crawlstack import settings
from crawlstack.errors import failure
from crawlstack.rules import budget, patterns, sizes
from crawlstack.rules.page import Page, media_type
from crawlstack.rules.processors import ProcessorError, Step, Values, compile_processor, is_node, text_of
from crawlstack.rules.values import kept
from crawlstack.urls import InvalidURL, resolve_link

MAPPING_KEYS = frozenset(
    {"$schema", "name", "description", "url_patterns", "content_types", "url_parsers", "items", "fields"}
)
FIELD_KEYS = frozenset({"name", "description", "multiple", "processors"})
PARSER_KEYS = frozenset({"description", "processors"})
# Items a page may give at most (settings.MAX_ITEMS_PER_PAGE, read when a page is extracted).
MAX_ITEMS_PER_PAGE = settings.MAX_ITEMS_PER_PAGE
log = logging.getLogger(__name__)
_HOST = re.compile(r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/(\*|[a-z0-9][a-z0-9!#$&^_.+-]*)")


class RuleError(ValueError):
    """One problem in one rules file: ``file: location: reason``."""

    def __init__(self, file: str, location: str, reason: str) -> None:
        self.file, self.location, self.reason = file, location, reason
        super().__init__(f"{file}: {location}: {reason}" if location else f"{file}: {reason}")


@dataclass(frozen=True)
class Chain:
    steps: tuple[Step, ...]

    def run(self, page: Page, context: Values | None = None) -> Values:
        """The chain's values; its first step works on ``context`` (an item's node) or, by default, the page."""
        values = context
        for step in self.steps:
            budget.check()
            values = step(page, values)
        return values or []


@dataclass(frozen=True)
class Field:
    """A named value of a record: its chain's first value, or up to ``settings.MAX_ITEMS_PER_PAGE`` with ``multiple``.

    Its values hold at most ``settings.MAX_FIELD_CHARS`` characters, cut
    while they are built (``crawlstack.rules.sizes``), with a note on the page.
    """

    name: str
    chain: Chain
    multiple: bool = False

    def value(self, page: Page, item: Any = None) -> Any:
        """The first value, or every value when ``multiple``; None when the chain gave nothing.

        With ``item`` (one of a mapping's ``items``), the chain starts from it instead of the page.
        """
        return self.measured(page, item)[0]

    def measured(self, page: Page, item: Any = None, room: int | None = None) -> tuple[Any, int]:
        """(``value``, the characters it holds), within ``room`` characters if given (what the page has left)."""
        field_chars = settings.MAX_FIELD_CHARS
        chars = field_chars if room is None else max(0, min(room, field_chars))
        with sizes.allowance(settings.MAX_ITEMS_PER_PAGE + 1, chars) as allowance:
            try:
                context = None if item is None else [item]
                wanted = settings.MAX_ITEMS_PER_PAGE + 1 if self.multiple else 1
                values, used = kept(self.chain.run(page, context), chars, wanted)
            except budget.BudgetExceeded:
                raise  # the page's, not the field's: the extractor fails the page
            except Exception as exc:
                # A hostile page must cost one field, not the batch's other records.
                log.warning("field %r failed on %s: %s", self.name, page.url, failure(exc))
                return None, 0
        if allowance.cut:
            if chars < field_chars:
                page.note(f"field {self.name!r} cut: a page's values hold {settings.MAX_PAGE_VALUE_CHARS:,} characters")
            else:
                page.note(f"field {self.name!r} cut at {field_chars:,} characters")
        if len(values) > settings.MAX_ITEMS_PER_PAGE or allowance.cut_values:
            values = values[: settings.MAX_ITEMS_PER_PAGE]
            page.note(f"field {self.name!r} cut at {settings.MAX_ITEMS_PER_PAGE:,} values")
        if not values:
            return None, 0
        return (values, used) if self.multiple else (values[0], used)


UrlTest = Callable[[str], bool]


def _regex_test(pattern: patterns.UserPattern) -> UrlTest:
    return lambda url: pattern.search(url) is not None


def _domain_test(domain: str) -> UrlTest:
    suffix = "." + domain

    def test(url: str) -> bool:
        try:
            host = (urlsplit(url).hostname or "").rstrip(".")
        except ValueError:
            return False
        return host == domain or host.endswith(suffix)

    return test


@dataclass(frozen=True)
class Mapping:
    name: str
    file: str
    url_tests: tuple[UrlTest, ...]
    url_parsers: tuple[Chain, ...]
    fields: tuple[Field, ...]
    content_types: tuple[str, ...] = ()
    # Selects a listing's items: each is then one record, its fields evaluated from the item.
    items: Chain | None = None

    def matches(self, url: str) -> bool:
        return any(test(url) for test in self.url_tests)

    def accepts(self, content_type: str | None) -> bool:
        """True when the mapping lists no content types, or lists this one (``type/*`` for a family)."""
        if not self.content_types:
            return True
        media = media_type(content_type)
        family = media.split("/", 1)[0] + "/*"
        return media in self.content_types or family in self.content_types

    def extract(self, page: Page) -> dict[str, Any]:
        """The page's one record's fields (a mapping without ``items``)."""
        return self.extract_records(page, [None])[0]

    def extract_items(self, page: Page) -> list[dict[str, Any]]:
        """The page's records: one per item, or the page's one without ``items``.

        At most ``settings.MAX_ITEMS_PER_PAGE`` items (one more is found, so a
        cut is noted), holding at most ``settings.MAX_PAGE_VALUE_CHARS`` characters together.
        """
        if self.items is None:
            return [self.extract(page)]
        cap = settings.MAX_ITEMS_PER_PAGE
        try:
            with sizes.allowance(cap + 1, settings.MAX_PAGE_VALUE_CHARS):
                found = self.items.run(page)
        except budget.BudgetExceeded:
            raise
        except Exception as exc:
            log.warning("the items of %r failed on %s: %s", self.name, page.url, failure(exc))
            return []
        if len(found) > cap:
            page.note(f"more than {cap:,} items: the first {cap:,} kept")
        return self.extract_records(page, found[:cap])

    def extract_records(self, page: Page, items: Values) -> list[dict[str, Any]]:
        """One record per item (None: the page's), the fields of all within a page's characters."""
        left = settings.MAX_PAGE_VALUE_CHARS
        records = []
        for item in items:
            record = {}
            for f in self.fields:
                record[f.name], used = f.measured(page, item, left)
                left -= used
            records.append(record)
        return records

    def links(self, page: Page) -> list[str]:
        """The url_parsers' results, absolute and canonical, in order, without repeats."""
        found: dict[str, None] = {}
        for parser in self.url_parsers:
            # As many links as a page's own hrefs are read (settings.MAX_HREFS_PER_PAGE).
            with sizes.allowance(settings.MAX_HREFS_PER_PAGE, settings.MAX_PAGE_VALUE_CHARS):
                found.update(self._parser_links(page, parser))
        return list(found)

    def _parser_links(self, page: Page, parser: Chain) -> dict[str, None]:
        found: dict[str, None] = {}
        try:
            values = parser.run(page)
        except budget.BudgetExceeded:
            raise
        except Exception as exc:
            log.warning("a url_parser of %r failed on %s: %s", self.name, page.url, failure(exc))
            return found
        for value in values:
            budget.check()
            href = _href_of(value)
            if not href:
                continue
            try:
                found.setdefault(resolve_link(page.base_url, href))
            except InvalidURL:
                continue
        return found


def _href_of(value: Any) -> str | None:
    """The URL a url_parser's value stands for, or None when it is not one."""
    # An element stands for the link it carries (<a href>, <link href>, <img
    # src>), even an empty one; only an element with neither stands for its text.
    if is_node(value) and isinstance(value.tag, str):
        for attribute in ("href", "src"):
            if attribute in value.attrib:
                return str(value.get(attribute)).strip() or None
    text = text_of(value)
    if not isinstance(text, str):
        return None
    text = text.strip()
    # Free text ("see our shop") resolves to a URL too, but is not one.
    return text if text and not any(ch.isspace() for ch in text) else None


class _Collector:
    """Every problem in one file, so ``rules validate`` reports them all at once."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.errors: list[RuleError] = []

    def add(self, location: str, reason: str) -> None:
        self.errors.append(RuleError(self.file, location, reason))


def _unknown_keys(errors: _Collector, where: str, data: dict[str, Any], allowed: frozenset[str]) -> None:
    from crawlstack.rules.schema import location  # the schema module imports this one

    for key in sorted(set(data) - allowed):
        # Quoted as the schema check quotes it: a key may hold a line break.
        shown = location((key,))
        at = f"{where}{shown}" if shown.startswith("[") or not where else f"{where}.{shown}"
        errors.add(at, f"unknown key (allowed: {', '.join(sorted(allowed))})")


def _description(errors: _Collector, where: str, data: dict[str, Any]) -> None:
    if "description" in data and not isinstance(data["description"], str):
        errors.add(f"{where}.description", "must be a string")


def _chain(errors: _Collector, where: str, processors: Any) -> Chain | None:
    if not isinstance(processors, list) or not processors:
        errors.add(f"{where}.processors", "must be a non-empty list")
        return None
    steps = []
    for i, definition in enumerate(processors):
        try:
            steps.append(compile_processor(definition))
        except ProcessorError as exc:
            errors.add(f"{where}.processors[{i}]" + (f".{exc.location}" if exc.location else ""), exc.reason)
    return Chain(tuple(steps)) if len(steps) == len(processors) else None


def _url_tests(errors: _Collector, raw: Any) -> list[UrlTest]:
    if not isinstance(raw, list) or not raw:
        errors.add("url_patterns", "must be a non-empty list")
        return []
    tests = []
    for i, pat in enumerate(raw):
        where = f"url_patterns[{i}]"
        if not isinstance(pat, dict):
            errors.add(where, 'must be an object like {"type": "regex", "pattern": "..."}')
            continue
        _unknown_keys(errors, where, pat, frozenset({"type", "pattern"}))
        kind, pattern = pat.get("type"), pat.get("pattern")
        if kind not in ("regex", "domain"):
            errors.add(f"{where}.type", "must be 'regex' or 'domain'")
            continue
        if not isinstance(pattern, str) or not pattern:
            errors.add(f"{where}.pattern", "must be a non-empty string")
            continue
        if kind == "regex":
            try:
                tests.append(_regex_test(patterns.compile(pattern)))
            except patterns.COMPILE_ERRORS as exc:
                errors.add(f"{where}.pattern", f"invalid regex: {patterns.problem(exc)}")
            continue
        domain = pattern.strip().lower().rstrip(".")
        with contextlib.suppress(UnicodeError):
            domain = domain.encode("idna").decode("ascii")
        if not _HOST.fullmatch(domain):
            errors.add(f"{where}.pattern", f"not a domain name like example.com (no scheme, port or path): {pattern!r}")
            continue
        tests.append(_domain_test(domain))
    return tests


def _content_types(errors: _Collector, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        errors.add("content_types", 'must be a non-empty list of media types like "text/html"')
        return ()
    out = []
    for i, value in enumerate(raw):
        if not isinstance(value, str) or not _MEDIA_TYPE.fullmatch(value.strip().lower()):
            errors.add(f"content_types[{i}]", f'not a media type like "application/json" or "text/*": {value!r}')
            continue
        out.append(value.strip().lower())
    return tuple(out)


def _parsers(errors: _Collector, raw: Any) -> list[Chain]:
    if not isinstance(raw, list):
        errors.add("url_parsers", "must be a list")
        return []
    parsers = []
    for i, parser in enumerate(raw):
        where = f"url_parsers[{i}]"
        if not isinstance(parser, dict):
            errors.add(where, "must be an object")
            continue
        _unknown_keys(errors, where, parser, PARSER_KEYS)
        _description(errors, where, parser)
        chain = _chain(errors, where, parser.get("processors"))
        if chain is not None:
            parsers.append(chain)
    return parsers


def _items(errors: _Collector, raw: Any) -> Chain | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        errors.add("items", 'must be an object like {"processors": [...]}')
        return None
    _unknown_keys(errors, "items", raw, PARSER_KEYS)
    _description(errors, "items", raw)
    return _chain(errors, "items", raw.get("processors"))


def _fields(errors: _Collector, raw: Any) -> list[Field]:
    if not isinstance(raw, list):
        errors.add("fields", "must be a list")
        return []
    fields = []
    seen: set[str] = set()
    for i, fdef in enumerate(raw):
        where = f"fields[{i}]"
        if not isinstance(fdef, dict):
            errors.add(where, "must be an object")
            continue
        _unknown_keys(errors, where, fdef, FIELD_KEYS)
        _description(errors, where, fdef)
        fname = fdef.get("name")
        if not isinstance(fname, str) or not fname.strip():
            errors.add(f"{where}.name", "must be a non-empty string")
        elif fname in seen:
            errors.add(f"{where}.name", f"duplicate field name {fname!r}")
        multiple = fdef.get("multiple", False)
        if not isinstance(multiple, bool):
            errors.add(f"{where}.multiple", "must be true or false")
        chain = _chain(errors, where, fdef.get("processors"))
        if isinstance(fname, str) and fname.strip() and fname not in seen and chain is not None:
            fields.append(Field(fname, chain, multiple is True))
        if isinstance(fname, str):
            seen.add(fname)
    return fields


def compile_mapping(file: str, data: Any) -> Mapping:
    """Compile one mapping; raises the first RuleError (``compile_mapping_errors`` gives them all)."""
    mapping, errors = compile_mapping_errors(file, data)
    if errors:
        raise errors[0]
    assert mapping is not None
    return mapping


def compile_mapping_errors(file: str, data: Any) -> tuple[Mapping | None, list[RuleError]]:
    errors = _Collector(file)
    if not isinstance(data, dict):
        errors.add("", "a mapping must be a JSON object")
        return None, errors.errors
    _unknown_keys(errors, "", data, MAPPING_KEYS)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.add("name", "must be a non-empty string")
    for key in ("description", "$schema"):
        if key in data and not isinstance(data[key], str):
            errors.add(key, "must be a string")
    tests = _url_tests(errors, data.get("url_patterns"))
    content_types = _content_types(errors, data.get("content_types"))
    parsers = _parsers(errors, data.get("url_parsers", []))
    items = _items(errors, data.get("items"))
    fields = _fields(errors, data.get("fields", []))
    if errors.errors:
        return None, errors.errors
    assert isinstance(name, str)
    return Mapping(name.strip(), file, tuple(tests), tuple(parsers), tuple(fields), content_types, items), []


def first_match(mappings: Sequence[Mapping], url: str, content_type: str | None = None) -> Mapping | None:
    for m in mappings:
        if m.matches(url) and (content_type is None or m.accepts(content_type)):
            return m
    return None
