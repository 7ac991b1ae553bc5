"""scripts/build_lambda.py without pip: cache key, cache hit, code copy."""

from __future__ import annotations

import importlib.util
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
