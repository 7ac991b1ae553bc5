"""Helpers for the integration tests: small generated sites, mapping rules, politeness checks.

Sites are plain ``path -> response`` dicts for :class:`crawlstack.demo.server.LoopbackWeb`;
``{{url:127.0.0.3}}`` in a body becomes that host's base URL when served.
"""

from __future__ import annotations

import html as htmllib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crawlstack.demo.server import LoggedRequest, LoopbackWeb, Response

# The product token is "crawlstack", so robots.txt groups for "crawlstack" apply.
UA = "crawlstack/9.9-itest (+https://example.invalid/bot)"
# Clock granularity and scheduling slack allowed in timing checks, seconds.
SLACK = 0.010
ALLOW_LOOPBACK = ("--allow-private", "127.0.0.0/8")


def page(title: str, links: Iterable[str] = (), body: str = "", *, link_class: str | None = None) -> str:
    """An HTML page with an <h1> title, optional extra body HTML and one <a> per link."""
    cls = f' class="{link_class}"' if link_class else ""
    items = "\n".join(f'<li><a{cls} href="{htmllib.escape(href)}">{htmllib.escape(href)}</a></li>' for href in links)
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{htmllib.escape(title)}</title></head>\n"
        f"<body>\n<h1>{htmllib.escape(title)}</h1>\n{body}\n<ul>\n{items}\n</ul>\n</body></html>\n"
    )


def star_site(n: int, *, prefix: str = "/p", index: str = "/", delay: float = 0.0) -> dict[str, Any]:
    """``index`` links to ``n`` pages ``{prefix}1.html``..; each page links back to the index and to the next page."""
    paths = [f"{prefix}{i}.html" for i in range(1, n + 1)]
    routes: dict[str, Any] = {index: page("index", paths)}
    for i, path in enumerate(paths):
        links = [index] + ([paths[i + 1]] if i + 1 < n else [])
        routes[path] = Response(page(f"page {i + 1}", links), delay=delay)
    return routes


def chain_site(n: int, *, prefix: str = "/d") -> dict[str, Any]:
    """``{prefix}0.html`` -> ``{prefix}1.html`` -> ... -> ``{prefix}{n-1}.html``; page k is at depth k from page 0."""
    routes: dict[str, Any] = {}
    for i in range(n):
        links = [f"{prefix}{i + 1}.html"] if i + 1 < n else []
        routes[f"{prefix}{i}.html"] = page(f"depth {i}", links)
    return routes


def allow_ports(web: LoopbackWeb, *addresses: str) -> list[str]:
    """``--allow-port`` flags for hosts a crawl reaches without seeding them (ports other than 80/443 need allowing)."""
    return [flag for address in addresses for flag in ("--allow-port", str(web.hosts[address].port))]


def robots(text: str, status: int = 200) -> Response:
    return Response(text, status=status, content_type="text/plain; charset=utf-8")


# --- mapping rules -----------------------------------------------------------
def xpath_chain(expression: str, *, trim: bool = True) -> list[dict[str, Any]]:
    chain: list[dict[str, Any]] = [{"type": "xpath", "parameters": {"expression": expression}}]
    if trim:
        chain.append({"type": "trim", "parameters": {}})
    return chain


def mapping(
    name: str,
    patterns: str | Sequence[str],
    fields: Mapping[str, str] | None = None,
    url_parsers: Sequence[str] = (),
) -> dict[str, Any]:
    """A mapping rule: regex url patterns, ``field name -> xpath`` (trimmed) and url parser xpaths."""
    if isinstance(patterns, str):
        patterns = [patterns]
    return {
        "name": name,
        "url_patterns": [{"type": "regex", "pattern": p} for p in patterns],
        "url_parsers": [
            {"description": f"links {i}", "processors": xpath_chain(expr, trim=False)}
            for i, expr in enumerate(url_parsers)
        ],
        "fields": [{"name": fname, "processors": xpath_chain(expr)} for fname, expr in (fields or {}).items()],
    }


