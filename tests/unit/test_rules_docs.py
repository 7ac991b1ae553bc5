"""docs/rules.md stays true: its JSON parses, its mappings pass the schema and compile, its examples give what it says.

The doc's conventions, which these tests rely on:

* a ```json block that is an object with "name" and "url_patterns" is a full
  mapping: it must pass the schema and compile;
* each processor has a ``### `type` `` section under ``## Processors`` with
  exactly three fenced blocks: the page (```html, or ```json for a JSON
  body), the chain (```json, a list of processors), and the values the chain
  gives on that page (```json, a list), the page being served from EXAMPLE_URL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crawlstack.extract.rules_tester import run_rules
from crawlstack.rules import Page, RuleSet
from crawlstack.rules.mapping import compile_mapping
from crawlstack.rules.schema import load_schema, schema_errors

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rules.md"
EXAMPLE_URL = "https://books.example/catalogue/emma.html"
CATALOGUE: list[str] = load_schema()["$defs"]["processor"]["properties"]["type"]["enum"]


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int
    chapter: str  # the "## " heading it is under, e.g. "## Processors"
    section: str  # the nearest heading above it, e.g. "## Checking rules" or "### `css`"

    @property
    def id(self) -> str:
        return f"rules.md:{self.line}"


def blocks(text: str) -> Iterator[Block]:
    chapter, section, fence, start = "", "", None, 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if line.startswith("#"):
                section = line.strip()
                chapter = section if section.startswith("## ") else chapter
            elif line.startswith("```"):
                fence, start, body = line[3:].strip(), number, []
        elif line.startswith("```"):
            yield Block(fence, "\n".join(body), start, chapter, section)
            fence = None
        else:
            body.append(line)
    assert fence is None, f"rules.md:{start}: unclosed code block"


BLOCKS = list(blocks(DOC.read_text(encoding="utf-8")))
JSON_BLOCKS = [b for b in BLOCKS if b.lang == "json"]


def is_full_mapping(data: Any) -> bool:
    return isinstance(data, dict) and "name" in data and "url_patterns" in data


def one_field(chain: list[Any]) -> dict[str, Any]:
    return {
        "name": "example",
        "url_patterns": [{"type": "regex", "pattern": "."}],
        "fields": [{"name": "values", "multiple": True, "processors": chain}],
    }


MAPPINGS: list[tuple[Block, dict[str, Any]]] = [
    (b, json.loads(b.text)) for b in JSON_BLOCKS if is_full_mapping(json.loads(b.text))
]
# Full mappings, each marked to be compiled once the engine has their processors.
FULL_MAPPINGS = [pytest.param(data, id=b.id) for b, data in MAPPINGS]


@dataclass(frozen=True)
class Example:
    kind: str
    page: Block
    chain: list[Any]
    values: list[Any]


def processor_examples() -> list[Example]:
    sections: dict[str, list[Block]] = {}
    for block in BLOCKS:
        heading = re.fullmatch(r"### `(\w+)`", block.section)
        if block.chapter == "## Processors" and heading:
            sections.setdefault(heading.group(1), []).append(block)
    examples = []
    for kind, found in sections.items():
        assert (
            len(found) == 3 and [b.lang for b in found[1:]] == ["json", "json"] and found[0].lang in ("html", "json")
        ), f"### `{kind}`: expected a page (html or json), a chain (json) and its values (json)"
        examples.append(Example(kind, found[0], json.loads(found[1].text), json.loads(found[2].text)))
    return examples


EXAMPLES = processor_examples()


def test_the_doc_has_examples() -> None:
    assert len(FULL_MAPPINGS) >= 3
    assert EXAMPLE_URL in DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=[b.id for b in JSON_BLOCKS])
def test_every_json_block_parses(block: Block) -> None:
    json.loads(block.text)


@pytest.mark.parametrize("data", [data for _, data in MAPPINGS], ids=[b.id for b, _ in MAPPINGS])
def test_full_mappings_pass_the_schema(data: Any) -> None:
    assert [str(e) for e in schema_errors("rules.md", data)] == []


@pytest.mark.parametrize("data", FULL_MAPPINGS)
def test_full_mappings_compile(data: Any) -> None:
    assert compile_mapping("rules.md", data).name == data["name"]


def test_every_processor_has_one_example_in_catalogue_order() -> None:
    assert [e.kind for e in EXAMPLES] == CATALOGUE


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.kind for e in EXAMPLES])
def test_example_chain_passes_the_schema(example: Example) -> None:
    assert isinstance(example.chain, list) and example.chain
    assert example.kind in [p.get("type") for p in example.chain]
    assert isinstance(example.values, list)
    assert [str(e) for e in schema_errors(example.page.id, one_field(example.chain))] == []


@pytest.mark.parametrize("example", [pytest.param(e, id=e.kind) for e in EXAMPLES])
def test_example_gives_what_the_doc_says(example: Example) -> None:
    content_type = "application/json" if example.page.lang == "json" else "text/html; charset=utf-8"
    page = Page(EXAMPLE_URL, example.page.text.encode("utf-8"), content_type)
    got = compile_mapping("rules.md", one_field(example.chain)).extract(page)["values"]
    # A multiple field holds every value, or null when there are none.
    assert got == (example.values or None)


def test_rules_test_example_prints_what_the_doc_says() -> None:
    section = [b for b in BLOCKS if b.chapter == "## Trying rules on a page"]
    (page,) = [b for b in section if b.lang == "html"]
    (printed,) = [json.loads(b.text) for b in section if b.lang == "json"]
    book = next(data for _, data in MAPPINGS if data["name"] == "book")
    rules = RuleSet((compile_mapping("book.json", book),))
    result = run_rules(rules, printed["url"], page.text.encode("utf-8"), printed["content_type"])
    assert result == {k: printed[k] for k in ("mapping", "fields", "links")}
