"""Security audit: S3 keys from hashes only, no page body in logs, no credentials in the repository,
and rules files that are data, never code."""

from __future__ import annotations

import gzip
import logging
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from fakes import FakeBacklog, FakeBlobs, FakeClock, FakeCrawls, FakeHosts, FakeResults, FakeRuns, FakeUrls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstack.config import CrawlConfig
from crawlstack.demo.server import LoggedRequest, LoopbackWeb, Response
from crawlstack.extract import Extractor, records_key
from crawlstack.fetch.crawllog import crawl_log_objects
from crawlstack.fetch.host_runner import HostRunner
from crawlstack.fetch.outcomes import Fetched, failure_class, warc_key
from crawlstack.fetch.warc import Exchange, write_warc
from crawlstack.lambdas.redact import secret_value
from crawlstack.messages import FetchTask, RunMessage
from crawlstack.ports import RobotsRecord
from crawlstack.rules import Page, RuleSet, RulesInvalid, load_rules
from crawlstack.rules.mapping import compile_mapping
from crawlstack.urls import fingerprint, host_of, origin_of

ROOT = Path(__file__).resolve().parents[2]
MARKER = "PAGEBODY-7f3aQ"

# --- S3 keys come from hashes ---------------------------------------------------------
HOSTILE_URLS = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda host, path: f"http://{host}/{path}",
        st.sampled_from(["example.com", "bücher.example", "[::1]", "a.b", "..", "%2F"]),
        st.lists(
            st.sampled_from(["..", "../", "/", "%2F", "%2e%2e", "\\", "é", "x=y", "crawl_id=evil", "dt=1999", "\x00"])
            | st.text(max_size=6),
            max_size=8,
        ).map("".join),
    ),
)
CRAWL_IDS = st.one_of(
    st.sampled_from(["c", "local", "a/b", "../..", "x=y", "crawl_id=evil/dt=1999", "%2F", "é", ""]),
    st.text(max_size=20),
)
DAY = r"dt=\d{4}-\d{2}-\d{2}"
WARC_KEY = re.compile(rf"pages/{DAY}/[0-9a-f]{{24}}\.warc\.gz")
ID = r"crawl_id=(?P<id>[A-Za-z0-9._~%-]*)"
RECORDS_KEY = re.compile(rf"records/{ID}/{DAY}/[0-9a-f]{{24}}\.jsonl\.gz")
CRAWL_LOG_KEY = re.compile(rf"crawl-log/{ID}/{DAY}/[0-9a-f]{{24}}\.jsonl\.gz")


def _task(url: str, crawl_id: str) -> FetchTask:
    return FetchTask(url=url, fp=fingerprint(url), host=host_of(url), depth=0, crawl_id=crawl_id, not_before=0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(HOSTILE_URLS, CRAWL_IDS), min_size=1, max_size=4), st.floats(0, 4e9))
def test_keys_hold_no_url_derived_text(pages: list[tuple[str, str]], now: float) -> None:
    tasks = [_task(url, crawl_id) for url, crawl_id in pages]
    key = warc_key(tasks, now)
    assert WARC_KEY.fullmatch(key), key
    for _, crawl_id in pages:
        match = RECORDS_KEY.fullmatch(records_key(key, crawl_id))
        assert match and unquote(match["id"]) == crawl_id
    fetched = [Fetched(task, "fetched", 200) for task in tasks]
    for log_key in crawl_log_objects(fetched, now):
        match = CRAWL_LOG_KEY.fullmatch(log_key)
        assert match and unquote(match["id"]) in {c for _, c in pages}


