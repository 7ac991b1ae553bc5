"""The mapping rules engine: load, validate and apply JSON mapping files.

A rules directory holds one JSON file per mapping (see docs/rules.md)::

    {"name", "url_patterns": [{"type": "regex", "pattern"}],
     "url_parsers": [{"description", "processors": [...]}],
     "fields": [{"name", "processors": [...]}]}

``load_rules(path)`` compiles every file once (regexes and XPath included)
and raises ``RulesInvalid`` listing every problem, one line each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crawlstack.rules.mapping import Mapping, RuleError, compile_mapping_errors, first_match
from crawlstack.rules.page import Page
from crawlstack.rules.schema import schema_errors

__all__ = ["Mapping", "Page", "RuleError", "RuleSet", "RulesInvalid", "load_rules"]


class RulesInvalid(ValueError):
    def __init__(self, errors: list[RuleError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass(frozen=True)
class RuleSet:
    mappings: tuple[Mapping, ...] = ()

    def match(self, url: str, content_type: str | None = None) -> Mapping | None:
        """The first mapping whose url_patterns match ``url`` and that accepts ``content_type`` (if given)."""
        return first_match(self.mappings, url, content_type)

    def __iter__(self) -> Iterator[Mapping]:
        return iter(self.mappings)

    def __len__(self) -> int:
        return len(self.mappings)


def _rule_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.glob("*.json") if p.is_file())


def load_rules(path: str | Path | None, check_schema: bool = False) -> RuleSet:
    """Compile every mapping under ``path`` (a directory or one file); None gives no mappings.

    ``check_schema``: check each file against the JSON Schema first (the CLI
    and the build do; the Lambdas load rules the build already checked).
    """
    if path is None:
        return RuleSet()
    root = Path(path)
    if not root.exists():
        raise RulesInvalid([RuleError(str(root), "", "no such file or directory")])
    errors: list[RuleError] = []
    mappings: list[Mapping] = []
    names: dict[str, str] = {}
    for file in _rule_files(root):
        label = str(file)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            errors.append(RuleError(label, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}"))
            continue
        except RecursionError:
            errors.append(RuleError(label, "", "invalid JSON: nested too deeply"))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(RuleError(label, "", f"cannot read: {exc}"))
            continue
        if check_schema:
            problems = schema_errors(label, data)
            if problems:
                # Not compiled as well: the compiler would report most of them a second time.
                errors.extend(problems)
                continue
        mapping, problems = compile_mapping_errors(label, data)
        if mapping is None:
            errors.extend(problems)
            continue
        if mapping.name in names:
            errors.append(
                RuleError(label, "name", f"mapping name {mapping.name!r} already used in {names[mapping.name]}")
            )
            continue
        names[mapping.name] = label
        mappings.append(mapping)
    if errors:
        raise RulesInvalid(errors)
    return RuleSet(tuple(mappings))
