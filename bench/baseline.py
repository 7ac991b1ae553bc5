"""Extraction against an earlier commit's code, in the same run: time per page and peak memory.

``bench/extraction.py`` calls :func:`compare`: it takes the ``crawlstack/``
package of a git ref (``git archive REF crawlstack``, into a temp dir; no
network) and runs the same corpus through the current checkout's package
and that one, each in a fresh interpreter of its own with only its package
root on ``PYTHONPATH`` (so the two never share an import).  Two paths are
measured, each in its own child process:

* ``rules``: ``Page(url, body, content_type)``, then the compiled mapping's
  ``extract`` and ``links``: what bench/extraction.py's ``crawlstack``
  engine times.  The child loads the corpus (a pickle of the response
  bytes) and nothing else.
* ``object``: the whole ``Extractor.extract_object`` on one gzipped WARC of
  the corpus, with tiny in-memory stores (the per-page isolation and the
  time budget live there).  Constructor arguments the ref's ``Extractor``
  does not take (``outcomes``, ``budget_seconds``) are not passed; the
  current code runs with its default budget, as deployed.

Each repetition runs four children (rules then object, current and
baseline), who goes first alternating between repetitions, so a slow
spell of the machine costs both alike.  A child warms up on the first few
pages, then times one pass over the whole corpus in CPU seconds of its own
process (``time.process_time``), and reports its peak resident set size
(Linux's ``VmHWM``, else ``ru_maxrss``: interpreter, imports, corpus and
the extraction's own peak; not ``ru_maxrss`` on Linux, which carries the
parent's peak over the child's ``exec``).  The ratios are current over baseline, the median of the
per-repetition ratios; the target is at most 1.10.

Run as a script, this file is that child (``--package-root``, ``--data``,
``--path``); it never imports ``common``, which would put this checkout first
on ``sys.path``.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1.10  # issue 18: within 10% of the parent commit
PATHS = ("rules", "object")
WARM_PAGES = 25
CRAWL_ID = "bench"


class BaselineUnavailable(RuntimeError):
    """The baseline could not be measured; ``str()`` says why in one line."""


# --- pure helpers -------------------------------------------------------------------
def paired_ratio(current: list[float], baseline: list[float]) -> float:
    """Current over baseline: the median of the per-repetition ratios."""
    return round(statistics.median(c / b for c, b in zip(current, baseline, strict=True)), 3)


def within(ratio: float, limit: float = LIMIT) -> bool:
    """Whether the current code is within ``limit`` of the baseline (a ratio of current over baseline)."""
    return ratio <= limit


def ratio_figure(label: str, ratio: float, limit: float = LIMIT) -> dict[str, Any]:
    return {"label": label, "value": ratio, "unit": "x", "target": f"≤ {limit:.2f}x", "meets": within(ratio, limit)}


def rss_mb(maxrss: int, platform: str = sys.platform) -> float:
    """``ru_maxrss`` in MB: kilobytes on Linux, bytes on macOS."""
    return maxrss / (1 << 20) if platform == "darwin" else maxrss / (1 << 10)


def order(rep: int) -> tuple[str, str]:
    """Who goes first in repetition ``rep``: current on even ones, baseline on odd ones."""
    return ("current", "baseline") if rep % 2 == 0 else ("baseline", "current")


def summarise(runs: dict[str, dict[str, list[dict[str, Any]]]], pages: int) -> dict[str, Any]:
    """Per path: each side's median CPU ms/page and peak RSS (MB), and the current/baseline ratios."""
    out: dict[str, Any] = {}
    for path, sides in runs.items():
        cur, base = sides["current"], sides["baseline"]
        entry: dict[str, Any] = {}
        for side, results in sides.items():
            entry[side] = {
                "cpu_ms_per_page": round(statistics.median(r["cpu_s"] for r in results) / pages * 1000, 3),
                "peak_rss_mb": round(statistics.median(r["maxrss_mb"] for r in results), 1),
                "cpu_seconds": [round(r["cpu_s"], 4) for r in results],
                "wall_seconds": [round(r["wall_s"], 4) for r in results],
                "peak_rss_mb_each": [round(r["maxrss_mb"], 1) for r in results],
                "rss_before_mb_each": [round(r["rss_before_mb"], 1) for r in results],
            }
        entry["time_ratio"] = paired_ratio([r["cpu_s"] for r in cur], [r["cpu_s"] for r in base])
        entry["rss_ratio"] = paired_ratio([r["maxrss_mb"] for r in cur], [r["maxrss_mb"] for r in base])
        # Both packages gave the same fields, links (and records) on every repetition.
        entry["same_output"] = len({r["digest"] for r in cur + base}) == 1
        out[path] = entry
    return out


