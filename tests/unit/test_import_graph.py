"""No package-level import cycle: ``functions`` imports crawlstack, never back, and crawlstack's packages form layers.

Read from the sources (every import statement, lazy ones and type checkers'
too), at the level of packages: ``functions``, each subpackage of
``crawlstack``, and its top-level modules, each on its own or taken together
as ``crawlstack``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("crawlstack", "functions")


def package_of(module: str, modules_apart: bool = False) -> str | None:
    """``functions``, ``crawlstack.<subpackage>``, or ``crawlstack`` for a top-level module; None outside both.

    ``modules_apart``: a top-level module is ``crawlstack.<module>``, a node of its own.
    """
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] == "functions" or len(parts) == 1:
        return parts[0]
    if (ROOT / parts[0] / parts[1]).is_dir() or (modules_apart and (ROOT / parts[0] / f"{parts[1]}.py").is_file()):
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def imported(path: Path, module: str) -> Iterator[str]:
    """Every module an import statement of ``module`` names (``from a import b``: ``a`` and ``a.b``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            yield name
            yield from (f"{name}.{alias.name}" for alias in node.names)


def package_graph(modules_apart: bool = False) -> dict[str, set[str]]:
    """Each package's imports of the others (``modules_apart``: see ``package_of``)."""
    graph: dict[str, set[str]] = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            source = package_of(module, modules_apart)
            assert source is not None
            targets = {package_of(name, modules_apart) for name in imported(path, module)}
            graph.setdefault(source, set()).update(t for t in targets if t is not None and t != source)
    return graph


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), set()) - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_graph_finds_a_cycle_through_functions() -> None:
    graph = {"functions": {"crawlstack.lambdas"}, "crawlstack.lambdas": {"crawlstack"}, "crawlstack": {"functions"}}
    assert "functions" in reaches(graph, "functions")


def test_no_package_of_crawlstack_imports_functions() -> None:
    graph = package_graph()
    assert graph["functions"] >= {"crawlstack.lambdas"}  # the entry points call the bodies
    importers = sorted(package for package, targets in graph.items() if "functions" in targets)
    assert importers == []
    assert "functions" not in reaches(graph, "functions")  # so no cycle runs through it


def test_the_graph_finds_a_cycle_between_a_package_and_a_top_level_module() -> None:
    graph = {"crawlstack.fetch": {"crawlstack.ports"}, "crawlstack.ports": {"crawlstack.fetch"}}
    assert "crawlstack.fetch" in reaches(graph, "crawlstack.fetch")


def test_crawlstacks_packages_and_top_level_modules_import_in_layers() -> None:
    graph = package_graph(modules_apart=True)
    assert {"crawlstack.fetch", "crawlstack.dispatch", "crawlstack.extract", "crawlstack.ports"} <= graph.keys()
    cycles = sorted(package for package in graph if package in reaches(graph, package))
    assert cycles == [], f"packages on an import cycle: {cycles}"
