#!/usr/bin/env python3
"""Build the Lambda assets without Docker.

Produces, under ``--out`` (default ``build/lambda``)::

    layer/python/...   third-party runtime dependencies (a Lambda layer; the
                       runtime puts /opt/python on sys.path)
    code/crawlstack/   the modules of the shared package the handlers import
    code/functions/    the handlers
    code/rules/        the rules JSON files (settings.LAMBDA_RULES_DIR)
    layer.sha256       cache key of the layer (kept outside the asset)

The code asset holds only what the handlers import (``code_closure``): each
handler of ``settings.FUNCTIONS``, and every ``crawlstack``/``functions``
module an ``import`` statement anywhere in a shipped module names, lazy
imports inside functions included, with the parent packages and the data
files (``rules/schema.json``) of the packages shipped.  The CLI, local mode,
the fault proxy, billing and the demo site stay out.

The layer is installed with pip's cross-platform options (arm64 manylinux
wheels for CPython ``settings.LAMBDA_PYTHON_VERSION``, binary wheels only), so
it works on any build host that can reach PyPI.  It is rebuilt only when its
cache key changes: the requirements, the target platform and the pip options.
The code directory is copied fresh on every run; it is small.

Both are compiled to bytecode with a CPython of the runtime's version
(``$CRAWLSTACK_LAMBDA_PYTHON``, else ``python3.12`` on PATH), as checked-hash
pycs, valid whatever dates the asset's zip gives the sources.  Lambda's file
system is read-only, so without them every cold start compiles every module it
imports from source, which about doubles a handler's import time.  Without
such an interpreter the assets are built from sources only, as the build says.

Nothing is built when ``rules/`` has a problem (the schema, then the
compiler: what ``crawlstack rules validate rules/`` checks): each problem is
printed on stderr, one line each, and the exit status is 1.  A deployed
container would otherwise fail at cold start on the same rules.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawlstack import settings  # noqa: E402

# Lambda on Python 3.12 runs Amazon Linux 2023 (glibc 2.34): manylinux2014
# (glibc 2.17) wheels run there, and so do manylinux_2_28 ones, which some
# packages publish instead.
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
# Unzipped size limit of a function plus its layers.
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
CODE_DIRS = ("crawlstack", "functions")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache", ".ruff_cache")
# Packages already in the Lambda runtime that a dependency may pull in.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath")


# An interpreter of Lambda's Python version, to compile the assets' bytecode with (see lambda_python).
LAMBDA_PYTHON_ENV = "CRAWLSTACK_LAMBDA_PYTHON"


def lambda_python() -> str | None:
    """A CPython of ``settings.LAMBDA_PYTHON_VERSION`` on this host, whose bytecode the runtime loads; None if none."""
    candidates = [os.environ.get(LAMBDA_PYTHON_ENV), f"python{settings.LAMBDA_PYTHON_VERSION}", sys.executable]
    for candidate in candidates:
        path = shutil.which(candidate) if candidate else None
        if path is None:
            continue
        probe = subprocess.run(
            [path, "-c", "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.split() == ["cpython", settings.LAMBDA_PYTHON_VERSION]:
            return path
    return None


def compile_bytecode(python: str, path: Path) -> None:
    """Compile every module under ``path`` with ``python``, as checked-hash pycs (no source dates involved)."""
    subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "checked-hash", str(path)], check=True
    )


def pip_args(target: Path) -> list[str]:
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    for platform in PLATFORMS:
        args += ["--platform", platform]
    args += [
        "--python-version",
        settings.LAMBDA_PYTHON_VERSION,
        "--implementation",
        "cp",
        "--only-binary=:all:",
        "--target",
        str(target),
        *settings.LAMBDA_REQUIREMENTS,
    ]
    return args


def layer_hash(python: str | None = None) -> str:
    """Cache key of the layer: everything that decides what pip installs, and whether it is compiled."""
    key = {
        "requirements": sorted(settings.LAMBDA_REQUIREMENTS),
        "python": settings.LAMBDA_PYTHON_VERSION,
        "platforms": PLATFORMS,
        "args": pip_args(Path("TARGET"))[3:],
        "runtime_provided": RUNTIME_PROVIDED,
    }
    if python:  # a layer of sources only keeps the key it had before layers were compiled
        key["bytecode"] = "checked-hash"
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def installed_distributions(site: Path) -> list[str]:
    names = []
    for info in sorted(site.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        names.append(f"{name}=={version}")
    return names


def build_layer(out: Path, force: bool, python: str | None = None) -> bool:
    """Install the dependencies into ``out/layer/python`` (compiled with ``python``, if any).  False when cached."""
    layer = out / "layer"
    stamp = out / "layer.sha256"
    wanted = layer_hash(python)
    if not force and layer.is_dir() and stamp.is_file() and stamp.read_text().strip() == wanted:
        return False
    out.mkdir(parents=True, exist_ok=True)
    # Install into a temporary directory next to the output, then swap it in,
    # so an interrupted build never leaves a half layer behind a valid stamp.
    with tempfile.TemporaryDirectory(dir=out, prefix=".layer-") as tmp:
        site = Path(tmp) / "layer" / "python"
        subprocess.run(pip_args(site), check=True)
        for name in RUNTIME_PROVIDED:
            for path in [*site.glob(name), *site.glob(f"{name}-*.dist-info")]:
                shutil.rmtree(path)
        # Console scripts are useless in a layer and carry the build host's
        # interpreter path.
        shutil.rmtree(site / "bin", ignore_errors=True)
        for cache in site.rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        if python:
            compile_bytecode(python, site)
        if stamp.exists():
            stamp.unlink()
        if layer.exists():
            shutil.rmtree(layer)
        os.replace(Path(tmp) / "layer", layer)
    (out / "layer-requirements.txt").write_text("\n".join(installed_distributions(layer / "python")) + "\n")
    stamp.write_text(wanted + "\n")
    return True


def rules_errors(rules: Path) -> list[str]:
    """Every problem in the rules directory the code asset ships, one line each; empty when valid."""
    if not rules.is_dir():
        return []
    from crawlstack.rules import RuleError, RulesInvalid, load_rules

    try:
        load_rules(rules, check_schema=True)
    except RulesInvalid as exc:
        lines = []
        for error in exc.errors:
            try:
                file = str(Path(error.file).relative_to(ROOT))
            except ValueError:
                file = error.file
            lines.append(str(RuleError(file, error.location, error.reason)))
        return lines
    return []


def handler_modules() -> list[str]:
    """The module of each function's handler (``functions.fetch.handler``)."""
    return [spec.handler.rsplit(".", 1)[0].replace("/", ".") for spec in settings.FUNCTIONS.values()]