def measured_figure(label: str, value: float, unit: str) -> dict[str, Any]:
    return {"label": label, "value": value, "unit": unit, "target": None, "meets": None}


def figures(summary: dict[str, Any], ref: str) -> list[dict[str, Any]]:
    """The figures for BENCHMARKS.md: each path's time per page and ratio, and peak memory."""
    figs: list[dict[str, Any]] = []
    names = {"rules": "extraction", "object": "extract_object"}
    for path in PATHS:
        s, name = summary[path], names[path]
        figs += [
            measured_figure(f"{name} CPU ms/page, current", s["current"]["cpu_ms_per_page"], "ms"),
            measured_figure(f"{name} CPU ms/page, baseline {ref}", s["baseline"]["cpu_ms_per_page"], "ms"),
            ratio_figure(f"{name} time, current / baseline", s["time_ratio"]),
        ]
    rules = summary["rules"]
    figs += [
        measured_figure("extraction peak RSS, current", rules["current"]["peak_rss_mb"], "MB"),
        measured_figure(f"extraction peak RSS, baseline {ref}", rules["baseline"]["peak_rss_mb"], "MB"),
        ratio_figure("extraction peak RSS, current / baseline", rules["rss_ratio"]),
        ratio_figure("extract_object peak RSS, current / baseline", summary["object"]["rss_ratio"]),
    ]
    return figs


def report_lines(found: dict[str, Any]) -> list[str]:
    """What the terminal shows of :func:`compare`'s result."""
    return [
        f"{path:<7} CPU ms/page {s['current']['cpu_ms_per_page']:.3f} vs {s['baseline']['cpu_ms_per_page']:.3f}"
        f" ({s['time_ratio']:.3f}x); peak RSS {s['current']['peak_rss_mb']:.1f} vs"
        f" {s['baseline']['peak_rss_mb']:.1f} MB ({s['rss_ratio']:.3f}x); same output: {s['same_output']}"
        for path in PATHS
        for s in [found[path]]
    ]


def notes(found: dict[str, Any]) -> str:
    """The sentences BENCHMARKS.md adds to the extraction notes."""
    rev = found["baseline"]
    same = all(found[p]["same_output"] for p in PATHS)
    return (
        f"Against {rev['commit'][:9]} ({rev['subject']}), current = {found['current']}: the rules engine "
        "(`Page`, `extract`, `links`) and the whole `Extractor.extract_object` on a WARC of the corpus with in-memory "
        "stores, each package in a fresh interpreter with only its own root on PYTHONPATH, the two taking turns "
        f"every repetition ({found['reps']}); CPU time of one pass over the corpus, and the child's peak RSS "
        "(`VmHWM`: interpreter, imports, corpus and extraction); ratios are current / baseline, the median of "
        "the per-repetition ratios. "
        + ("Both gave the same values on every page." if same else "The two gave different values on some page.")
    )


def unavailable_figure(ref: str, reason: str) -> dict[str, Any]:
    return {
        "label": f"extraction vs baseline {ref}",
        "value": f"not measured: {reason}",
        "unit": "",
        "target": f"≤ {LIMIT:.2f}x",
        "meets": None,
    }


