"""Run the benchmarks and rewrite BENCHMARKS.md from their results (``make bench``).

Each benchmark script ``bench/NAME.py`` runs in its own fresh interpreter,
one after the other so they do not compete for the machine, in this order:
cold_start, extraction, politeness, scrapy_compare, scale, cost, paper, watch,
watch_cost.  A script
that is not there is skipped with a note; one that fails (non-zero exit, or
no fresh ``bench/results/NAME.json``) is recorded as failed with its last
error line, and the others still run.

BENCHMARKS.md is then rendered from every ``bench/results/*.json`` present
(so ``--only`` refreshes some figures and keeps the rest): a title, how to
reproduce, one table of every figure, the benchmarks' own notes, then
``bench/notes.md`` verbatim.

    python bench/run.py [--only NAME]... [--render-only] [--remark TEXT] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common import checkout_env, machine

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
NOTES_FILE = BENCH_DIR / "notes.md"
ORDER = ("cold_start", "extraction", "politeness", "scrapy_compare", "scale", "cost", "paper", "watch", "watch_cost")
COLUMNS = ("Benchmark", "Figure", "Value", "Target", "Met", "Machine", "How measured")
SAME = "as above"
NONE = "-"
ATTACHED_UNITS = ("x", "%")  # 2.94x, 12%: no space


# --- running ------------------------------------------------------------------
def last_error_line(stderr: str, stdout: str = "") -> str:
    """The line that says what went wrong: the last non-empty line of ``stderr`` (else ``stdout``)."""
    for text in (stderr, stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1][:300]
    return "no output"


def failure_result(name: str, error: str) -> dict[str, Any]:
    return {
        "name": name,
        "machine": machine(),
        "method": "",
        "figures": [],
        "failed": error,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_one(name: str, results_dir: Path, timeout: float | None = None) -> str | None:
    """Run ``bench/NAME.py`` in a fresh interpreter; None when it wrote its result, else the error line.

    A failure replaces the benchmark's old result file, so a stale figure is
    never shown as current.
    """
    result_file = results_dir / f"{name}.json"
    before = result_file.stat().st_mtime_ns if result_file.exists() else None
    started = time.monotonic()
    print(f"== {name}", flush=True)
    # Its output is passed through as it comes (a crawl takes minutes); the
    # last lines are kept for the one-line error.
    proc = subprocess.Popen(
        [sys.executable, "-u", str(BENCH_DIR / f"{name}.py")],
        cwd=ROOT,
        env=checkout_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a timeout ends its children (servers, crawls) too
    )
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill) if timeout else None
    if timer is not None:
        timer.start()
    tail: deque[str] = deque(maxlen=50)
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line)
    returncode = proc.wait()
    if timer is not None:
        timer.cancel()
    error: str | None = None
    if timed_out.is_set():
        error = f"timed out after {timeout:.0f} s"
    elif returncode != 0:
        error = f"exit {returncode}: {last_error_line(''.join(tail))}"
    elif not result_file.exists() or result_file.stat().st_mtime_ns == before:
        error = f"wrote no bench/results/{result_file.name}"
    print(f"== {name}: {'ok' if error is None else 'FAILED: ' + error} ({time.monotonic() - started:.0f} s)")
    if error is not None:
        results_dir.mkdir(parents=True, exist_ok=True)
        result_file.write_text(json.dumps(failure_result(name, error), indent=2) + "\n", encoding="utf-8")
    return error


def load_results(results_dir: Path) -> list[dict[str, Any]]:
    """Every result file present, in ORDER first, then the others by name; unreadable ones as failures."""
    results = []
    for path in sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("figures", []), list):
                raise ValueError("not a result object")
        except (OSError, ValueError) as exc:
            data = failure_result(path.stem, f"unreadable result {path.name}: {exc}")
        data.setdefault("name", path.stem)
        results.append(data)
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(results, key=lambda r: (rank.get(r["name"], len(ORDER)), r["name"]))


# --- rendering ----------------------------------------------------------------
def cell(value: Any) -> str:
    """Text safe inside a markdown table cell."""
    text = "" if value is None else str(value)
    return " ".join(text.replace("|", "\\|").split())


def format_value(value: Any, unit: str = "") -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        text = str(value)
    elif isinstance(value, int):
        text = f"{value:,}"
    elif value != value or value in (float("inf"), float("-inf")):  # NaN, infinities
        text = str(value)
    else:
        size = abs(value)
        if size >= 100:
            text = f"{value:,.0f}"
        elif size >= 10:
            text = f"{value:.1f}"
        elif size >= 1 or size == 0:
            text = f"{value:.2f}"
        else:
            text = f"{value:.3g}"
    if unit in ATTACHED_UNITS:
        return text + unit
    if unit == "$":
        return f"-${text[1:]}" if text.startswith("-") else f"${text}"
    return f"{text} {unit}".strip() if unit else text


def format_met(meets: Any) -> str:
    if meets is True:
        return "yes"
    if meets is False:
        return "**no**"
    return NONE


def machine_cell(result: Mapping[str, Any]) -> str:
    """The machine, when the benchmark started (UTC) and the load average as it started and ended."""
    parts = [str(result.get("machine") or "unknown")]
    when = result.get("started") or result.get("date")
    if when:
        parts.append(str(when)[:16].replace("T", " ") + " UTC")
    load = result.get("load")
    if isinstance(load, Mapping) and load.get("before") is not None:
        after = load.get("after")
        parts.append(f"load {load['before']:.1f}" + (f"→{after:.1f}" if after is not None else ""))
    return "; ".join(parts)


def table_rows(results: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for result in results:
        name = str(result.get("name", "?"))
        if result.get("failed"):
            rows.append([name, NONE, "failed", "", "**no**", machine_cell(result), f"failed: {result['failed']}"])
            continue
        figures = result.get("figures") or []
        if not figures:
            rows.append([name, NONE, "no figures", "", NONE, machine_cell(result), str(result.get("method", ""))])
            continue
        for i, fig in enumerate(figures):
            rows.append(
                [
                    name if i == 0 else "",
                    str(fig.get("label", "")),
                    format_value(fig.get("value", ""), str(fig.get("unit") or "")),
                    str(fig.get("target") or ""),
                    format_met(fig.get("meets")),
                    machine_cell(result) if i == 0 else SAME,
                    str(result.get("method", "")) if i == 0 else SAME,
                ]
            )
    return rows


def render_table(results: Iterable[Mapping[str, Any]]) -> str:
    align = ["---", "---", "---:", "---", "---", "---", "---"]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table_rows(results)]
    return "\n".join(lines)


def render(
    results: list[Mapping[str, Any]],
    notes: str = "",
    skipped: Iterable[str] = (),
    remark: str = "",
) -> str:
    """BENCHMARKS.md: title, how to reproduce, one table, each benchmark's notes, then ``notes`` verbatim."""
    out = [
        "# Benchmarks",
        "",
        "Reproduce with `make bench` (it runs `bench/run.py`, which runs each `bench/NAME.py` in a fresh "
        "interpreter and rewrites this file from `bench/results/*.json`; `python bench/run.py --only NAME` "
        "runs one). Do not edit this file by hand: prose goes in `bench/notes.md`.",
        "",
    ]
    if remark:
        out += [remark.strip(), ""]
    out += [
        "The Machine column gives each benchmark's machine, when it started and the one-minute load average "
        "as it started→ended (a 2-core machine is busy above 2); timings taken while other work loads the "
        "machine are noisy.",
        "",
        render_table(results),
        "",
    ]
    skipped = list(skipped)
    if skipped:
        out += ["Not run: " + "; ".join(skipped) + ".", ""]
    sections = [(r.get("name"), r.get("notes")) for r in results]
    sections = [(name, text.strip()) for name, text in sections if isinstance(text, str) and text.strip()]
    if sections:
        out += ["## Notes", ""]
        for name, text in sections:
            out += [f"### {name}", "", text, ""]
    if notes.strip():
        out += [notes.rstrip(), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run just this benchmark (repeatable)")
    parser.add_argument("--render-only", action="store_true", help="run nothing; rewrite BENCHMARKS.md from results")
    parser.add_argument("--remark", default="", help="a line for the top of BENCHMARKS.md (e.g. the machine's state)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one benchmark may take (default 3600)")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args(argv)

    names = list(ORDER)
    if args.only:
        unknown = [n for n in args.only if n not in ORDER and not (BENCH_DIR / f"{n}.py").is_file()]
        if unknown:
            parser.error(f"no benchmark {', '.join(unknown)} (known: {', '.join(ORDER)})")
        names = list(dict.fromkeys(args.only))
    skipped: list[str] = []
    failed = 0
    if not args.render_only:
        for name in names:
            if not (BENCH_DIR / f"{name}.py").is_file():
                note = f"{name} (bench/{name}.py is not in this checkout)"
                print(f"== {name}: skipped, bench/{name}.py is not in this checkout")
                skipped.append(note)
                continue
            if run_one(name, RESULTS_DIR, args.timeout) is not None:
                failed += 1

    notes = NOTES_FILE.read_text(encoding="utf-8") if NOTES_FILE.is_file() else ""
    args.out.write_text(render(load_results(RESULTS_DIR), notes, skipped, args.remark), encoding="utf-8")
    print(f"-> {args.out}" + (f" ({failed} failed)" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