def test_the_extract_path_writes_only_hashed_keys() -> None:
    # End to end on the fakes: pages with hostile URLs and crawl ids, every object written.
    book = compile_mapping(
        "b.json",
        {
            "name": "any",
            "url_patterns": [{"type": "regex", "pattern": "."}],
            "fields": [{"name": "t", "processors": [{"type": "xpath", "parameters": {"expression": "//h1"}}]}],
        },
    )
    blobs = FakeBlobs()
    extractor = Extractor(FakeCrawls(), FakeResults(), blobs, RuleSet((book,)))
    urls = ["http://example.com/../../etc/passwd", "http://example.com/a%2F..%2Fb?x=/../", "http://bücher.example/é/"]
    exchanges = [
        Exchange(url, "GET", [], 200, "OK", [("Content-Type", "text/html")], b"<h1>x</h1>", metadata={"crawl_id": cid})
        for url, cid in zip(urls, ["../..", "a/b=c", "crawl_id=x/dt=1"], strict=True)
    ]
    key = warc_key([_task(e.url, e.metadata["crawl_id"]) for e in exchanges], 1_700_000_000)
    blobs.put(key, write_warc(exchanges), "application/warc")
    out = extractor.extract_object(blobs.bucket, key)
    assert len(out.records) == 3
    assert sorted(blobs.keys()) == sorted([key, *out.records_keys])
    assert all(RECORDS_KEY.fullmatch(k) for k in out.records_keys)


# --- no page body in any log line -------------------------------------------------------
def _fetch_through_a_web(
    pages: dict[str, Response], allow_private: tuple[str, ...] = ("127.0.0.0/8",), robots_cached: bool = True
) -> tuple[list[Fetched], FakeBlobs, list[LoggedRequest]]:
    """Fetch every page of a loopback host with the real HTTP client, in host runs on the fakes."""
    clock = FakeClock(time.time())  # the real client stamps its responses with the real time
    with LoopbackWeb({"127.0.0.2": pages}) as web:
        urls, blobs, runs, backlog, hosts = FakeUrls(), FakeBlobs(), FakeRuns(), FakeBacklog(), FakeHosts(clock)
        config = CrawlConfig(crawl_id="c", delay=0.0, user_agent="crawlstack/test", allow_private=allow_private)
        runner = HostRunner(
            runs, backlog, urls, FakeCrawls(config), blobs, hosts, clock=clock, sleep=clock.sleep, jitter=lambda: 0.5
        )
        tasks = []
        for path in pages:
            url = web.url("127.0.0.2", path)
            urls.claim("c", fingerprint(url), url, 0, claimer=f"m-{path}")
            tasks.append(FetchTask(url, fingerprint(url), host_of(url), 0, "c", 0.0))
        host = tasks[0].host
        if robots_cached:
            hosts.put_robots(RobotsRecord.from_fetch(origin_of(tasks[0].url), 404, b""))
        backlog.add(host, 0, tasks)
        assert runs.schedule(host, "run-1", clock.now, clock.now + 3600)
        result = runner.run([RunMessage(host, "run-1")], clock.now + 300)
        requests = web.log
    assert not result.errors
    assert {f.task.url for f in result.fetched} == {t.url for t in tasks}  # every page had an outcome
    return result.fetched, blobs, requests