def write_rules(directory: Path, mappings: Iterable[Mapping[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for m in mappings:
        (directory / f"{m['name']}.json").write_text(json.dumps(m, indent=2), encoding="utf-8")
    return directory


def host_pattern(address: str, path_regex: str = "/.*") -> str:
    """A port-independent url pattern for ``address`` and a path regex."""
    return r"^https?://" + address.replace(".", r"\.") + r"(:\d+)?" + path_regex + "$"


# --- judging from the server log ---------------------------------------------
def page_requests(web: LoopbackWeb, host: str) -> list[LoggedRequest]:
    """Requests to ``host`` other than /robots.txt."""
    return [e for e in web.requests_for(host) if e.bare_path != "/robots.txt"]


def bare_paths(web: LoopbackWeb, host: str) -> list[str]:
    return [e.bare_path for e in web.requests_for(host)]


def describe(entries: Sequence[LoggedRequest]) -> str:
    """The log as text, for assertion messages: arrival offsets, durations and paths."""
    if not entries:
        return "(no requests)"
    t0 = entries[0].arrived
    lines = []
    for e in entries:
        took = f"{e.finished - e.arrived:.3f}" if e.finished is not None else "?"
        lines.append(f"  +{e.arrived - t0:7.3f}s  took {took}s  {e.method} {e.host}{e.path} -> {e.status}")
    return "\n".join(lines)


def check_spacing(entries: Sequence[LoggedRequest], delay: float, slack: float = SLACK) -> list[str]:
    """Problems with one host's requests: arrivals closer than ``delay``, or overlapping requests."""
    problems = []
    ordered = sorted(entries, key=lambda e: e.arrived)
    for prev, cur in itertools.pairwise(ordered):
        gap = cur.arrived - prev.arrived
        if gap < delay - slack:
            problems.append(f"{cur.path} arrived {gap:.3f}s after {prev.path} (delay {delay}s)")
        if delay > 0 and (prev.finished is None or cur.arrived < prev.finished - slack):
            problems.append(f"{cur.path} arrived while {prev.path} was still in flight")
    return problems


def assert_spacing(web: LoopbackWeb, host: str, delay: float) -> None:
    entries = web.requests_for(host)
    problems = check_spacing(entries, delay)
    assert not problems, "\n".join(problems) + "\n" + describe(entries)


def span(entries: Sequence[LoggedRequest]) -> float:
    """Seconds from the first arrival to the last finish."""
    if not entries:
        return 0.0
    return max((e.finished or e.arrived) for e in entries) - min(e.arrived for e in entries)


def one(value: Any) -> Any:
    """A field value that may come as a one-element list, unwrapped."""
    if isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


# --- crawl results -----------------------------------------------------------
def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class CrawlResult:
    argv: list[str]
    exit_code: int
    out: Path
    elapsed: float
    records: list[dict[str, Any]]
    log: list[dict[str, Any]]
    summary: dict[str, Any] | None
    warc_files: list[Path]
    output: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def log_entries(self, url: str) -> list[dict[str, Any]]:
        return [e for e in self.log if e.get("url") == url]

    def log_entry(self, url: str) -> dict[str, Any]:
        entries = self.log_entries(url)
        assert len(entries) == 1, f"expected one crawl-log line for {url}, got {entries}\n{self.log_text()}"
        return entries[0]

    def outcome(self, url: str) -> str | None:
        entries = self.log_entries(url)
        return entries[0].get("outcome") if entries else None

    def records_for(self, mapping: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("mapping") == mapping]

    def record(self, url: str) -> dict[str, Any]:
        found = [r for r in self.records if r.get("url") == url]
        assert len(found) == 1, f"expected one record for {url}, got {found}"
        return found[0]

    def log_text(self) -> str:
        return "crawl-log.jsonl:\n" + "\n".join("  " + json.dumps(e, sort_keys=True) for e in self.log)


class Crawl(Protocol):
    def __call__(
        self,
        *seeds: str,
        rules: Sequence[dict[str, Any]] | Path | None = None,
        delay: float | None = 0.2,
        max_depth: int | None = None,
        max_pages: int | None = None,
        user_agent: str | None = UA,
        seeds_file: Path | None = None,
        extra: Sequence[str] = (),
        use_subprocess: bool = False,
        expect_exit: int | None = 0,
        server: LoopbackWeb | None = None,
    ) -> CrawlResult: ...
