"""Cold start: each Lambda handler's import time in a fresh interpreter, and the unzipped package size.

For each handler in ``settings.FUNCTIONS`` (functions.dispatch.handler,
functions.fetch.handler, functions.extract.handler): one untimed import (so
bytecode caches exist, as they would in a built package), then ``--runs``
fresh ``python -c`` processes that time ``importlib.import_module`` with
``time.perf_counter``; best and median.  The environment is Lambda's as
far as an import sees it: region, fake credentials, ``LAMBDA_TASK_ROOT`` (so
Powertools' Tracer is on and patches the AWS SDK and requests, as in
Lambda), ``POWERTOOLS_SERVICE_NAME`` and the ``CRAWLSTACK_*`` variables the
stack sets.  One more process with ``-X importtime`` gives the slowest
modules by cumulative time.

Then ``scripts/build_lambda.py --out build/bench-lambda --no-import-time``
builds the layer (arm64 wheels from the package index, cached between
runs) and the code asset, and their unzipped sizes are summed from the
files.

This is the build host's CPython on its own CPU, not Lambda's arm64
Python 3.12: a comparison between handlers and revisions, not a Lambda
cold-start measurement.

    python bench/cold_start.py [--runs 5] [--no-package]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import ROOT, checkout_env, figure, load_average, report

from crawlstack import settings

TARGET_MS = 300.0
TOP_MODULES = 8
UNTRACED_RUNS = 3
LAMBDA_UNZIPPED_LIMIT_MIB = 250.0
BUILD_DIR = ROOT / "build" / "bench-lambda"
_PROBE = (
    "import importlib, time; t = time.perf_counter(); importlib.import_module({module!r}); "
    "print(time.perf_counter() - t)"
)


def handler_modules() -> dict[str, str]:
    return {key: spec.handler.rsplit(".", 1)[0].replace("/", ".") for key, spec in settings.FUNCTIONS.items()}


def lambda_env(key: str) -> dict[str, str]:
    """What a Lambda container's environment looks like to an import (see infra/functions.py)."""
    env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "LAMBDA_TASK_ROOT": str(ROOT),
        "AWS_LAMBDA_FUNCTION_NAME": f"crawlstack-{key}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(settings.FUNCTIONS[key].memory_mb),
        "AWS_EXECUTION_ENV": f"AWS_Lambda_python{settings.LAMBDA_PYTHON_VERSION}",
        "POWERTOOLS_SERVICE_NAME": key,
        "POWERTOOLS_METRICS_NAMESPACE": settings.METRICS_NAMESPACE,
        settings.ENV_RULES_DIR: str(ROOT / settings.LAMBDA_RULES_DIR),
        settings.ENV_BUCKET: "crawlstack-pages",
        settings.ENV_DEFAULT_DELAY: "5",
        settings.ENV_DEFAULT_MAX_DEPTH: "2",
        settings.ENV_USER_AGENT: settings.DEFAULT_USER_AGENT,
    }
    for queue_key, name in settings.ENV_QUEUE_URL.items():
        env[name] = f"https://sqs.us-east-1.amazonaws.com/123456789012/crawlstack-{queue_key}"
    for table_key, name in settings.ENV_TABLE.items():
        env[name] = f"crawlstack-{table_key}"
    return checkout_env(**env)


def import_seconds(module: str, env: dict[str, str]) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"importing {module} failed: {tail[0]}")
    return float(proc.stdout.strip().splitlines()[-1])