def test_no_page_body_reaches_a_log_line(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    body = f"<html><h1>{MARKER}</h1><a href='/{MARKER}'>x</a><p>{MARKER * 50}</p></html>"
    pages = {
        "/ok.html": Response(body),
        "/error.html": Response(body, status=500),
        "/gone.html": Response(body, status=404),
        "/moved.html": Response(body, status=301, headers={"Location": "/ok.html"}),
        "/binary.html": Response(b"\x00\x01\x02" + MARKER.encode() + b"\xff" * 600),
        "/corrupt.html": Response(MARKER * 20, headers={"Content-Encoding": "gzip"}),
        "/bad-type": Response(MARKER, content_type=f"{MARKER}/{MARKER}"),
    }
    with caplog.at_level(logging.DEBUG):
        fetched, blobs, _ = _fetch_through_a_web(pages)
        # Every outcome line a handler logs is made of these fields.
        for item in fetched:
            assert MARKER not in f"{item.task.url} {item.outcome} {item.status} {item.reason}"
        # Extract the same pages with a mapping whose every step fails, quoting what it was given,
        # as a library's exception message may.
        mapping = compile_mapping(
            "m.json",
            {
                "name": "m",
                "url_patterns": [{"type": "regex", "pattern": "."}],
                "url_parsers": [{"processors": [{"type": "xpath", "parameters": {"expression": "//a/@href"}}]}],
                "fields": [
                    {"name": "h1", "processors": [{"type": "xpath", "parameters": {"expression": "//h1"}}]},
                    {"name": "n", "processors": [{"type": "css", "parameters": {"selector": "p"}}, {"type": "trim"}]},
                ],
            },
        )
        extractor = Extractor(FakeCrawls(CrawlConfig(crawl_id="c")), FakeResults(), blobs, RuleSet((mapping,)))
        for key in blobs.keys("pages/"):
            assert extractor.extract_object(blobs.bucket, key).records  # the marker is in the data...

        def quoting(value: Any) -> str:
            raise ValueError(f"cannot read {value}: {Page('http://x/', body.encode()).text}")

        monkeypatch.setattr("crawlstack.rules.processors._xpath_results", quoting)
        for key in blobs.keys("pages/"):
            extractor.extract_object(blobs.bucket, key)
    messages = [r.getMessage() for r in caplog.records]
    assert any("failed on" in m for m in messages)  # the failing steps were logged...
    assert MARKER not in caplog.text  # ...without what they quoted


# --- the address guard in host runs -------------------------------------------------------
def test_a_private_address_is_never_requested_unless_the_crawl_allows_it() -> None:
    pages = {"/ok.html": Response("<p>ok</p>"), "/other.html": Response("<p>other</p>")}
    fetched, blobs, requests = _fetch_through_a_web(pages, allow_private=())
    assert requests == []  # not a single connection reached the host
    for item in fetched:
        assert item.outcome == "failed" and item.status is None
        assert item.reason.startswith("address 127.0.0.2 is not public (use --allow-private to allow it)")
        assert failure_class(item.reason) == "address_refused"
    assert blobs.keys("pages/") == []
    # Allowed, the same pages are fetched.
    fetched, _, requests = _fetch_through_a_web(pages)
    assert {item.outcome for item in fetched} == {"fetched"} and len(requests) == 2


def test_robots_txt_of_a_private_address_is_never_requested_and_skips_the_host() -> None:
    pages = {"/ok.html": Response("<p>ok</p>")}
    [item], _, requests = _fetch_through_a_web(pages, allow_private=(), robots_cached=False)
    assert requests == []
    assert item.outcome == "skipped" and item.reason.startswith("address 127.0.0.2 is not public")
    # Allowed, the host's robots.txt is asked for first, as its run's first request.
    [item], _, requests = _fetch_through_a_web(pages, robots_cached=False)
    assert item.outcome == "fetched" and [r.path for r in requests] == ["/robots.txt", "/ok.html"]


# --- no credentials in code or config ------------------------------------------------------
_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[0-9A-Z]{16}\b")
_PRIVATE_KEY = re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH )?PRIVATE KEY-----")
_ASSIGNED = re.compile(
    r"(?i)(?P<name>[a-z_]*(?:secret|password|passwd|token|api_?key|access_?key|credential)[a-z_]*)"
    r"[\"']?\s*[:=]\s*[\"'](?P<value>[^\"'\s]{8,})[\"']"
)
# The fake credentials moto and the tests use.
_ALLOWED_VALUES = {"testing", "test", "fake", "dummy", "REDACTED"}


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    out = []
    for name in names.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file() and path.suffix not in {".gz", ".png", ".ico", ".jpg", ".woff", ".woff2"}:
            out.append(path)
    return out


