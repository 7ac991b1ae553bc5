"""The rules JSON Schema: shipped rules pass, invalid rules get one-line located errors, schema and compiler agree."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstack.rules import RuleError, RulesInvalid, load_rules
from crawlstack.rules.processors import PROCESSORS
from crawlstack.rules.schema import load_schema, location, schema_errors

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*(ROOT / "rules").glob("*.json"), *(ROOT / "crawlstack" / "demo" / "rules").glob("*.json")])
CATALOGUE: list[str] = load_schema()["$defs"]["processor"]["properties"]["type"]["enum"]


def xpath(expression: str) -> dict[str, Any]:
    return {"type": "xpath", "parameters": {"expression": expression}}


def mapping(**overrides: Any) -> dict[str, Any]:
    """A valid mapping; each keyword replaces one top-level key (None removes it)."""
    data: dict[str, Any] = {
        "name": "book",
        "url_patterns": [{"type": "regex", "pattern": r"^https?://books\.example/books/[\w-]+\.html$"}],
        "url_parsers": [{"description": "author", "processors": [xpath("//a[@class='author']/@href")]}],
        "fields": [{"name": "title", "processors": [xpath("//h1/text()"), {"type": "trim"}]}],
    }
    for key, value in overrides.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def chain(*processors: Any) -> dict[str, Any]:
    """A valid mapping whose one field runs ``processors``."""
    return mapping(fields=[{"name": "f", "processors": list(processors)}])


def proc(kind: Any, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


P0 = "fields[0].processors[0]"

# (document, location, a fragment of the reason)
INVALID: list[tuple[Any, str, str]] = [
    # the mapping
    ([1, 2], "", "a mapping must be a JSON object"),
    ("book", "", "a mapping must be a JSON object"),
    (mapping(name=None), "name", "required"),
    (mapping(name=""), "name", "must not be blank"),
    (mapping(name="   "), "name", "must not be blank"),
    (mapping(name=5), "name", "must be a string"),
    (
        mapping(extra=1),
        "extra",
        "unknown key (allowed: $schema, content_types, description, fields, items, name, url_parsers",
    ),
    (mapping(**{"$schema": 1}), "$schema", "must be a string"),
    (mapping(description=["x"]), "description", "must be a string"),
    # url_patterns
    (mapping(url_patterns=None), "url_patterns", "required"),
    (mapping(url_patterns=[]), "url_patterns", "must be a non-empty list"),
    (mapping(url_patterns={"type": "regex", "pattern": "x"}), "url_patterns", "must be a list"),
    (mapping(url_patterns=["^https://"]), "url_patterns[0]", "must be an object"),
    (mapping(url_patterns=[{"type": "glob", "pattern": "*"}]), "url_patterns[0].type", "must be 'regex' or 'domain'"),
    (mapping(url_patterns=[{"pattern": "x"}]), "url_patterns[0].type", "required"),
    (mapping(url_patterns=[{"type": "regex"}]), "url_patterns[0].pattern", "required"),
    (mapping(url_patterns=[{"type": "regex", "pattern": ""}]), "url_patterns[0].pattern", "must not be empty"),
    (mapping(url_patterns=[{"type": "regex", "pattern": 5}]), "url_patterns[0].pattern", "must be a string"),
    (
        mapping(url_patterns=[{"type": "regex", "pattern": "x", "flags": "i"}]),
        "url_patterns[0].flags",
        "unknown key (allowed: pattern, type)",
    ),
    (
        mapping(url_patterns=[{"type": "domain", "pattern": "https://example.com/"}]),
        "url_patterns[0].pattern",
        "must be a host name like example.com",
    ),
    (
        mapping(url_patterns=[{"type": "domain", "pattern": "example.com:8080"}]),
        "url_patterns[0].pattern",
        "must be a host name like example.com",
    ),
    (
        mapping(url_patterns=[{"type": "domain", "pattern": "*.example.com"}]),
        "url_patterns[0].pattern",
        "must be a host name like example.com",
    ),
    # content_types
    (mapping(content_types=[]), "content_types", "must be a non-empty list"),
    (mapping(content_types="text/html"), "content_types", "must be a list"),
    (mapping(content_types=["html"]), "content_types[0]", "must be a media type like text/html or text/*"),
    (mapping(content_types=["text/html; charset=utf-8"]), "content_types[0]", "must be a media type"),
    (mapping(content_types=[5]), "content_types[0]", "must be a string"),
    # url_parsers
    (mapping(url_parsers={}), "url_parsers", "must be a list"),
    (mapping(url_parsers=["//a/@href"]), "url_parsers[0]", "must be an object"),
    (mapping(url_parsers=[{}]), "url_parsers[0].processors", "required"),
    (mapping(url_parsers=[{"processors": []}]), "url_parsers[0].processors", "must be a non-empty list"),
    (
        mapping(url_parsers=[{"name": "x", "processors": [xpath("//a/@href")]}]),
        "url_parsers[0].name",
        "unknown key (allowed: description, processors)",
    ),
    (
        mapping(url_parsers=[{"processors": [{"type": "xpath", "parameters": {}}]}]),
        "url_parsers[0].processors[0].parameters.expression",
        "required",
    ),
    # fields
    (mapping(fields={}), "fields", "must be a list"),
    (mapping(fields=[1]), "fields[0]", "must be an object"),
    (mapping(fields=[{"processors": [xpath("//h1")]}]), "fields[0].name", "required"),
    (mapping(fields=[{"name": "", "processors": [xpath("//h1")]}]), "fields[0].name", "must not be blank"),
    (mapping(fields=[{"name": 1, "processors": [xpath("//h1")]}]), "fields[0].name", "must be a string"),
    (
        mapping(fields=[{"name": "a", "processors": [xpath("//h1")]}, {"name": "a", "processors": [xpath("//h2")]}]),
        "fields[1].name",
        "duplicate field name 'a'",
    ),
    (mapping(fields=[{"name": "a"}]), "fields[0].processors", "required"),
    (mapping(fields=[{"name": "a", "processors": []}]), "fields[0].processors", "must be a non-empty list"),
    (mapping(fields=[{"name": "a", "processors": xpath("//h1")}]), "fields[0].processors", "must be a list"),
    (
        mapping(fields=[{"name": "a", "multiple": "yes", "processors": [xpath("//h1")]}]),
        "fields[0].multiple",
        "must be true or false",
    ),
    (
        mapping(fields=[{"name": "a", "description": 5, "processors": [xpath("//h1")]}]),
        "fields[0].description",
        "must be a string",
    ),
    (
        mapping(fields=[{"name": "a", "required": True, "processors": [xpath("//h1")]}]),
        "fields[0].required",
        "unknown key (allowed: description, multiple, name, processors)",
    ),
    # processors, whatever their type
    (chain("//h1"), P0, "a processor must be an object with 'type' and 'parameters'"),
    (chain({"parameters": {"expression": "//h1"}}), f"{P0}.type", "required"),
    (chain(proc("nope")), f"{P0}.type", "unknown processor type 'nope' (known: absolute_url, css, default, first,"),
    (chain(proc("XPath", expression="//h1")), f"{P0}.type", "unknown processor type 'XPath'"),
    (chain(proc(5)), f"{P0}.type", "unknown processor type 5"),
    (
        chain(xpath("//p/text()"), {"type": "trim", "params": {}}),
        "fields[0].processors[1].params",
        "unknown key (a processor has 'type' and 'parameters')",
    ),
    (chain({"type": "xpath", "parameters": ["//h1"]}), f"{P0}.parameters", "must be an object"),
    (chain({"type": "trim", "parameters": "x"}), f"{P0}.parameters", "must be an object"),
    # the catalogue's parameters
    (chain({"type": "xpath"}), f"{P0}.parameters.expression", "required"),
    (chain(proc("xpath")), f"{P0}.parameters.expression", "required"),
    (chain(proc("xpath", expression="")), f"{P0}.parameters.expression", "must not be empty"),
    (chain(proc("xpath", expression=5)), f"{P0}.parameters.expression", "must be a string"),
    (
        chain(proc("xpath", expression="//h1", flags="i")),
        f"{P0}.parameters.flags",
        "unknown parameter for xpath (accepted: expression)",
    ),
    (chain(proc("css")), f"{P0}.parameters.selector", "required"),
    (chain(proc("css", selector="a", attribute=5)), f"{P0}.parameters.attribute", "must be a string"),
    (chain(proc("css", selector="a", attribute="")), f"{P0}.parameters.attribute", "must not be empty"),
    (
        chain(proc("css", selector="a", attr="href")),
        f"{P0}.parameters.attr",
        "unknown parameter for css (accepted: attribute, selector)",
    ),
    (chain({"type": "jsonpath"}), f"{P0}.parameters.expression", "required"),
    (chain(proc("jsonpath", expression="")), f"{P0}.parameters.expression", "must not be empty"),
    (chain(xpath("//p/text()"), proc("regex")), "fields[0].processors[1].parameters.pattern", "required"),
    (
        chain(xpath("//p/text()"), proc("regex", pattern="(a)", group=-1)),
        "fields[0].processors[1].parameters.group",
        "must be 0 or more",
    ),
    (
        chain(xpath("//p/text()"), proc("regex", pattern="(a)", group=True)),
        "fields[0].processors[1].parameters.group",
        "must be an integer or a string",
    ),
    (
        chain(xpath("//p/text()"), proc("regex", pattern="(a)", group=1.5)),
        "fields[0].processors[1].parameters.group",
        "must be an integer or a string",
    ),
    (
        chain(xpath("//p/text()"), proc("replace", find="a")),
        "fields[0].processors[1].parameters.replace",
        "required",
    ),
    (
        chain(xpath("//p/text()"), proc("replace", find="", replace="b")),
        "fields[0].processors[1].parameters.find",
        "must not be empty",
    ),
    (
        chain(xpath("//p/text()"), proc("replace", find="a", replace="b", regex="yes")),
        "fields[0].processors[1].parameters.regex",
        "must be true or false",
    ),
    *[
        (
            chain(xpath("//p/text()"), proc(kind, x=1)),
            "fields[0].processors[1].parameters.x",
            f"unknown parameter for {kind} (accepted: none)",
        )
        for kind in ("trim", "normalize_space", "lower", "upper", "first", "absolute_url", "to_number")
    ],
    (chain(xpath("//p/text()"), proc("split")), "fields[0].processors[1].parameters.separator", "required"),
    (
        chain(xpath("//p/text()"), proc("split", separator="")),
        "fields[0].processors[1].parameters.separator",
        "must not be empty",
    ),
    (chain(xpath("//p/text()"), proc("join")), "fields[0].processors[1].parameters.separator", "required"),
    (
        chain(xpath("//p/text()"), proc("join", separator=1)),
        "fields[0].processors[1].parameters.separator",
        "must be a string",
    ),
    (
        chain(xpath("//p/text()"), proc("parse_date", format=5)),
        "fields[0].processors[1].parameters.format",
        "must be a string",
    ),
    (
        chain(xpath("//p/text()"), proc("parse_date", format="")),
        "fields[0].processors[1].parameters.format",
        "must not be empty",
    ),
    (chain(xpath("//p/text()"), proc("default")), "fields[0].processors[1].parameters.value", "required"),
    (
        chain(xpath("//p/text()"), proc("default", value=[1])),
        "fields[0].processors[1].parameters.value",
        "must be a string, a number or a boolean",
    ),
    (
        chain(xpath("//p/text()"), proc("default", value=None)),
        "fields[0].processors[1].parameters.value",
        "must be a string, a number or a boolean",
    ),
]

# Valid documents that use every corner the schema allows: schema and compiler must both accept them.
VALID: list[Any] = [
    mapping(),
    mapping(**{"$schema": "../crawlstack/rules/schema.json", "description": "books"}),
    mapping(url_patterns=[{"type": "domain", "pattern": "example.com"}, {"type": "regex", "pattern": "x"}]),
    mapping(url_patterns=[{"type": "domain", "pattern": "Sub_1.b\u00fccher.example."}]),
    mapping(url_patterns=[{"type": "domain", "pattern": "127.0.0.2"}]),
    mapping(content_types=["text/html", "application/json", "text/*", "application/vnd.api+json"]),
    mapping(url_parsers=[], fields=[]),
    mapping(url_parsers=None, fields=None),
    mapping(fields=[{"name": "tags", "description": "all of them", "multiple": True, "processors": [xpath("//li")]}]),
    chain(xpath("//h1"), {"type": "trim"}, {"type": "normalize_space", "parameters": {}}, {"type": "lower"}),
    chain(xpath("//h1"), {"type": "upper"}, {"type": "first"}, {"type": "absolute_url"}, {"type": "to_number"}),
    chain(proc("css", selector="ul.tags li")),
    chain(proc("css", selector="a", attribute="href")),
    chain(proc("jsonpath", expression="$.posts[*].blog.name")),
    chain(xpath("//p/text()"), proc("regex", pattern=r"(\d+)-(\d+)", group=2)),
    chain(xpath("//p/text()"), proc("regex", pattern=r"(?P<year>\d{4})", group="year")),
    chain(xpath("//p/text()"), proc("regex", pattern=r"\d+", group=0)),
    chain(xpath("//p/text()"), proc("replace", find=",", replace="")),
    chain(xpath("//p/text()"), proc("replace", find=r"\s+", replace=" ", regex=True)),
    chain(xpath("//li/text()"), proc("split", separator=", "), proc("join", separator="")),
    chain(xpath("//time/text()"), proc("parse_date", format="%d %B %Y"), proc("parse_date")),
    chain(xpath("//b/text()"), proc("default", value=0)),
    chain(xpath("//b/text()"), proc("default", value=False)),
    chain(xpath("//b/text()"), proc("default", value="n/a")),
    chain(xpath("//b/text()"), proc("default", value=1.5)),
]


def _ids(cases: list[tuple[Any, str, str]]) -> list[str]:
    return [f"{loc or 'root'}:{reason[:30]}" for _, loc, reason in cases]


def write(directory: Path, data: Any, name: str = "m.json") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# --- the schema itself ----------------------------------------------------------
def test_schema_is_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def _subschemas(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            if key not in ("enum", "required", "const", "enumDescriptions"):
                yield from _subschemas(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _subschemas(item, f"{where}/{i}")


def test_everything_an_editor_shows_has_a_title_and_description() -> None:
    # Every schema that declares a value (a type or a list of choices), and every named definition.
    shown = [
        node
        for where, node in _subschemas(load_schema())
        if isinstance(node.get("type"), str | list) or "enum" in node or re.fullmatch(r"/\$defs/\w+", where)
    ]
    assert len(shown) > 50
    assert [n for n in shown if not n.get("title") or not n.get("description")] == []


def test_schema_catalogue_covers_the_engine() -> None:
    # A processor the engine has but the schema lacks would make valid rules fail `make synth`.
    assert set(PROCESSORS) <= set(CATALOGUE)
    assert len(CATALOGUE) == len(set(CATALOGUE))


def test_schema_parameters_are_the_engines() -> None:
    from crawlstack.rules.processors import PARAMETERS as accepted

    defs = load_schema()["$defs"]
    for kind in PROCESSORS:
        in_schema = set(defs[f"processor_{kind}"]["properties"]["parameters"]["properties"])
        assert in_schema == set(accepted.get(kind, ())), kind


# --- shipped rules --------------------------------------------------------------
@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_shipped_rules_pass_the_schema(path: Path) -> None:
    assert schema_errors(str(path), json.loads(path.read_text(encoding="utf-8"))) == []


def test_there_are_shipped_rules() -> None:
    assert len(SHIPPED) >= 5


# --- invalid documents ------------------------------------------------------------
@pytest.mark.parametrize(("data", "where", "reason"), INVALID, ids=_ids(INVALID))
def test_invalid_document_gets_one_located_error(data: Any, where: str, reason: str) -> None:
    errors = schema_errors("bad.json", data)
    assert [(e.location, reason in e.reason) for e in errors] == [(where, True)], [str(e) for e in errors]
    (error,) = errors
    assert error.file == "bad.json"
    assert str(error) == (f"bad.json: {where}: {error.reason}" if where else f"bad.json: {error.reason}")
    assert "\n" not in str(error)
    for jargon in ("is not valid under", "is a required property", "Additional properties", "does not match"):
        assert jargon not in error.reason


@pytest.mark.parametrize("data", VALID)
def test_valid_document_passes(data: Any) -> None:
    assert schema_errors("ok.json", data) == []


def test_every_error_in_a_file_is_reported_sorted_and_once() -> None:
    data = mapping(
        name="",
        extra=1,
        url_patterns=[{"type": "glob", "pattern": "x"}],
        fields=[{"name": f"f{i}", "processors": [{"type": "xpath", "parameters": []}]} for i in range(11)],
    )
    data["fields"][10]["processors"] = [{"type": "css"}]
    data["fields"][10]["name"] = "f2"
    # parameters: [] breaks both "a processor's parameters are an object" and
    # xpath's: said once.  Document order: fields[2] before fields[10].
    assert [str(e) for e in schema_errors("f.json", data)] == [
        "f.json: extra: unknown key (allowed: $schema, content_types, description, fields, items, name, url_parsers, "
        "url_patterns)",
        *[f"f.json: fields[{i}].processors[0].parameters: must be an object" for i in range(10)],
        "f.json: fields[10].name: duplicate field name 'f2'",
        "f.json: fields[10].processors[0].parameters.selector: required",
        "f.json: name: must not be blank",
        "f.json: url_patterns[0].type: must be 'regex' or 'domain'",
    ]


def test_missing_parameters_name_the_required_ones() -> None:
    errors = schema_errors("f.json", chain(xpath("//p"), {"type": "replace"}))
    assert [str(e) for e in errors] == [
        "f.json: fields[0].processors[1].parameters.find: required",
        "f.json: fields[0].processors[1].parameters.replace: required",
    ]


def test_odd_keys_are_quoted_in_locations() -> None:
    assert location(("fields", 0, "processors", 1, "parameters", "expression")) == (
        "fields[0].processors[1].parameters.expression"
    )
    assert location(()) == ""
    (error,) = schema_errors("f.json", mapping(**{"odd key": 1}))
    assert error.location == "['odd key']"


# --- schema and compiler agree ----------------------------------------------------
@pytest.mark.parametrize(("data", "where", "reason"), INVALID, ids=_ids(INVALID))
def test_the_compiler_rejects_what_the_schema_rejects(tmp_path: Path, data: Any, where: str, reason: str) -> None:
    with pytest.raises(RulesInvalid):
        load_rules(write(tmp_path, data), check_schema=False)


@pytest.mark.parametrize("data", VALID)
def test_the_compiler_accepts_what_the_schema_accepts(tmp_path: Path, data: Any) -> None:
    assert len(load_rules(write(tmp_path, data), check_schema=False)) == 1


# --- load_rules(check_schema=True) ----------------------------------------------
def test_schema_and_compiler_errors_are_reported_together_once_each(tmp_path: Path) -> None:
    # An unknown key (both see it: the schema's message wins), an invalid
    # regex (the compiler only) and a missing parameter (both again).
    data = mapping(
        extra=1,
        url_patterns=[{"type": "regex", "pattern": "("}],
        fields=[{"name": "a", "processors": [{"type": "xpath", "parameters": {}}]}],
    )
    with pytest.raises(RulesInvalid) as info:
        load_rules(write(tmp_path, data, "a.json"), check_schema=True)
    got = [(e.location, e.reason.split(" (")[0].split(":")[0]) for e in info.value.errors]
    assert sorted(got) == [
        ("extra", "unknown key"),
        ("fields[0].processors[0].parameters.expression", "required"),
        ("url_patterns[0].pattern", "invalid regex"),
    ]


def test_schema_valid_files_still_compile(tmp_path: Path) -> None:
    write(tmp_path, mapping(name="a", url_patterns=[{"type": "regex", "pattern": "("}]), "a.json")
    write(tmp_path, mapping(name="b", fields=[{"name": 1, "processors": [xpath("//h1")]}]), "b.json")
    write(tmp_path, "{oops", "c.json")
    write(tmp_path, mapping(name="d"), "d.json")
    write(tmp_path, mapping(name="d"), "e.json")
    with pytest.raises(RulesInvalid) as info:
        load_rules(tmp_path, check_schema=True)
    got = [(Path(e.file).name, e.location, e.reason) for e in info.value.errors]
    assert got[0][:2] == ("a.json", "url_patterns[0].pattern") and "invalid regex" in got[0][2]
    assert got[1] == ("b.json", "fields[0].name", "must be a string")
    assert got[2][:2] == ("c.json", "line 1 column 2")
    assert got[3] == ("e.json", "name", f"mapping name 'd' already used in {tmp_path / 'd.json'}")
    assert len(got) == 4


def test_check_schema_accepts_the_shipped_rules() -> None:
    assert len(load_rules(ROOT / "rules", check_schema=True)) == len(list((ROOT / "rules").glob("*.json")))


def test_loading_without_the_schema_check_never_imports_jsonschema() -> None:
    # The Lambdas do not ship jsonschema (a 110 ms import) and never check the schema.
    code = (
        "import sys; from crawlstack.rules import load_rules; load_rules('rules');"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# --- junk never raises ------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "name",
        "description",
        "url_patterns",
        "content_types",
        "url_parsers",
        "fields",
        "processors",
        "type",
        "parameters",
        "pattern",
        "multiple",
        "expression",
        "selector",
        "group",
        "value",
        "$schema",
        "x",
    ]
)
TYPES = st.sampled_from([*CATALOGUE, "nope"])
SHAPED = st.recursive(
    JSON | TYPES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(KEYS, inner, max_size=5)
        | st.builds(lambda t, p: {"type": t, "parameters": p}, TYPES, inner)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPED)
def test_junk_never_raises(data: Any) -> None:
    for error in schema_errors("junk.json", data):
        assert isinstance(error, RuleError)
        assert "\n" not in str(error)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_junk_inside_a_valid_mapping_never_raises(data: st.DataObject) -> None:
    doc = mapping()
    doc["fields"][0]["processors"].append(data.draw(SHAPED))
    doc[data.draw(KEYS)] = data.draw(SHAPED)
    for error in schema_errors("junk.json", doc):
        assert "\n" not in str(error)


@pytest.mark.parametrize(
    "data",
    [
        None,
        0,
        1.5,
        float("nan"),
        "",
        [],
        {},
        [[[[[]]]]],
        {1: 2, None: 3},
        {"fields": [{"name": ["a"], "processors": [[{"type": "xpath"}]]}]},
        {"fields": [{"name": "a", "processors": [{"type": "xpath", "parameters": {"expression": object()}}]}]},
        {"name": "x" * 10_000, "url_patterns": [{"type": "domain", "pattern": "\n" * 100}]},
        {"fields": "x", "url_parsers": 3, "content_types": {"a": 1}},
        {"fields": [{"name": "a", "processors": [{"type": ["xpath"], "parameters": {"\n": 1}}]}]},
        {"name": "a", "url_patterns": [{"type": "regex", "pattern": "x"}], "fields": [{"name": b"a"}]},
        {"type": "xpath", "parameters": {1: 2}},
    ],
)
def test_python_junk_never_raises(data: Any) -> None:
    errors = schema_errors("junk.json", data)
    assert errors
    assert all("\n" not in str(e) for e in errors)


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    inner = root
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return root


@pytest.mark.parametrize("depth", [50, 5000])
def test_deeply_nested_values_never_raise(depth: int) -> None:
    data = chain({"type": _nested(depth)})
    data["description"] = _nested(depth)
    errors = schema_errors("deep.json", data)
    assert errors
    assert all("\n" not in str(e) and len(str(e)) < 300 for e in errors)


# --- load_rules and `crawlstack rules validate` on any file -------------------------------
def _validate_cli(path: Path) -> tuple[int, list[str]]:
    """``crawlstack rules validate PATH`` in process: its exit code and stderr lines."""
    import contextlib
    import io

    from crawlstack.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["rules", "validate", str(path)])
    return code, err.getvalue().splitlines()


def _never_a_traceback(path: Path) -> None:
    try:
        load_rules(path, check_schema=True)
        loaded = True
    except RulesInvalid as exc:
        assert exc.errors and all("\n" not in str(e) for e in exc.errors)
        loaded = False
    code, lines = _validate_cli(path)
    assert code == (0 if loaded else 2)
    assert all(line.startswith("crawlstack: ") for line in lines), lines
    assert not any("Traceback" in line for line in lines)


def _in_a_file(content: bytes) -> Path:
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="rules-fuzz-"))
    path = directory / "fuzz.json"
    path.write_bytes(content)
    return path


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_any_bytes_as_a_rules_file_never_raise(content: bytes) -> None:
    _never_a_traceback(_in_a_file(content))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_json_as_a_rules_file_never_raises(data: st.DataObject) -> None:
    doc = data.draw(st.one_of(SHAPED, st.builds(lambda: mapping())))
    if isinstance(doc, dict) and data.draw(st.booleans()):
        doc[data.draw(KEYS)] = data.draw(SHAPED)
    text = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    _never_a_traceback(_in_a_file(text))


NESTED = "(" * 5000 + ")" * 5000


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        # Regressions, the first five: ValueError, RecursionError and OverflowError raised out of load_rules.
        ('{"name": 1' + "0" * 5000 + "}", "invalid JSON: Exceeds the limit (4300 digits)"),
        (json.dumps(mapping(url_patterns=[{"type": "regex", "pattern": NESTED}])), "nested too deeply"),
        (json.dumps(mapping(url_patterns=[{"type": "regex", "pattern": "a{4294967296}"}])), "repeat count too big"),
        (json.dumps(chain(xpath("//p"), proc("regex", pattern=NESTED))), "nested too deeply"),
        (json.dumps(chain(xpath("//p"), proc("replace", find="a{99999999999}", replace="", regex=True))), "too big"),
        (json.dumps(chain(xpath("(" * 5000 + "1" + ")" * 5000))), "invalid XPath"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        # Issue 27: a ValueError out of regex.compile, for inline flags that clash with the engine's version 0.
        (json.dumps(mapping(url_patterns=[{"type": "regex", "pattern": "(?V1)a"}])), "invalid regex: VERSION0 and"),
    ],
    ids=[
        "huge-int",
        "deep-url-regex",
        "huge-repeat",
        "deep-regex-processor",
        "huge-replace",
        "deep-xpath",
        "deep",
        "clashing-flags",
    ],
)
def test_pathological_rules_are_one_line_errors(tmp_path: Path, content: str, reason: str) -> None:
    path = write(tmp_path, content)
    code, lines = _validate_cli(path)
    assert code == 2
    assert len(lines) == 1 and reason in lines[0], lines
    assert len(lines[0]) < 400


def test_an_unknown_key_holding_a_line_break_is_quoted_on_its_one_line() -> None:
    # str.splitlines() breaks on \x1e and \u2028 too; the compiler's message once printed such keys raw.
    _never_a_traceback(_in_a_file(b'{"\\u001e": null, "\\u2028x": 1}'))
