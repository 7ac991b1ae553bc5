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


def rule_files(path: Path) -> list[Path]:
    """The rule files ``path`` names: itself, or the ``*.json`` files of a directory, sorted."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.glob("*.json") if p.is_file())


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json.loads keeps the last of two equal keys; in a rules file that hides a mistake.
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _overlap(a: str, b: str) -> bool:
    """Whether two locations are the same place, or one is inside the other."""
    if a == b or not a or not b:
        return True
    return b.startswith((a + ".", a + "[")) or a.startswith((b + ".", b + "["))


def _first_per_location(errors: list[RuleError]) -> list[RuleError]:
    seen: set[str] = set()
    out = []
    for error in errors:
        if error.location not in seen:
            seen.add(error.location)
            out.append(error)
    return out


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
    for file in rule_files(root):
        label = str(file)
        try:
            # utf-8-sig: editors on Windows save a BOM, which is harmless here.
            data = json.loads(file.read_text(encoding="utf-8-sig"), object_pairs_hook=_no_duplicate_keys)
        except _DuplicateKey as exc:
            errors.append(RuleError(label, "", f"invalid JSON: key {exc.key!r} appears twice in one object"))
            continue
        except json.JSONDecodeError as exc:
            errors.append(RuleError(label, f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}"))
            continue
        except RecursionError:
            errors.append(RuleError(label, "", "invalid JSON: nested too deeply"))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(RuleError(label, "", f"cannot read: {exc}"))
            continue
        except ValueError as exc:  # a number of more than 4300 digits (Python's int conversion limit)
            errors.append(RuleError(label, "", f"invalid JSON: {str(exc).split(';')[0]}"))
            continue
        shape = _first_per_location(schema_errors(label, data)) if check_schema else []
        mapping, problems = compile_mapping_errors(label, data)
        if shape:
            # The compiler finds what the schema cannot (a regex, an XPath...);
            # where both see a problem, the schema's message is the one shown.
            errors.extend(shape)
            errors.extend(e for e in problems if not any(_overlap(e.location, s.location) for s in shape))
            continue
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
