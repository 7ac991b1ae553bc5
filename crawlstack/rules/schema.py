"""Check a rules file against the JSON Schema (schema.json) and say what is wrong in one line each.

The schema is what editors check a rules file with (point ``$schema`` at it);
``schema_errors`` gives the same verdict as ``RuleError``s located the way the
compiler locates them (``fields[0].processors[1].parameters.expression``), in
plain words instead of jsonschema's messages.

The schema checks shapes; the compiler (``compile_mapping``) still checks what
a schema cannot: that regexes, XPath and the other expressions compile.
jsonschema is imported on first use only: it costs ~110 ms to import and the
Lambdas, which load rules the build already checked, do not ship it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from crawlstack.rules.mapping import RuleError

SCHEMA_PATH = Path(__file__).with_name("schema.json")

JsonPath = tuple[Any, ...]

# How a type is named in "must be ..."; in a list of several, booleans are "a boolean".
_TYPE_NAMES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}
_PLAIN_KEY = re.compile(r"[A-Za-z_$][\w$-]*\Z", re.ASCII)
_MAX_SHOWN = 60


@cache
def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema())


def location(path: Sequence[Any]) -> str:
    """``("fields", 0, "name")`` -> ``fields[0].name``; odd keys are quoted: ``fields[0]["a b"]``."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{_show(part)}]"
    return out


def _show(value: Any) -> str:
    """A short one-line rendering of a user's value: strings quoted as the compiler quotes them."""
    if isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError, RecursionError):
            text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _one_of(values: Sequence[Any]) -> str:
    shown = [_show(v) for v in values]
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " or " + shown[-1]


def _type_reason(path: JsonPath, expected: Any) -> str:
    if not path:
        return "a mapping must be a JSON object"
    if _is_processor(path):
        return "a processor must be an object with 'type' and 'parameters'"
    names = expected if isinstance(expected, list) else [expected]
    if names == ["boolean"]:
        return "must be true or false"
    words = [_TYPE_NAMES.get(n, str(n)) for n in names]
    return "must be " + (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1])


def _at(data: Any, path: JsonPath) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _is_processor(path: JsonPath) -> bool:
    """Whether ``path`` is a processor: ``...processors[i]``."""
    return len(path) >= 2 and path[-2] == "processors" and isinstance(path[-1], int)


def _processor_parameters(path: JsonPath) -> bool:
    """Whether ``path`` is a processor's ``parameters``: ``...processors[i].parameters``."""
    return len(path) >= 3 and path[-1] == "parameters" and _is_processor(path[:-1])


def _reasons(error: Any, data: Any) -> Iterator[tuple[JsonPath, str]]:
    """(path, reason) pairs for one jsonschema error."""
    path: JsonPath = tuple(error.absolute_path)
    kind, expected, instance, schema = error.validator, error.validator_value, error.instance, error.schema
    if kind == "required":
        present = instance if isinstance(instance, dict) else {}
        for name in expected:
            if name in present:
                continue
            needed = schema.get("properties", {}).get("parameters", {}).get("required", [])
            if name == "parameters" and needed:
                # Say which parameters are missing, where the compiler would.
                for parameter in needed:
                    yield (*path, "parameters", parameter), "required"
            else:
                yield (*path, name), "required"
    elif kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        for key in instance if isinstance(instance, dict) else ():
            if key in allowed:
                continue
            # Worded as the compiler words them, so a message reads the same from either.
            if _processor_parameters(path):
                processor = _at(data, path[:-1])
                kind_name = processor.get("type") if isinstance(processor, dict) else "this processor"
                yield (*path, key), f"unknown parameter for {kind_name} (accepted: {', '.join(allowed) or 'none'})"
            elif _is_processor(path):
                yield (*path, key), "unknown key (a processor has 'type' and 'parameters')"
            else:
                yield (*path, key), f"unknown key (allowed: {', '.join(allowed)})"
    elif kind == "enum":
        if len(path) >= 3 and path[-1] == "type" and path[-3] == "processors":
            yield path, f"unknown processor type {_show(instance)} (known: {', '.join(sorted(expected))})"
        else:
            yield path, f"must be {_one_of(expected)}"
    elif kind == "const":
        yield path, f"must be {_show(expected)}"
    elif kind == "type":
        yield path, _type_reason(path, expected)
    elif kind == "minItems":
        yield path, "must be a non-empty list" if expected == 1 else f"must have at least {expected} items"
    elif kind == "minLength":
        yield path, "must not be empty" if expected == 1 else f"must be at least {expected} characters long"
    elif kind == "minimum":
        yield path, f"must be {expected} or more"
    elif kind == "pattern":
        # patternErrorMessage is the VS Code schema extension: editors show the same words.
        yield path, schema.get("patternErrorMessage") or f"must match the regular expression {expected}"
    else:
        # A keyword the schema does not use today: jsonschema's words, on one line.
        yield path, " ".join(str(error.message).split())[:200]


def _duplicate_fields(data: Any) -> Iterator[tuple[JsonPath, str]]:
    """Field names must be unique within a mapping: a schema cannot say that."""
    fields = data.get("fields") if isinstance(data, dict) else None
    if not isinstance(fields, list):
        return
    seen: set[str] = set()
    for i, field in enumerate(fields):
        name = field.get("name") if isinstance(field, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            yield ("fields", i, "name"), f"duplicate field name {name!r}"
        seen.add(name)


def _sort_key(item: tuple[JsonPath, str]) -> tuple[Any, ...]:
    path, reason = item
    # Document order: list indexes numerically (fields[2] before fields[10]).
    parts = tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in path)
    return (parts, reason)


def schema_errors(file_label: str, data: Any) -> list[RuleError]:
    """Every way ``data`` (one rules file's parsed JSON) breaks the schema, one ``RuleError`` each.

    Empty when the file is valid.  Deduplicated and sorted by location.
    """
    found: set[tuple[JsonPath, str]] = set()
    try:
        for error in _validator().iter_errors(data):
            found.update(_reasons(error, data))
    except RecursionError:
        # Only absurdly nested values get here: jsonschema repr()s them in its messages.
        return [RuleError(file_label, "", "nested too deeply to check")]
    found.update(_duplicate_fields(data))
    return [RuleError(file_label, location(path), reason) for path, reason in sorted(found, key=_sort_key)]