def _findings(text: str) -> list[str]:
    found = [m.group(0) for m in _KEY_ID.finditer(text)]
    found += [m.group(0) for m in _PRIVATE_KEY.finditer(text)]
    for match in _ASSIGNED.finditer(text):
        value = match["value"]
        if value not in _ALLOWED_VALUES and secret_value(value):
            found.append(f"{match['name']}=…")
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    key_id = "AKIA" + "Z" * 16
    documented = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # AWS docs example
    assert _findings(f"aws_access_key_id = {key_id}") == [key_id]
    assert _findings(f'AWS_SECRET_ACCESS_KEY="{documented}"') == ["AWS_SECRET_ACCESS_KEY=…"]
    # Built here, so the scan of this very file finds nothing.
    assert _findings('"api_' + 'key": "Zk3mQ9vT2xLp7RwB4nYc8HdF"')
    assert _findings("-----BEGIN RSA " + "PRIVATE KEY-----")
    assert _findings('aws_secret_access_key="testing"\npassword = "REDACTED"\ntoken: "short"') == []


def test_no_credentials_in_tracked_files() -> None:
    files = _tracked_text_files()
    assert len(files) > 50 and ROOT / "crawlstack" / "aws" / "clients.py" in files
    problems = []
    for path in files:
        text = path.read_bytes().decode("utf-8", "replace")
        problems += [f"{path.relative_to(ROOT)}: {finding}" for finding in _findings(text)]
    assert problems == []


# --- rules files are data ---------------------------------------------------------------
PAYLOADS = [
    "__import__('os').system('touch {sentinel}')",
    "eval(compile('open(\"{sentinel}\", \"w\")', 'x', 'exec'))",
    "exec('import os; os.system(\"touch {sentinel}\")')",
    "{{{{ ''.__class__.__mro__[1].__subclasses__() }}}}",
    "${{{{7*7}}}}",
    "%(sentinel)s",
]


def _chains(payload: str) -> list[list[dict[str, Any]]]:
    """Every place a rules file holds an expression, each given the payload."""
    xp = {"type": "xpath", "parameters": {"expression": "//p/text()"}}
    return [
        [{"type": "regex", "parameters": {"pattern": re.escape(payload)}}],
        [xp, {"type": "regex", "parameters": {"pattern": payload.replace("(", "\\(").replace(")", "\\)")}}],
        [xp, {"type": "replace", "parameters": {"find": "x", "replace": payload}}],
        [xp, {"type": "replace", "parameters": {"find": "(x)", "replace": payload.replace("\\", ""), "regex": True}}],
        [{"type": "xpath", "parameters": {"expression": f"//p[contains(., {payload!r:})]"}}],
        [{"type": "xpath", "parameters": {"expression": f"string({payload!r:})"}}],
        [{"type": "css", "parameters": {"selector": f"p[title={payload!r:}]"}}],
        [{"type": "jsonpath", "parameters": {"expression": f"$[?(@.a == {payload!r:})]"}}],
        [{"type": "jsonpath", "parameters": {"expression": f"$.{payload}"}}],
        [{"type": "parse_date", "parameters": {"format": payload.replace("%", "%%")}}],
        [{"type": "default", "parameters": {"value": payload}}],
        [xp, {"type": "split", "parameters": {"separator": payload}}],
    ]


class _Audit:
    """Python's audit events while ``active``: what running code, a shell or a socket would raise."""

    WATCHED = ("exec", "compile", "os.system", "subprocess.Popen", "os.posix_spawn", "os.exec", "socket.connect")
    # ply (inside jsonpath-ng) runs exec("import <its own package>") to find its parse tables on
    # every parse: a fixed string of its own, never a rules file's text.
    OWN_CODE = ("jsonpath_ng/_ply/",)

    def __init__(self) -> None:
        self.active = False
        self.events: list[str] = []
        sys.addaudithook(self.hook)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not (self.active and event.startswith(self.WATCHED)):
            return
        frame = sys._getframe(1)
        while frame is not None:
            if any(part in frame.f_code.co_filename.replace("\\", "/") for part in self.OWN_CODE):
                return
            frame = frame.f_back  # type: ignore[assignment]
        self.events.append(event)


_audit = _Audit()


def test_the_audit_sees_code_run() -> None:
    _audit.events.clear()
    _audit.active = True
    try:
        eval("1 + 1")
    finally:
        _audit.active = False
    assert "exec" in _audit.events or "compile" in _audit.events
    _audit.events.clear()


