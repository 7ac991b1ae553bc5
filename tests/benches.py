"""bench/NAME.py loaded as a module for its tests.

bench/ is a folder of scripts, not a package: each runs as ``python
bench/NAME.py`` and imports its neighbours (``common``) as top-level
modules.  Loaded by path here, with bench/ on the path only while it loads,
so ``pytest tests/unit`` works from the root in any order.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"


def load(name: str) -> ModuleType:
    module_name = f"bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while a class is built
    sys.path.insert(0, str(BENCH_DIR))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH_DIR))
    return module
