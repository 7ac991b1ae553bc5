"""docs/reference.md stays true to the CLI: every flag documented, nothing documented that does not exist.

The doc's conventions, which these tests rely on:

* each command has a section headed ``### crawlstack <command words>``
  (``### crawlstack crawl``, ``### crawlstack dlq show``), which runs to the
  next heading of level 1 to 3;
* a flag is documented as inline code that starts with the flag exactly as
  typed (`` `--max-pages N` ``, `` `--resume` ``);
* the exit codes are the rows of the table under ``## Exit codes``, the
  code first (`` | `3` | ... | ``);
* the crawl settings' tables are written from their declarations by
  scripts/settings_doc.py, between ``<!-- settings of COMMAND ... -->`` and
  ``<!-- end of settings -->``.

Also: every relative link in README.md, ARCHITECTURE.md and docs/*.md
points to a file that exists, and to a heading that exists in it.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
from pathlib import Path

import pytest

from crawlstack import cli
from crawlstack.cli import crawl, crawl_jobs
from crawlstack.config.schema import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"
CLI_SOURCES = sorted((ROOT / "crawlstack" / "cli").glob("*.py"))
LINKED_DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
COMMAND_HEADING = re.compile(r"^### crawlstack ([a-z][a-z ]*[a-z])$")
# Inline code that starts with a flag: `--max-pages N` documents --max-pages.
FLAG_SPAN = re.compile(r"`(--[a-z0-9][a-z0-9-]*)[^`]*`")


# --- the parsers --------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _long_options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def _walk(path: tuple[str, ...], parser: argparse.ArgumentParser) -> dict[tuple[str, ...], set[str]]:
    """Each command (a leaf, or a parser with options of its own) and its long options."""
    found: dict[tuple[str, ...], set[str]] = {}
    children = _subcommands(parser)
    options = _long_options(parser)
    if path and (options or not children):
        found[path] = options
    for name, child in children.items():
        found.update(_walk((*path, name), child))
    return found


def cli_commands() -> dict[tuple[str, ...], set[str]]:
    """Every command of the ``crawlstack`` CLI and its long options."""
    commands = _walk((), cli.build_parser())
    # `crawl stop|resume ID` has a parser of its own (cli.main routes it before build_parser).
    job_options = _long_options(crawl_jobs.job_parser())
    for action in crawl_jobs.JOB_ACTIONS:
        commands[("crawl", action)] = job_options
    return commands


# --- the doc -------------------------------------------------------------------------------


def doc_sections(text: str) -> dict[tuple[str, ...], str]:
    """``### crawlstack <words>`` section -> its text (to the next heading of level 1 to 3)."""
    sections: dict[tuple[str, ...], str] = {}
    current: tuple[str, ...] | None = None
    lines: list[str] = []
    fenced = False
    for line in [*text.splitlines(), "# end"]:
        fenced ^= line.startswith("```")
        heading = None if fenced else HEADING.match(line)
        if heading and len(heading.group(1)) <= 3:
            if current is not None:
                assert current not in sections, f"docs/reference.md: two sections for `crawlstack {' '.join(current)}`"
                sections[current] = "\n".join(lines)
            command = COMMAND_HEADING.match(line)
            current = tuple(command.group(1).split()) if command else None
            lines = []
        elif current is not None:
            lines.append(line)
    return sections


def documented_flags(section: str) -> set[str]:
    return set(FLAG_SPAN.findall(section))


@pytest.fixture(scope="module")
def sections() -> dict[tuple[str, ...], str]:
    return doc_sections(REFERENCE.read_text(encoding="utf-8"))


def test_the_doc_parser_finds_sections_and_flags() -> None:
    text = "## Commands\n### crawlstack dlq show\n`--limit N` and `--stack NAME`, not --bare\n## Exit codes\n`--no`\n"
    assert doc_sections(text) == {("dlq", "show"): "`--limit N` and `--stack NAME`, not --bare"}
    assert documented_flags(doc_sections(text)[("dlq", "show")]) == {"--limit", "--stack"}
    # A comment in a code block is no heading.
    fenced = "### crawlstack seed\n```sh\n# seed\n```\n`--rules DIR`\n"
    assert documented_flags(doc_sections(fenced)[("seed",)]) == {"--rules"}


def test_every_command_has_a_section(sections: dict[tuple[str, ...], str]) -> None:
    missing = [f"crawlstack {' '.join(path)}" for path in cli_commands() if path not in sections]
    assert not missing, f"docs/reference.md has no `### crawlstack ...` section for: {', '.join(missing)}"