def test_expressions_in_rules_are_data_never_code(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    page_html = Page("http://example.com/", b"<html><p title='t'>x</p></html>", "text/html")
    page_json = Page("http://example.com/j", b'{"a": 1, "b": [1, 2]}', "application/json")
    # Warm: the processors' lazy imports run library code, not the rules'.
    import charset_normalizer  # noqa: F401
    import cssselect  # noqa: F401
    import dateutil.parser  # noqa: F401
    import jsonpath_ng.ext  # noqa: F401

    datetime.strptime("2001", "%Y")  # imports _strptime
    load_rules(ROOT / "rules")
    _audit.events.clear()
    compiled = 0
    for raw in PAYLOADS:
        payload = raw.format(sentinel=sentinel)
        for chain in _chains(payload):
            data = {
                "name": "evil",
                "url_patterns": [{"type": "regex", "pattern": re.escape(payload)}],
                "fields": [{"name": "f", "processors": chain}],
            }
            _audit.active = True
            try:
                mapping = compile_mapping("evil.json", data)
                compiled += 1
                for page in (page_html, page_json):
                    mapping.extract(page)
                    mapping.matches(f"http://example.com/{payload}")
            except (RulesInvalid, ValueError):
                pass  # refused as an invalid expression: data too
            finally:
                _audit.active = False
    assert compiled > len(PAYLOADS) * 6  # most were accepted as the strings they are
    assert not sentinel.exists()
    assert _audit.events == []


@pytest.mark.parametrize(
    "expression",
    [
        "python:eval('1')",
        "php:function('system', 'id')",
        "document('/etc/passwd')",
        "exsl:node-set('x')",
        "re:test(., 'x')",
        "system('id')",
        "eval('1')",
        "unparsed-text('/etc/passwd')",
    ],
)
def test_xpath_has_no_extension_functions(expression: str) -> None:
    with pytest.raises(ValueError, match="invalid XPath"):
        compile_mapping(
            "x.json",
            {
                "name": "x",
                "url_patterns": [{"type": "regex", "pattern": "x"}],
                "fields": [{"name": "f", "processors": [{"type": "xpath", "parameters": {"expression": expression}}]}],
            },
        )


def test_xml_pages_expand_no_entities_and_fetch_nothing() -> None:
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">'
        b'<!ENTITY y SYSTEM "http://127.0.0.1:1/evil"><!ENTITY z "zz">]><r><a>&x;</a><b>&y;</b><c>&z;</c></r>'
    )
    _audit.events.clear()
    _audit.active = True
    try:
        page = Page("http://example.com/feed.xml", evil, "application/xml")
        texts = page.tree.xpath("//text()") if page.tree is not None else []
    finally:
        _audit.active = False
    assert "root:" not in "".join(map(str, texts))
    assert _audit.events == []


def test_gzip_records_of_a_crawl_hold_the_marker_as_data() -> None:
    # Counterpart of the log test: the records object is the user's data and keeps the page's text.
    blobs = FakeBlobs()
    mapping = compile_mapping(
        "m.json",
        {
            "name": "m",
            "url_patterns": [{"type": "regex", "pattern": "."}],
            "fields": [{"name": "h1", "processors": [{"type": "xpath", "parameters": {"expression": "//h1"}}]}],
        },
    )
    url = "http://example.com/?token=abc"
    html = f"<h1>{MARKER}</h1>".encode()
    blobs.put("pages/dt=2024-01-02/x.warc.gz", write_warc([Exchange(url, "GET", [], 200, "OK", [], html)]), "")
    out = Extractor(FakeCrawls(), FakeResults(), blobs, RuleSet((mapping,))).extract_object(
        blobs.bucket, "pages/dt=2024-01-02/x.warc.gz"
    )
    text = gzip.decompress(blobs.get(out.records_keys[0])).decode()
    assert MARKER in text and "token=abc" in text
