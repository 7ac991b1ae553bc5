"""Fixtures of the CDK tests: a small stand-in for the Lambda build output."""

from __future__ import annotations

import pytest

from infra.config import LambdaAssets


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> LambdaAssets:
    root = tmp_path_factory.mktemp("lambda")
    (root / "code" / "functions").mkdir(parents=True)
    (root / "code" / "functions" / "stub.py").write_text("def handler(event, context):\n    return None\n")
    (root / "layer" / "python").mkdir(parents=True)
    (root / "layer" / "python" / "stub.py").write_text("")
    return LambdaAssets(code_dir=root / "code", layer_dir=root / "layer")