def slowest_imports(module: str, env: dict[str, str], top: int = TOP_MODULES) -> list[dict[str, Any]]:
    """The ``top`` modules by cumulative import time (``-X importtime``), without ``module`` and its packages."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    parts = module.split(".")
    own = {".".join(parts[: i + 1]) for i in range(len(parts))}
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = [f.strip() for f in line[len("import time:") :].split("|")]
        if len(fields) != 3 or not fields[0].isdigit():
            continue  # the header line
        name = fields[2]
        if name in own:
            continue
        rows.append({"module": name, "cumulative_ms": round(int(fields[1]) / 1000, 1)})
    rows.sort(key=lambda r: r["cumulative_ms"], reverse=True)
    return rows[:top]


def dir_mib(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return total / 2**20


def package_sizes() -> dict[str, Any]:
    """Build the Lambda assets; layer and code sizes in MiB, or the error that stopped the build."""
    proc = subprocess.run(
        [sys.executable, "scripts/build_lambda.py", "--out", str(BUILD_DIR), "--no-import-time"],
        cwd=ROOT,
        env=checkout_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        return {"error": f"build_lambda.py exited {proc.returncode}: {lines[-1].strip() if lines else 'no output'}"}
    requirements = BUILD_DIR / "layer-requirements.txt"
    return {
        "layer_mib": round(dir_mib(BUILD_DIR / "layer"), 2),
        "code_mib": round(dir_mib(BUILD_DIR / "code"), 2),
        "layer_packages": requirements.read_text().split() if requirements.is_file() else [],
        "build_dir": str(BUILD_DIR.relative_to(ROOT)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed imports per handler (default 5)")
    parser.add_argument("--no-package", action="store_true", help="skip building the Lambda package")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    load_before = load_average()

    figures: list[dict[str, Any]] = []
    handlers: dict[str, Any] = {}
    for key, module in handler_modules().items():
        env = lambda_env(key)
        import_seconds(module, env)  # untimed: writes this checkout's bytecode caches
        # Each timed import, then (the first few times) the same without tracing: what Powertools'
        # Tracer, patching the AWS SDK at import, costs; interleaved so a busy spell hits both.
        untraced_env = {**env, "POWERTOOLS_TRACE_DISABLED": "true"}
        times_ms: list[float] = []
        untraced: list[float] = []
        for run in range(args.runs):
            times_ms.append(import_seconds(module, env) * 1000)
            if run < UNTRACED_RUNS:
                untraced.append(import_seconds(module, untraced_env) * 1000)
        best, median = min(times_ms), statistics.median(times_ms)
        handlers[key] = {
            "module": module,
            "runs_ms": [round(t, 1) for t in times_ms],
            "best_ms": round(best, 1),
            "median_ms": round(median, 1),
            "slowest_imports": slowest_imports(module, env),
        }
        handlers[key]["untraced_best_ms"] = round(min(untraced), 1)
        print(f"{module}: best {best:.0f} ms, median {median:.0f} ms; untraced best {min(untraced):.0f} ms", flush=True)
        figures.append(figure(f"{key} import, best", round(best), "ms", f"≤ {TARGET_MS:g} ms", best <= TARGET_MS))
        figures.append(figure(f"{key} import, median", round(median), "ms", f"≤ {TARGET_MS:g} ms", median <= TARGET_MS))

    package: dict[str, Any] = {"skipped": True} if args.no_package else package_sizes()
    notes = [
        "Slowest imports by cumulative time (`-X importtime`, one run each, the handler module and its "
        "packages left out; nested modules count inside their importers):",
        "",
        "| handler | " + " | ".join(f"#{i + 1}" for i in range(TOP_MODULES)) + " |",
        "|---|" + "---|" * TOP_MODULES,
    ]
    for key, info in handlers.items():
        cells = [f"{r['module']} {r['cumulative_ms']:.0f} ms" for r in info["slowest_imports"]]
        cells += [""] * (TOP_MODULES - len(cells))
        notes.append(f"| {key} | " + " | ".join(cells) + " |")
    notes += [
        "",
        f"With POWERTOOLS_TRACE_DISABLED=true (best of up to {UNTRACED_RUNS}, run between the timed imports): "
        + ", ".join(f"{key} {info['untraced_best_ms']:.0f} ms" for key, info in handlers.items())
        + ". Where that is clearly below the best above, the gap is the Tracer patching the AWS SDK and HTTP "
        "libraries at import, as it does in Lambda; on a busy machine the two overlap.",
    ]
    if "error" in package:
        figures.append(figure("Lambda package (layer + code), unzipped", "not measured", ""))
        notes += ["", f"Package size not measured: {package['error']}"]
    elif not args.no_package:
        total = package["layer_mib"] + package["code_mib"]
        figures.append(figure("dependency layer, unzipped", round(package["layer_mib"], 1), "MiB"))
        figures.append(figure("function code asset, unzipped", round(package["code_mib"], 2), "MiB"))
        figures.append(
            figure(
                "function + layer, unzipped",
                round(total, 1),
                "MiB",
                f"≤ {LAMBDA_UNZIPPED_LIMIT_MIB:g} MiB (Lambda's limit)",
                total <= LAMBDA_UNZIPPED_LIMIT_MIB,
            )
        )
        notes += [
            "",
            f"Layer: {len(package['layer_packages'])} distributions for arm64 CPython "
            f"{settings.LAMBDA_PYTHON_VERSION} ({', '.join(package['layer_packages'])}); one layer shared by "
            "all three functions, which share one code asset too.",
        ]

    method = (
        f"Import of each handler module in {args.runs} fresh `python -c` processes after one untimed one, "
        "timed with time.perf_counter around importlib.import_module, with Lambda's environment variables "
        "(tracing on); this host's CPython on x86, not Lambda's arm64 Python "
        f"{settings.LAMBDA_PYTHON_VERSION}. Sizes: files under scripts/build_lambda.py's layer/ and code/."
    )
    report(
        "cold_start",
        method,
        figures,
        load_before=load_before,
        notes="\n".join(notes),
        handlers=handlers,
        package=package,
        python=sys.version.split()[0],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