def module_file(name: str) -> Path | None:
    """The source of module ``name`` under ``ROOT`` (a package's ``__init__.py``); None if there is none."""
    path = ROOT.joinpath(*name.split("."))
    # A package before a module of the same name, as Python's import system looks.
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:``, which never run (type checkers' imports)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(path: Path, name: str) -> Iterator[str]:
    """Every module name an import statement of module ``name`` (at ``path``) may load, wherever it stands.

    ``from a import b`` yields ``a`` and ``a.b`` (``b`` may be a submodule);
    relative imports are resolved against the module's package.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def code_closure(roots: Iterable[str] | None = None) -> set[str]:
    """The ``crawlstack``/``functions`` modules ``roots`` (the handlers) import, transitively, with their packages.

    Read from the sources (every import statement, lazy ones inside
    functions too), not from what an import of the handlers loads: a
    handler's cold start leaves out modules it loads later.
    """
    found: set[str] = set()
    todo = list(handler_modules() if roots is None else roots)
    while todo:
        name = todo.pop()
        if name in found or name.partition(".")[0] not in CODE_DIRS:
            continue
        path = module_file(name)
        if path is None:  # a name defined in a module, not a module
            continue
        found.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages run first
        todo += imported_names(path, name)
    return found


def build_code(out: Path) -> None:
    code = out / "code"
    if code.exists():
        shutil.rmtree(code)
    code.mkdir(parents=True)
    for name in sorted(code_closure()):
        source = module_file(name)
        assert source is not None
        target = code / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        if source.name == "__init__.py":
            # The package's data files (crawlstack/rules/schema.json), not its subdirectories.
            for data in source.parent.iterdir():
                if data.is_file() and data.suffix not in (".py", ".pyc", ".pyo"):
                    shutil.copy2(data, target.parent / data.name)
    rules = ROOT / "rules"
    if rules.is_dir():
        shutil.copytree(rules, code / settings.LAMBDA_RULES_DIR, ignore=IGNORE)
    else:
        (code / settings.LAMBDA_RULES_DIR).mkdir()


IMPORT_RUNS = 3
_IMPORT_PROBE = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def import_seconds(code_dir: Path, module: str, runs: int = IMPORT_RUNS) -> float:
    """Best-of-``runs`` import time of ``module`` in fresh interpreters: the cold start's import share.

    It runs on the build host's Python with the host's builds of the same
    packages (this venv), not on Lambda's arm64 Python 3.12 with the layer's
    wheels, which the host may not be able to load: a comparison between
    handlers and builds, not a Lambda measurement.
    """
    env = {
        **os.environ,
        "PYTHONPATH": str(code_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        settings.ENV_RULES_DIR: str(code_dir / settings.LAMBDA_RULES_DIR),
    }
    best = float("inf")
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-c", _IMPORT_PROBE.format(module=module)],
            cwd=code_dir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"importing {module} failed: {result.stderr.strip().splitlines()[-1:]}")
        best = min(best, float(result.stdout.strip().splitlines()[-1]))
    return best


def report_functions(out: Path, layer_size: int, code_size: int) -> None:
    """Per function: unzipped size (its code asset plus the shared layer) and handler import time."""
    version = ".".join(map(str, sys.version_info[:2]))
    print(f"functions (import time: best of {IMPORT_RUNS}, host Python {version}, not Lambda's arm64):")
    for key, spec in settings.FUNCTIONS.items():
        module = spec.handler.rsplit(".", 1)[0].replace("/", ".")
        try:
            timing = f"{import_seconds(out / 'code', module) * 1000:.0f} ms"
        except RuntimeError as exc:
            timing = f"not measured ({exc})"
        print(f"  {key:<9} {(layer_size + code_size) / 2**20:5.1f} MiB unzipped   import {module}: {timing}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "lambda", help="output directory")
    parser.add_argument("--force", action="store_true", help="reinstall the layer even if it is cached")
    parser.add_argument("--no-import-time", action="store_true", help="skip timing each handler's import")
    parser.add_argument(
        "--print-hash", action="store_true", help="print the layer cache key (for CI cache keys) and exit"
    )
    args = parser.parse_args(argv)
    if args.print_hash:
        print(layer_hash(lambda_python()))
        return 0

    problems = rules_errors(ROOT / "rules")
    if problems:
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        print("error: not building with invalid rules (check: crawlstack rules validate rules/)", file=sys.stderr)
        return 1

    out: Path = args.out.resolve()
    python = lambda_python()
    built = build_layer(out, args.force, python)
    build_code(out)
    if python:
        compile_bytecode(python, out / "code")
        print(f"bytecode: compiled with {python} (checked-hash pycs)")
    else:
        print(
            f"bytecode: none (no CPython {settings.LAMBDA_PYTHON_VERSION} found; set {LAMBDA_PYTHON_ENV}): "
            "each cold start compiles every module it imports, about twice the import time"
        )

    layer_size = dir_size(out / "layer")
    code_size = dir_size(out / "code")
    print(f"layer: {out / 'layer'} {layer_size / 2**20:.1f} MiB unzipped ({'built' if built else 'cached'})")
    print(f"code:  {out / 'code'} {code_size / 2**20:.2f} MiB unzipped")
    if layer_size + code_size > LAMBDA_UNZIPPED_LIMIT:
        print(
            f"error: function plus layer is {(layer_size + code_size) / 2**20:.1f} MiB, "
            f"above Lambda's {LAMBDA_UNZIPPED_LIMIT // 2**20} MiB unzipped limit",
            file=sys.stderr,
        )
        return 1
    if not args.no_import_time:
        report_functions(out, layer_size, code_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
