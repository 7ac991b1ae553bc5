"""The mapping rules engine: loading, validation messages, extraction and links."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlstack.extract import page_links
from crawlstack.rules import Page, RuleError, RuleSet, RulesInvalid, load_rules
from crawlstack.rules.mapping import compile_mapping

HTML = b"""<!DOCTYPE html>
<html><head><title>  Emma  </title></head>
<body>
  <h1>
     Emma
  </h1>
  <p class="author"><a class="author" href="/authors/jane-austen.html">Jane Austen</a></p>
  <ul class="tags"><li> classic </li><li>romance</li></ul>
  <span class="price">12.50</span>
  <a href="/books/pride.html">next</a>
  <a href="https://elsewhere.example/x" rel="nofollow noopener">sponsored</a>
  <a href="javascript:void(0)">js</a>
  <a href="mailto:a@b.c">mail</a>
  <map><area href="/area.html"></map>
  <a href="/books/pride.html#again">dup</a>
</body></html>
"""
URL = "http://books.example/books/emma.html"


def xpath(expression: str) -> dict[str, Any]:
    return {"type": "xpath", "parameters": {"expression": expression}}


TRIM: dict[str, Any] = {"type": "trim", "parameters": {}}


def book_mapping(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "book",
        "description": "a book page",
        "url_patterns": [{"type": "regex", "pattern": r"^https?://books\.example/books/[\w-]+\.html$"}],
        "url_parsers": [{"description": "author", "processors": [xpath("//a[@class='author']/@href")]}],
        "fields": [
            {"name": "title", "processors": [xpath("//h1/text()"), TRIM]},
            {"name": "raw_title", "processors": [xpath("//h1/text()")]},
            {"name": "author", "processors": [xpath("//p[@class='author']"), xpath("./a/text()")]},
            {"name": "first_tag", "processors": [xpath("//ul[@class='tags']/li/text()"), TRIM]},
            {"name": "tag_count", "processors": [xpath("count(//ul[@class='tags']/li)")]},
            {"name": "price", "processors": [xpath("number(//span[@class='price'])")]},
            {"name": "has_price", "processors": [xpath("boolean(//span[@class='price'])")]},
            {"name": "missing", "processors": [xpath("//h6/text()"), TRIM]},
        ],
    }
    data.update(overrides)
    return data


def write_rules(directory: Path, *mappings: Any, names: list[str] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for i, mapping in enumerate(mappings):
        name = names[i] if names else f"m{i}.json"
        text = mapping if isinstance(mapping, str) else json.dumps(mapping)
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def test_extracts_every_field(tmp_path: Path) -> None:
    rules = load_rules(write_rules(tmp_path, book_mapping()))
    mapping = rules.match(URL)
    assert mapping is not None and mapping.name == "book"
    fields = mapping.extract(Page(URL, HTML, "text/html; charset=utf-8"))
    assert fields["title"] == "Emma"
    assert fields["raw_title"].strip() == "Emma" and fields["raw_title"] != "Emma"
    assert fields["author"] == "Jane Austen"
    assert fields["first_tag"] == "classic"
    assert fields["tag_count"] == 2
    assert fields["price"] == 12.5
    assert fields["has_price"] is True
    assert fields["missing"] is None
    assert list(fields) == [f["name"] for f in book_mapping()["fields"]]


def test_match_uses_the_first_matching_mapping_in_file_order(tmp_path: Path) -> None:
    catch_all = {"name": "any", "url_patterns": [{"type": "regex", "pattern": "books"}]}
    rules = load_rules(write_rules(tmp_path, catch_all, book_mapping(), names=["a.json", "b.json"]))
    assert len(rules) == 2
    assert [m.name for m in rules] == ["any", "book"]
    assert rules.match(URL).name == "any"  # type: ignore[union-attr]
    assert rules.match("http://other.example/") is None


def test_load_one_file_and_none(tmp_path: Path) -> None:
    path = write_rules(tmp_path, book_mapping()) / "m0.json"
    assert len(load_rules(path)) == 1
    assert load_rules(None) == RuleSet()
    assert len(load_rules(write_rules(tmp_path / "empty"))) == 0


def test_url_parsers_choose_the_links(tmp_path: Path) -> None:
    mapping = load_rules(write_rules(tmp_path, book_mapping())).match(URL)
    page = Page(URL, HTML)
    assert mapping is not None
    # url_parsers results are always absolute.
    assert mapping.links(page) == ["http://books.example/authors/jane-austen.html"]
    assert page_links(page, mapping) == ["http://books.example/authors/jane-austen.html"]


def test_all_followable_links_without_url_parsers() -> None:
    page = Page(URL, HTML)
    assert page.hrefs() == [
        "/authors/jane-austen.html",
        "/books/pride.html",
        "javascript:void(0)",
        "mailto:a@b.c",
        "/area.html",
        "/books/pride.html#again",
    ]
    # Resolved, canonical, deduplicated; nofollow, javascript: and mailto: left out.
    assert page_links(page, None) == [
        "http://books.example/authors/jane-austen.html",
        "http://books.example/books/pride.html",
        "http://books.example/area.html",
    ]


def test_base_href_is_honoured() -> None:
    html = b'<html><head><base href="http://cdn.example/root/"></head><body><a href="x.html">x</a></body></html>'
    page = Page("http://books.example/a/b.html", html)
    assert page.base_url == "http://cdn.example/root/"
    assert page_links(page, None) == ["http://cdn.example/root/x.html"]
    relative = Page("http://books.example/a/b.html", b'<base href="../c/"><a href="y.html">y</a>')
    assert page_links(relative, None) == ["http://books.example/c/y.html"]
    assert Page("http://books.example/a/b.html", b"<p>no base</p>").base_url == "http://books.example/a/b.html"


@pytest.mark.parametrize("content", ["nofollow", "NoIndex, NoFollow", "none"])
def test_meta_robots_nofollow_gives_no_links(content: str) -> None:
    html = f'<html><head><meta name="ROBOTS" content="{content}"></head><body><a href="/a">a</a></body></html>'
    page = Page(URL, html.encode())
    assert page.hrefs() == []
    assert page_links(page, None) == []


def test_meta_robots_noindex_alone_still_follows() -> None:
    page = Page(URL, b'<meta name="robots" content="noindex"><a href="/a">a</a>')
    assert page.meta_robots == {"noindex"}
    assert page_links(page, None) == ["http://books.example/a"]


def test_non_markup_and_empty_pages_have_no_tree() -> None:
    assert Page(URL, b'{"a": 1}', "application/json").tree is None
    assert Page(URL, b"   ", "text/html").tree is None
    assert page_links(Page(URL, b"<a href='/x'>x</a>", "text/plain"), None) == []
    assert Page(URL, b"<a href='/x'>x</a>", "").is_markup


@pytest.mark.parametrize("codec", ["latin-1", "cp1252"])
def test_an_undeclared_western_page_is_read_as_windows_1252(codec: str) -> None:
    text = (
        "<html><head><title>Menu</title></head><body><h1>Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e</h1>"
        "<p>Cr\u00eapes, g\u00e2teau, p\u00e2t\u00e9 et cr\u00e8me fra\u00eeche \u00e0 volont\u00e9.</p></body></html>"
    )
    page = Page(URL, text.encode(codec), "text/html")
    assert page.encoding == "cp1252"
    assert page.text == text


def test_charset_from_content_type() -> None:
    body = "<h1>caf\u00e9</h1>".encode("latin-1")
    page = Page(URL, body, "text/html; charset=ISO-8859-1")
    assert page.tree.xpath("//h1/text()") == ["caf\u00e9"]
    # An unknown charset label falls back to sniffing rather than failing.
    assert Page(URL, b"<h1>x</h1>", "text/html; charset=bogus-9").tree is not None


# --- validation: every message is one line naming file, location and reason ---
def _errors(tmp_path: Path, *mappings: Any, names: list[str] | None = None) -> list[RuleError]:
    with pytest.raises(RulesInvalid) as info:
        load_rules(write_rules(tmp_path, *mappings, names=names))
    errors = info.value.errors
    assert str(info.value) == "\n".join(str(e) for e in errors)
    for e in errors:
        assert "\n" not in str(e)
        assert str(e).startswith(e.file + ": ")
    return errors


@pytest.mark.parametrize(
    ("mapping", "location", "reason"),
    [
        ([1, 2], "", "a mapping must be a JSON object"),
        (book_mapping(name=""), "name", "must be a non-empty string"),
        (book_mapping(name=5), "name", "must be a non-empty string"),
        (book_mapping(extra=1), "extra", "unknown key"),
        (book_mapping(url_patterns=[]), "url_patterns", "must be a non-empty list"),
        (book_mapping(url_patterns=[{"type": "glob", "pattern": "*"}]), "url_patterns[0].type", "must be 'regex'"),
        (book_mapping(url_patterns=[{"type": "regex"}]), "url_patterns[0].pattern", "must be a non-empty string"),
        (book_mapping(url_patterns=[{"type": "regex", "pattern": "("}]), "url_patterns[0].pattern", "invalid regex"),
        (book_mapping(url_parsers={}), "url_parsers", "must be a list"),
        (book_mapping(url_parsers=["x"]), "url_parsers[0]", "must be an object"),
        (book_mapping(url_parsers=[{"processors": []}]), "url_parsers[0].processors", "must be a non-empty list"),
        (book_mapping(fields={}), "fields", "must be a list"),
        (book_mapping(fields=[1]), "fields[0]", "must be an object"),
        (book_mapping(fields=[{"processors": [TRIM]}]), "fields[0].name", "must be a non-empty string"),
        (
            book_mapping(fields=[{"name": "a", "processors": [TRIM]}, {"name": "a", "processors": [TRIM]}]),
            "fields[1].name",
            "duplicate field name 'a'",
        ),
        (book_mapping(fields=[{"name": "a"}]), "fields[0].processors", "must be a non-empty list"),
        (
            book_mapping(fields=[{"name": "a", "processors": [TRIM, "x"]}]),
            "fields[0].processors[1]",
            "a processor must be an object",
        ),
        (
            book_mapping(fields=[{"name": "a", "processors": [{"type": "regexp"}]}]),
            "fields[0].processors[0].type",
            "unknown processor type 'regexp' (known: absolute_url, css, default,",
        ),
        (
            book_mapping(fields=[{"name": "a", "processors": [{"type": "xpath", "parameters": []}]}]),
            "fields[0].processors[0].parameters",
            "must be an object",
        ),
        (
            book_mapping(fields=[{"name": "a", "processors": [{"type": "xpath", "parameters": {}}]}]),
            "fields[0].processors[0].parameters.expression",
            "required",
        ),
        (
            book_mapping(fields=[{"name": "a", "processors": [xpath("//h1[")]}]),
            "fields[0].processors[0].parameters.expression",
            "invalid XPath",
        ),
        (
            book_mapping(url_parsers=[{"processors": [xpath("///")]}]),
            "url_parsers[0].processors[0].parameters.expression",
            "invalid XPath",
        ),
    ],
)
def test_validation_errors_name_file_location_and_reason(
    tmp_path: Path, mapping: Any, location: str, reason: str
) -> None:
    (error,) = _errors(tmp_path, mapping, names=["bad.json"])
    file = str(tmp_path / "bad.json")
    assert (error.file, error.location) == (file, location)
    assert reason in error.reason
    expected = f"{file}: {location}: " if location else f"{file}: "
    assert str(error).startswith(expected + reason)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    (error,) = _errors(tmp_path, '{\n  "name": "x",\n  oops\n}', names=["broken.json"])
    assert error.file == str(tmp_path / "broken.json")
    assert error.location == "line 3 column 3"
    assert error.reason.startswith("invalid JSON: ")
    assert str(error) == f"{tmp_path / 'broken.json'}: line 3 column 3: {error.reason}"


def test_duplicate_mapping_names_name_both_files(tmp_path: Path) -> None:
    (error,) = _errors(tmp_path, book_mapping(), book_mapping(), names=["a.json", "b.json"])
    assert error.file == str(tmp_path / "b.json")
    assert error.location == "name"
    assert error.reason == f"mapping name 'book' already used in {tmp_path / 'a.json'}"


def test_every_bad_file_is_reported_at_once(tmp_path: Path) -> None:
    errors = _errors(
        tmp_path,
        "not json",
        book_mapping(name=""),
        book_mapping(),
        names=["a.json", "b.json", "c.json"],
    )
    assert [Path(e.file).name for e in errors] == ["a.json", "b.json"]


def test_missing_path(tmp_path: Path) -> None:
    (error,) = _errors_for_missing(tmp_path / "nope")
    assert error.file == str(tmp_path / "nope")
    assert str(error) == f"{tmp_path / 'nope'}: no such file or directory"


def _errors_for_missing(path: Path) -> list[RuleError]:
    with pytest.raises(RulesInvalid) as info:
        load_rules(path)
    return info.value.errors


def test_compile_mapping_strips_the_name() -> None:
    mapping = compile_mapping("f.json", book_mapping(name="  book  "))
    assert mapping.name == "book"
    assert mapping.file == "f.json"


def test_json_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(RulesInvalid) as info:
        load_rules(tmp_path)
    assert [e.reason for e in info.value.errors] == ["invalid JSON: nested too deeply"]


def test_duplicate_json_keys_are_an_error_and_a_bom_is_not(tmp_path: Path) -> None:
    (tmp_path / "dup.json").write_text('{"name": "a", "name": "b", "url_patterns": []}', encoding="utf-8")
    with pytest.raises(RulesInvalid) as info:
        load_rules(tmp_path / "dup.json")
    assert [e.reason for e in info.value.errors] == ["invalid JSON: key 'name' appears twice in one object"]
    bom = tmp_path / "bom.json"
    bom.write_text(json.dumps(book_mapping()), encoding="utf-8-sig")
    assert len(load_rules(bom)) == 1
