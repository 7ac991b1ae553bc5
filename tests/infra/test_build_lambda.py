"""scripts/build_lambda.py without pip: cache key, cache hit, the code asset (what handlers import), bad rules."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_lambda", ROOT / "scripts" / "build_lambda.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_lambda"] = module
    spec.loader.exec_module(module)
    return module


def test_layer_hash_follows_requirements(build, monkeypatch):
    before = build.layer_hash()
    assert before == build.layer_hash()
    monkeypatch.setattr(build.settings, "LAMBDA_REQUIREMENTS", (*build.settings.LAMBDA_REQUIREMENTS, "extra>=1"))
    assert build.layer_hash() != before


def test_pip_targets_lambda_arm64_binaries_without_boto3(build):
    args = build.pip_args(Path("/tmp/x"))
    assert "--only-binary=:all:" in args
    assert args[args.index("--python-version") + 1] == build.settings.LAMBDA_PYTHON_VERSION
    assert "manylinux2014_aarch64" in args
    assert not any(a.startswith(("boto3", "botocore")) for a in build.settings.LAMBDA_REQUIREMENTS)


def test_cached_layer_skips_pip(build, tmp_path, monkeypatch):
    (tmp_path / "layer" / "python").mkdir(parents=True)
    (tmp_path / "layer.sha256").write_text(build.layer_hash() + "\n")

    def no_pip(*args, **kwargs):
        raise AssertionError("pip should not run on a cache hit")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert build.build_layer(tmp_path, force=False) is False


def test_code_asset_holds_package_handlers_and_rules(build, tmp_path):
    build.build_code(tmp_path)
    code = tmp_path / "code"
    assert (code / "crawlstack" / "settings.py").is_file()
    assert (code / "functions").is_dir()
    assert (code / build.settings.LAMBDA_RULES_DIR).is_dir()
    assert not list(code.rglob("__pycache__"))


def asset_modules(code: Path) -> set[str]:
    """The module names of the Python files under ``code`` (a package by its ``__init__.py``)."""
    names = set()
    for path in code.rglob("*.py"):
        parts = path.relative_to(code).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


# Modules no handler imports: the CLI, local mode (the fault proxy and billing with it), the demo site...
NOT_SHIPPED = (
    "crawlstack.cli",
    "crawlstack.local",
    "crawlstack.local.faulty",
    "crawlstack.local.billing",
    "crawlstack.local.runner",
    "crawlstack.demo",
    "crawlstack.aws.stack",
    "crawlstack.aws.athena",
    "crawlstack.aws.schedule",
    "crawlstack.extract.rules_tester",
)


def test_code_asset_holds_exactly_what_the_handlers_import(build, tmp_path):
    build.build_code(tmp_path)
    code = tmp_path / "code"
    closure = build.code_closure()
    assert asset_modules(code) == closure
    assert set(build.handler_modules()) <= closure
    assert not set(NOT_SHIPPED) & closure
    assert not (code / "crawlstack" / "demo").exists() and not (code / "crawlstack" / "local").exists()
    # Imported inside functions only (crawlstack.wiring, crawlstack.rules.mapping), still shipped.
    assert {"crawlstack.fetch.host_runner", "crawlstack.extract.extractor", "crawlstack.rules.schema"} <= closure
    # A shipped package's data files go with it.
    assert (code / "crawlstack" / "rules" / "schema.json").is_file()


def test_closure_follows_lazy_relative_and_submodule_imports(build, tmp_path, monkeypatch):
    files = {
        "functions/__init__.py": "",
        "functions/h.py": "from crawlstack import sub\nfrom . import util\n",
        "functions/util.py": "def f():\n    import crawlstack.lazy\n",
        "crawlstack/__init__.py": "",
        "crawlstack/sub/__init__.py": "from .inner import name\n",
        "crawlstack/sub/inner.py": "import json\nname = 1\n",
        "crawlstack/lazy.py": "",
        "crawlstack/unused.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(build, "ROOT", tmp_path)
    assert build.code_closure(["functions.h"]) == {
        "functions",
        "functions.h",
        "functions.util",
        "crawlstack",
        "crawlstack.sub",
        "crawlstack.sub.inner",
        "crawlstack.lazy",
    }


_IMPORT_ALL = """
import importlib, json, sys
for name in sorted(json.loads(sys.argv[1])):
    importlib.import_module(name)
