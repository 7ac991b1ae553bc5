"""Mappings: which pages a rule applies to, the fields it extracts, the links it follows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crawlstack.rules.page import Page
from crawlstack.rules.processors import ProcessorError, Step, Values, compile_processor


class RuleError(ValueError):
    """One problem in one rules file: ``file: location: reason``."""

    def __init__(self, file: str, location: str, reason: str) -> None:
        self.file, self.location, self.reason = file, location, reason
        super().__init__(f"{file}: {location}: {reason}" if location else f"{file}: {reason}")


@dataclass(frozen=True)
class Chain:
    steps: tuple[Step, ...]

    def run(self, page: Page) -> Values:
        values: Values | None = None
        for step in self.steps:
            values = step(page, values)
        return values or []


@dataclass(frozen=True)
class Field:
    name: str
    chain: Chain


@dataclass(frozen=True)
class Mapping:
    name: str
    file: str
    patterns: tuple[re.Pattern[str], ...]
    url_parsers: tuple[Chain, ...]
    fields: tuple[Field, ...]

    def matches(self, url: str) -> bool:
        return any(p.search(url) for p in self.patterns)

    def extract(self, page: Page) -> dict[str, Any]:
        """Each field's value: its chain's first result, or None."""
        out: dict[str, Any] = {}
        for f in self.fields:
            values = f.chain.run(page)
            out[f.name] = values[0] if values else None
        return out

    def links(self, page: Page) -> list[str]:
        """Raw link values from the url_parsers (the caller resolves them)."""
        found: list[str] = []
        for parser in self.url_parsers:
            found.extend(str(v) for v in parser.run(page) if isinstance(v, str))
        return found


def _chain(file: str, where: str, processors: Any) -> Chain:
    if not isinstance(processors, list) or not processors:
        raise RuleError(file, f"{where}.processors", "must be a non-empty list")
    steps = []
    for i, definition in enumerate(processors):
        try:
            steps.append(compile_processor(definition))
        except ProcessorError as exc:
            loc = f"{where}.processors[{i}]" + (f".{exc.location}" if exc.location else "")
            raise RuleError(file, loc, exc.reason) from exc
    return Chain(tuple(steps))


def compile_mapping(file: str, data: Any) -> Mapping:
    if not isinstance(data, dict):
        raise RuleError(file, "", "a mapping must be a JSON object")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RuleError(file, "name", "must be a non-empty string")
    unknown = set(data) - {"name", "description", "url_patterns", "url_parsers", "fields"}
    if unknown:
        raise RuleError(file, sorted(unknown)[0], "unknown key")

    raw_patterns = data.get("url_patterns")
    if not isinstance(raw_patterns, list) or not raw_patterns:
        raise RuleError(file, "url_patterns", "must be a non-empty list")
    patterns = []
    for i, pat in enumerate(raw_patterns):
        where = f"url_patterns[{i}]"
        if not isinstance(pat, dict) or pat.get("type") != "regex":
            raise RuleError(file, f"{where}.type", "must be 'regex'")
        if not isinstance(pat.get("pattern"), str):
            raise RuleError(file, f"{where}.pattern", "must be a string")
        try:
            patterns.append(re.compile(pat["pattern"]))
        except re.error as exc:
            raise RuleError(file, f"{where}.pattern", f"invalid regex: {exc}") from exc

    raw_parsers = data.get("url_parsers", [])
    if not isinstance(raw_parsers, list):
        raise RuleError(file, "url_parsers", "must be a list")
    parsers = []
    for i, parser in enumerate(raw_parsers):
        if not isinstance(parser, dict):
            raise RuleError(file, f"url_parsers[{i}]", "must be an object")
        parsers.append(_chain(file, f"url_parsers[{i}]", parser.get("processors")))

    raw_fields = data.get("fields", [])
    if not isinstance(raw_fields, list):
        raise RuleError(file, "fields", "must be a list")
    fields = []
    seen: set[str] = set()
    for i, fdef in enumerate(raw_fields):
        where = f"fields[{i}]"
        if not isinstance(fdef, dict):
            raise RuleError(file, where, "must be an object")
        fname = fdef.get("name")
        if not isinstance(fname, str) or not fname:
            raise RuleError(file, f"{where}.name", "must be a non-empty string")
        if fname in seen:
            raise RuleError(file, f"{where}.name", f"duplicate field name {fname!r}")
        seen.add(fname)
        fields.append(Field(fname, _chain(file, where, fdef.get("processors"))))
    return Mapping(name.strip(), file, tuple(patterns), tuple(parsers), tuple(fields))


def first_match(mappings: Sequence[Mapping], url: str) -> Mapping | None:
    for m in mappings:
        if m.matches(url):
            return m
    return None