def test_every_section_is_a_command(sections: dict[tuple[str, ...], str]) -> None:
    commands = cli_commands()
    unknown = [f"crawlstack {' '.join(path)}" for path in sections if path not in commands]
    assert not unknown, f"docs/reference.md documents commands the CLI does not have: {', '.join(unknown)}"


def test_every_flag_is_documented_under_its_command(sections: dict[tuple[str, ...], str]) -> None:
    missing = [
        f"`{flag}` of `crawlstack {' '.join(path)}`"
        for path, flags in sorted(cli_commands().items())
        for flag in sorted(flags - documented_flags(sections.get(path, "")))
    ]
    assert not missing, "not documented in its command's section of docs/reference.md: " + ", ".join(missing)


def test_every_documented_flag_exists(sections: dict[tuple[str, ...], str]) -> None:
    commands = cli_commands()
    unknown = [
        f"`{flag}` under `crawlstack {' '.join(path)}`"
        for path, section in sorted(sections.items())
        if path in commands
        for flag in sorted(documented_flags(section) - commands[path])
    ]
    assert not unknown, "docs/reference.md documents flags the command does not take: " + ", ".join(unknown)


# --- the settings' tables -------------------------------------------------------------------


def settings_doc() -> object:
    spec = importlib.util.spec_from_file_location("settings_doc", ROOT / "scripts" / "settings_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_tables_are_written_from_the_declarations() -> None:
    doc = settings_doc()
    text = REFERENCE.read_text(encoding="utf-8")
    assert sorted(m.group(2) for m in doc.BLOCK.finditer(text)) == sorted(COMMANDS)  # type: ignore[attr-defined]
    assert doc.rewrite(text) == text, (  # type: ignore[attr-defined]
        "docs/reference.md's settings tables differ from the declarations: run python scripts/settings_doc.py"
    )


# --- exit codes ----------------------------------------------------------------------------


def documented_exit_codes(text: str) -> set[int]:
    """The codes in the first column of the table under ``## Exit codes``."""
    match = re.search(r"^## Exit codes\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, "docs/reference.md has no `## Exit codes` section"
    return {int(code) for code in re.findall(r"^\|\s*`?(\d+)`?\s*\|", match.group(1), re.M)}


def cli_exit_codes() -> set[int]:
    """The integers crawlstack/cli/ returns: literals, and module constants it returns by name."""
    trees = [ast.parse(source.read_text(encoding="utf-8")) for source in CLI_SOURCES]
    constants = {
        target.id: node.value.value
        for tree in trees
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and type(node.value.value) is int
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def returned(value: ast.expr) -> set[int]:
        # `return 1`, `return NOTHING_FETCHED`, `return 1 if failed else 0`, `return status or (1 if ...)`.
        if isinstance(value, ast.Constant) and type(value.value) is int:
            return {value.value}
        if isinstance(value, ast.Name) and value.id in constants:
            return {constants[value.id]}
        if isinstance(value, ast.IfExp):
            return returned(value.body) | returned(value.orelse)
        if isinstance(value, ast.BoolOp):
            return set().union(*(returned(v) for v in value.values))
        return set()

    return {
        code
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Return) and node.value
        for code in returned(node.value)
    }


def test_cli_exit_codes_are_found() -> None:
    # The scan itself: 0, 1, 2 and crawl --local's NOTHING_FETCHED at least.
    assert {0, 1, 2, crawl.NOTHING_FETCHED} <= cli_exit_codes()


def test_documented_exit_codes_are_the_ones_the_cli_uses() -> None:
    documented = documented_exit_codes(REFERENCE.read_text(encoding="utf-8"))
    used = cli_exit_codes()
    never = sorted(documented - used)
    undocumented = sorted(used - documented)
    assert not never, f"docs/reference.md documents exit codes crawlstack/cli/ never returns: {never}"
    assert not undocumented, f"crawlstack/cli/ returns exit codes docs/reference.md does not document: {undocumented}"


# --- links ---------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else HEADING.match(line)
        if heading:
            text = heading.group(2).replace("`", "").lower()
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [link for link in LINK.findall(text) if not re.match(r"^[a-z]+:", link)]


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for link in relative_links(doc):
        target, _, anchor = link.partition("#")
        file = (doc.parent / target).resolve() if target else doc
        if not file.exists():
            broken.append(f"{link} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{link} (no such heading)")
    assert not broken, f"{doc.relative_to(ROOT)}: broken links: {', '.join(broken)}"
