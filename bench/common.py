"""Helpers shared by the benchmark scripts: the machine, the result contract, loopback hosts.

Every benchmark writes ``bench/results/<name>.json`` with :func:`write_result`
(a whole result dict) or :func:`report` (its parts)::

    {"name": str, "machine": str, "method": str,
     "figures": [{"label": str, "value": number | str, "unit": str,
                  "target": str | None, "meets": bool | None}, ...],
     ...extra keys}

``bench/run.py`` renders BENCHMARKS.md from those files.  Scripts import this
module as ``common`` (they run as ``python bench/NAME.py``, which puts
``bench/`` first on ``sys.path``) before anything of crawlstack's.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = RESULTS = BENCH_DIR / "results"
# When this benchmark process started (it imports this module first thing).
STARTED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

# Benchmarks measure the checkout they sit in, even when the venv holds an
# editable install of another one: importing this module puts it first.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def machine() -> str:
    """One line naming the machine and interpreter, e.g. ``x86_64, 2 cores, CPython 3.11.7, Linux``."""
    cores = os.cpu_count() or 0
    return (
        f"{platform.machine()}, {cores} core{'s' if cores != 1 else ''}, "
        f"{platform.python_implementation()} {platform.python_version()}, {platform.system()}"
    )


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float | None:
    """The one-minute load average, or None where the OS has none: other work on the machine skews timings."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def figure(
    label: str,
    value: float | int | str,
    unit: str = "",
    target: str | None = None,
    meets: bool | None = None,
) -> dict[str, Any]:
    return {"label": label, "value": value, "unit": unit, "target": target, "meets": meets}


def write_result(result: dict[str, Any], path: Path | None = None) -> Path:
    """Write one result dict (the contract above) to ``RESULTS_DIR/<name>.json``, or ``path``; returns the path.

    Adds what the result does not say itself: ``date`` (UTC, now),
    ``started`` (UTC, when this process started) and ``load.after`` (the
    one-minute load average now), so a reader can tell a quiet machine from
    a busy one.
    """
    result = dict(result)
    result.setdefault("machine", machine())
    result.setdefault("date", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    result.setdefault("started", STARTED)
    load = dict(result.get("load") or {})
    load.setdefault("before", None)
    load.setdefault("after", load_average())
    result["load"] = load
    if path is None:
        path = RESULTS_DIR / f"{result['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def report(
    name: str,
    method: str,
    figures: list[dict[str, Any]],
    *,
    load_before: float | None = None,
    path: Path | None = None,
    **extra: Any,
) -> Path:
    """Build the result dict from its parts (plus the CPU model and ``load_before``) and write it."""
    result: dict[str, Any] = {
        "name": name,
        "machine": machine(),
        "method": method,
        "figures": figures,
        "cpu": cpu_model(),
        "load": {"before": load_before},
        **extra,
    }
    return write_result(result, path)


def checkout_env(**overrides: str) -> dict[str, str]:
    """This process's environment with this checkout first on PYTHONPATH, for subprocesses.

    The venv may hold an editable install of another checkout; the benchmark
    must measure the code it sits in.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(overrides)
    return env


def loopback_address(i: int) -> str:
    """The i-th loopback host address: 127.0.1.1, 127.0.1.2, ... (250 to a block)."""
    return f"127.0.{1 + i // 250}.{1 + i % 250}"


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def round_to(value: float, digits: int = 3) -> float:
    return float(f"{value:.{digits}g}")