# --- the parent ---------------------------------------------------------------------
def _git(*args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BaselineUnavailable(f"git {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise BaselineUnavailable(f"git {args[0]} failed: {err[-1] if err else proc.returncode}")
    return proc.stdout.decode(errors="replace").strip()


def materialise(ref: str, into: Path) -> dict[str, str]:
    """Extract ``ref``'s ``crawlstack/`` package under ``into``; its commit and subject."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "crawlstack"],
            capture_output=True,
            check=True,
            timeout=120,
        )
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            tar.extractall(into, filter="data")
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as exc:
        raise BaselineUnavailable(f"git archive {ref}: {exc}") from exc
    if not (into / "crawlstack" / "__init__.py").is_file():
        raise BaselineUnavailable(f"{ref} has no crawlstack package")
    return {"ref": ref, "commit": commit, "subject": _git("log", "-1", "--format=%s", commit)[:120]}


def current_revision() -> str:
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "crawlstack")
    except BaselineUnavailable:
        return "this checkout"
    return f"{head} + uncommitted changes in crawlstack/" if dirty else head


def write_data(data: Path, pages: list[tuple[str, bytes]], mapping: dict[str, Any], content_type: str) -> None:
    """The children's input: the corpus (pickle), the mapping (JSON), the corpus as WARCs (warm-up and whole)."""
    from crawlstack.fetch.warc import Exchange, write_warc

    def warc(subset: list[tuple[str, bytes]]) -> bytes:
        headers = [("Content-Type", content_type)]
        meta = {"crawl_id": CRAWL_ID, "depth": 0, "fetched_at": 1.7e9}
        return write_warc(
            [
                Exchange(url, "GET", [], 200, "OK", headers, body, metadata={**meta, "fp": f"fp{i}"})
                for i, (url, body) in enumerate(subset)
            ]
        )

    (data / "pages.pickle").write_bytes(pickle.dumps(pages, protocol=pickle.HIGHEST_PROTOCOL))
    (data / "mapping.json").write_text(json.dumps({"mapping": mapping, "content_type": content_type}))
    (data / "warm.warc.gz").write_bytes(warc(pages[:WARM_PAGES]))
    (data / "corpus.warc.gz").write_bytes(warc(pages))


def run_child(package_root: Path, data: Path, path: str) -> dict[str, Any]:
    """One fresh interpreter measuring one path with one package; its result dict."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(package_root)  # this package only, before the venv's (maybe editable) install
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--package-root",
        str(package_root),
        "--data",
        str(data),
        "--path",
        path,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, env=env, check=False, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BaselineUnavailable(f"{path} child: {exc}") from exc
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise BaselineUnavailable(
            f"{path} child with {package_root.name} exited {proc.returncode}: "
            f"{lines[-1][:200] if lines else 'no output'}"
        )
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def compare(
    ref: str, pages: list[tuple[str, bytes]], mapping: dict[str, Any], content_type: str, reps: int
) -> dict[str, Any]:
    """Measure the current checkout against ``ref``; raises BaselineUnavailable with the reason."""
    with tempfile.TemporaryDirectory(prefix="crawlstack-baseline-") as tmp:
        base_root, data = Path(tmp) / "baseline", Path(tmp) / "data"
        base_root.mkdir()
        data.mkdir()
        revision = materialise(ref, base_root)
        write_data(data, pages, mapping, content_type)
        roots = {"current": ROOT, "baseline": base_root}
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {p: {"current": [], "baseline": []} for p in PATHS}
        for rep in range(reps):
            for path in PATHS:
                for side in order(rep):
                    runs[path][side].append(run_child(roots[side], data, path))
        summary = summarise(runs, len(pages))
    return {"baseline": revision, "current": current_revision(), "reps": reps, "pages": len(pages), **summary}


# --- the child ----------------------------------------------------------------------
def _maxrss_mb() -> float:
    """This process's peak resident set size in MB.

    ``VmHWM`` where Linux has it: ``ru_maxrss`` there keeps the high-water mark
    of the memory the process had before its ``exec``, which for a child of
    a parent holding the corpus is the parent's peak, not the child's.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return rss_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


class _Crawls:
    def __init__(self, config: Any) -> None:
        self.config = config

    def get(self, crawl_id: str, max_age: float | None = None) -> Any:
        return self.config


class _Results:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def put(self, record: dict[str, Any]) -> None:
        self.items.append(record)


class _Blobs:
    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = dict(objects)

    def get(self, key: str, bucket: str | None = None) -> bytes:
        return self.objects[key]

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = data


class _Outcomes:
    def __init__(self) -> None:
        self.calls = 0

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None:
        self.calls += 1

    def add_note(self, crawl_id: str, fp: str, note: str) -> None:
        self.calls += 1

    def depths(self, crawl_id: str, fps: Any) -> dict[str, int]:
        """No stored depths: each page keeps the one its WARC says (a code that reads them pays the call)."""
        self.calls += 1
        return {}


def _child_rules(data: Path, spec: dict[str, Any]) -> tuple[float, float, float, str]:
    from crawlstack.rules.mapping import compile_mapping
    from crawlstack.rules.page import Page

    with open(data / "pages.pickle", "rb") as f:  # streamed: the corpus once in memory, not twice
        pages: list[tuple[str, bytes]] = pickle.load(f)
    mapping, content_type = compile_mapping("bench", spec["mapping"]), spec["content_type"]
    for url, body in pages[:WARM_PAGES]:
        page = Page(url, body, content_type)
        mapping.extract(page), mapping.links(page)
    before = _maxrss_mb()
    out = []
    cpu, wall = time.process_time(), time.perf_counter()
    for url, body in pages:
        page = Page(url, body, content_type)
        out.append((mapping.extract(page), mapping.links(page)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, before, _digest(out)


def _child_object(data: Path, spec: dict[str, Any]) -> tuple[float, float, float, str]:
    from crawlstack.config import CrawlConfig
    from crawlstack.rules import RuleSet
    from crawlstack.rules.mapping import compile_mapping

    try:
        from crawlstack.extract import Extractor
    except ImportError:  # a ref from before the extract package: its one module
        from crawlstack.extractor import Extractor  # type: ignore[no-redef]

    rules = RuleSet((compile_mapping("bench", spec["mapping"]),))
    config = CrawlConfig(crawl_id=CRAWL_ID)
    accepted = inspect.signature(Extractor).parameters

    def extractor(key: str, body: bytes) -> tuple[Any, _Results, _Blobs]:
        results, blobs = _Results(), _Blobs({key: body})
        optional: dict[str, Any] = {"outcomes": _Outcomes()}  # budget_seconds: the code's own default, as deployed
        kwargs = {k: v for k, v in optional.items() if k in accepted}
        return Extractor(_Crawls(config), results, blobs, rules, **kwargs), results, blobs

    key = f"pages/dt=2026-01-01/{CRAWL_ID}.warc.gz"
    warm, _, _ = extractor(key, (data / "warm.warc.gz").read_bytes())
    warm.extract_object("bucket", key)
    ex, results, _blobs = extractor(key, (data / "corpus.warc.gz").read_bytes())
    before = _maxrss_mb()
    cpu, wall = time.process_time(), time.perf_counter()
    out = ex.extract_object("bucket", key)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    failed = len(getattr(out, "failed", ()))
    if failed or len(results.items) != len(out.records):
        raise SystemExit(f"{failed} pages failed extraction")
    records = [{k: v for k, v in r.items() if k != "fetched_at"} for r in out.records]
    return cpu, wall, before, _digest([records, sorted(link.url for link in out.outlinks)])


def child(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one measurement of one package (run by compare())")
    parser.add_argument("--package-root", required=True, type=Path)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--path", required=True, choices=PATHS)
    args = parser.parse_args(argv)
    import crawlstack

    where = Path(crawlstack.__file__).resolve()
    if not where.is_relative_to(args.package_root.resolve()):
        raise SystemExit(f"imported crawlstack from {where}, not from {args.package_root}")
    spec = json.loads((args.data / "mapping.json").read_text())
    run = _child_rules if args.path == "rules" else _child_object
    cpu, wall, before, digest = run(args.data, spec)
    result = {"cpu_s": cpu, "wall_s": wall, "rss_before_mb": before, "maxrss_mb": _maxrss_mb(), "digest": digest}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    # Run as a script, bench/ is first on sys.path: nothing of it may stand in for a module crawlstack imports.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    raise SystemExit(child())
