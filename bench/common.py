"""Shared by the benchmarks: the machine they ran on, and where results go."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}, {platform.system()}"
    )


def write_result(result: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{result['name']}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path