print(json.dumps(sorted(
    name for name, module in sys.modules.items()
    if name.partition(".")[0] in ("crawlstack", "functions")
    and not (getattr(module, "__file__", None) or "").startswith(sys.argv[2])
)))
"""


def test_every_module_of_the_asset_imports_from_the_asset(build, tmp_path):
    """With the asset first on the path (and this venv's packages, not the arm64 layer): nothing missing."""
    build.build_code(tmp_path)
    code = tmp_path / "code"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_", "CRAWLSTACK_"))}
    env.update(
        {
            "PYTHONPATH": str(code),
            "PYTHONDONTWRITEBYTECODE": "1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "POWERTOOLS_TRACE_DISABLED": "true",
            build.settings.ENV_RULES_DIR: str(code / build.settings.LAMBDA_RULES_DIR),
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, json.dumps(sorted(asset_modules(code))), str(code) + os.sep],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # Every crawlstack and functions module loaded came from the asset, none from the checkout.
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


BAD_RULES = {
    "bad.json": {"name": "bad", "url_patterns": [], "fields": [{"name": "a", "processors": [{"type": "xpath"}]}]},
    "good.json": {"name": "good", "url_patterns": [{"type": "domain", "pattern": "example.com"}]},
    "typo.json": {"name": "typo", "url_patterns": [{"type": "regex", "pattern": "x"}], "feilds": []},
}
BAD_RULES_ERRORS = [
    "error: rules/bad.json: fields[0].processors[0].parameters.expression: required",
    "error: rules/bad.json: url_patterns: must be a non-empty list",
    "error: rules/typo.json: feilds: unknown key (allowed: $schema, content_types, description, fields, items, "
    "name, url_parsers, url_patterns)",
    "error: not building with invalid rules (check: crawlstack rules validate rules/)",
]


def write_rules(root: Path) -> None:
    (root / "rules").mkdir(parents=True)
    for name, data in BAD_RULES.items():
        (root / "rules" / name).write_text(json.dumps(data), encoding="utf-8")


def test_repo_rules_pass_the_build_check(build, tmp_path):
    assert build.rules_errors(ROOT / "rules") == []
    assert build.rules_errors(tmp_path / "no-rules-here") == []


def test_invalid_rules_stop_the_build_before_pip(build, tmp_path, monkeypatch, capsys):
    write_rules(tmp_path / "repo")
    monkeypatch.setattr(build, "ROOT", tmp_path / "repo")

    def no_pip(*args, **kwargs):
        raise AssertionError("nothing should be built with invalid rules")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert build.main(["--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.splitlines() == BAD_RULES_ERRORS
    assert not (tmp_path / "out").exists()


def test_script_refuses_invalid_rules_without_a_traceback(tmp_path):
    # The script as `make synth` runs it, on a copy of the repo whose rules/ is broken.
    repo = tmp_path / "repo"
    write_rules(repo)
    (repo / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "build_lambda.py", repo / "scripts")
    (repo / "crawlstack").symlink_to(ROOT / "crawlstack")
    # Should the check ever let this through, pip fails at once instead of reaching PyPI.
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(repo / "scripts" / "build_lambda.py"), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == BAD_RULES_ERRORS
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_import_time_is_measured_in_a_fresh_interpreter(build, tmp_path):
    (tmp_path / "probe_mod.py").write_text("import json\nVALUE = 1\n")
    seconds = build.import_seconds(tmp_path, "probe_mod", runs=1)
    assert 0 < seconds < 10
    (tmp_path / "broken_mod.py").write_text("raise ImportError('nope')\n")
    with pytest.raises(RuntimeError, match="broken_mod"):
        build.import_seconds(tmp_path, "broken_mod", runs=1)


def test_bytecode_is_compiled_by_an_interpreter_of_lambdas_version_only(build, monkeypatch):
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    monkeypatch.setenv(build.LAMBDA_PYTHON_ENV, sys.executable)
    monkeypatch.setattr(build.settings, "LAMBDA_PYTHON_VERSION", host)
    assert build.lambda_python() == shutil.which(sys.executable)
    monkeypatch.setattr(build.settings, "LAMBDA_PYTHON_VERSION", "9.9")
    assert build.lambda_python() is None


def test_compiled_assets_hold_checked_hash_pycs(build, tmp_path):
    """Valid whatever dates the asset's zip gives the sources: the runtime checks each pyc by the source's hash."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    build.compile_bytecode(sys.executable, tmp_path)
    (pyc,) = (tmp_path / "pkg" / "__pycache__").glob("__init__.*.pyc")
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b11  # hash-based, checked against the source


def test_layer_cache_key_follows_bytecode(build):
    assert build.layer_hash("/usr/bin/python3.12") != build.layer_hash(None)
