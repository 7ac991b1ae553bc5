"""User patterns: re's meaning on the regex module; a time-out counts as no match, logged once per page."""

from __future__ import annotations

import json
import logging
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.limits import regex_flag
from crawlstack.rules import RuleSet, patterns
from crawlstack.rules.mapping import compile_mapping, compile_mapping_errors
from crawlstack.rules.page import Page
from crawlstack.rules.processors import compile_processor
from crawlstack.scope import out_of_scope

# Reported on issue 18: under re each takes seconds on these inputs, doubling
# with every added character.  The regex module's repeat guards settle both
# at once; the time-out bounds the patterns those guards do not cover.
SLUG = r"(\w+-?)+\.html$"
SLUG_HREF = "https://evil.example/" + "a" * 40 + "!.html"
LABEL = r"(\s*\w+\s*)*:"
LABEL_TEXT = "a " * 20 + "!"
# Overlapping alternatives: exponential on the regex module too.
OVERLAPPING = r"(\w|\w\w)+:"
OVERLAPPING_TEXT = "a" * 40 + "!:"
OVERLAPPING_SLUG = r"(\w|\w\w)+\.html$"


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Keeps the time-out tests quick; the path taken is the same as at 0.1 s.
    monkeypatch.setattr(settings, "USER_PATTERN_TIMEOUT_SECONDS", 0.02)
    yield


def test_the_reported_patterns_give_no_match_on_crafted_input() -> None:
    with patterns.page_context("https://seed.example/") as page:
        assert patterns.compile(SLUG).search(SLUG_HREF) is None
        assert patterns.compile(SLUG).search("https://evil.example/" + "a" * 40 + "!") is None
        assert patterns.compile(LABEL).search(LABEL_TEXT) is None
        assert patterns.compile(LABEL).sub("x", LABEL_TEXT) == LABEL_TEXT
    assert page.timeouts == 0  # settled by the engine, not by the clock


def test_a_call_that_runs_out_of_time_counts_as_no_match(short_timeout: None) -> None:
    pattern = patterns.compile(OVERLAPPING)
    with patterns.page_context("https://seed.example/") as page:
        assert pattern.search(OVERLAPPING_TEXT) is None
        assert page.timeouts == 1
        assert pattern.sub("x", OVERLAPPING_TEXT) == OVERLAPPING_TEXT
        assert page.timeouts == 2
        assert pattern.search("ab:").group(0) == "ab:"  # an ordinary input still matches
        assert page.timeouts == 2


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"^https?://(?!www\.)([\w-]+)\.tumblr\.com/", "https://staff.tumblr.com/post/1"),
        (r"^https?://(?!www\.)([\w-]+)\.tumblr\.com/", "https://www.tumblr.com/"),
        (r"(?<=\$)\d+(?=\.\d\d)", "price: $1234.50"),
        (r"(?<!x)b", "xb ab"),
        (r"\w+", "  café naïve Ωμέγα 東京"),
        (r"\b\w+\b", "straße"),
        (r"\d+", "٣٤ and 12"),
        (r"a\sb", "a\u00a0b"),
        (r"(?i)KETTLE", "a kettle"),
        (r"(?P<n>\d+)\s*min", "cook 25 min"),
    ],
)
def test_matches_as_re_does(pattern: str, text: str) -> None:
    ours, theirs = patterns.compile(pattern).search(text), re.compile(pattern).search(text)
    assert (ours and (ours.span(), ours.groups())) == (theirs and (theirs.span(), theirs.groups()))


@pytest.mark.parametrize(
    ("pattern", "replacement", "text"),
    [(r"(\d+)-(\d+)", r"\2/\1", "10-20, 3-4"), (r"(?P<w>\w+)@", r"<\g<w>>", "me@x"), (r"\s+", " ", "a \t\n b")],
)
def test_substitutes_as_re_does(pattern: str, replacement: str, text: str) -> None:
    assert patterns.compile(pattern).sub(replacement, text) == re.sub(pattern, replacement, text)


def test_a_time_out_is_logged_once_per_pattern_per_page(short_timeout: None, caplog: pytest.LogCaptureFixture) -> None:
    slow, other = patterns.compile(OVERLAPPING), patterns.compile(r"(\w\w|\w)+:")
    with caplog.at_level(logging.WARNING, logger="crawlstack.rules.patterns"):
        with patterns.page_context("https://one.example/") as page:
            for _ in range(3):
                slow.search(OVERLAPPING_TEXT)
            other.search(OVERLAPPING_TEXT)
        with patterns.page_context("https://two.example/"):
            slow.search(OVERLAPPING_TEXT)
    assert page.timeouts == 4
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert repr(OVERLAPPING) in lines[0] and "https://one.example/" in lines[0] and "no match" in lines[0]
    assert repr(r"(\w\w|\w)+:") in lines[1] and "https://one.example/" in lines[1]
    assert repr(OVERLAPPING) in lines[2] and "https://two.example/" in lines[2]


def test_outside_a_page_a_time_out_is_logged_once_per_pattern(
    short_timeout: None, caplog: pytest.LogCaptureFixture
) -> None:
    # Long and unique to this test: the log quotes it cut short, and no other test logged it.
    long_pattern = OVERLAPPING + "|" + "z" * 200 + "outside-a-page"
    pattern = patterns.compile(long_pattern)
    with caplog.at_level(logging.WARNING, logger="crawlstack.rules.patterns"):
        assert pattern.search(OVERLAPPING_TEXT) is None
        assert pattern.search(OVERLAPPING_TEXT) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "outside-a-page" not in lines[0] and "…" in lines[0]


def _slug_rules(pattern: str) -> RuleSet:
    return RuleSet(
        (compile_mapping("slug.json", {"name": "slug", "url_patterns": [{"type": "regex", "pattern": pattern}]}),)
    )


CONFIG = CrawlConfig(crawl_id="c", max_depth=3, seed_hosts=frozenset({"seed.example"}))
OFF_SITE = "off-site: not a seed host, a mapping or an allow pattern"


def test_a_crafted_off_site_href_is_no_match_for_the_reported_slug_pattern() -> None:
    with patterns.page_context("https://seed.example/") as page:
        assert out_of_scope(SLUG_HREF, 1, CONFIG, _slug_rules(SLUG)) == OFF_SITE
    assert page.timeouts == 0
    assert out_of_scope("https://other.example/a-fine-slug.html", 1, CONFIG, _slug_rules(SLUG)) is None


def test_a_scope_check_that_runs_out_of_time_is_no_match(short_timeout: None) -> None:
    href = "https://evil.example/" + "a" * 40 + "!.html"
    config = CrawlConfig(crawl_id="c", max_depth=3, seed_hosts=frozenset({"seed.example"}), allow=(OVERLAPPING_SLUG,))
    with patterns.page_context("https://seed.example/") as page:
        assert out_of_scope(href, 1, config, _slug_rules(OVERLAPPING_SLUG)) == OFF_SITE
    assert page.timeouts == 2  # the mapping's pattern, then the allow pattern


def _page_text(text: str) -> Page:
    return Page("https://seed.example/p", f"<html><body><p>{text}</p></body></html>".encode(), "text/html")


def test_a_regex_processor_on_crafted_text_yields_no_value(short_timeout: None) -> None:
    for pattern, text, timeouts in ((LABEL, LABEL_TEXT, 0), (OVERLAPPING, OVERLAPPING_TEXT, 1)):
        page = _page_text(text)
        texts = compile_processor({"type": "xpath", "parameters": {"expression": "//p/text()"}})(page, None)
        step = compile_processor({"type": "regex", "parameters": {"pattern": pattern}})
        with patterns.page_context(page.url) as context:
            assert step(page, texts) == []
        assert context.timeouts == timeouts


def test_a_replace_processor_that_runs_out_of_time_leaves_the_text(short_timeout: None) -> None:
    step = compile_processor({"type": "replace", "parameters": {"find": OVERLAPPING, "replace": "x", "regex": True}})
    with patterns.page_context("https://seed.example/p") as context:
        assert step(_page_text(""), [OVERLAPPING_TEXT]) == [OVERLAPPING_TEXT]
    assert context.timeouts == 1


def test_compile_errors_are_short_reasons() -> None:
    for pattern, reason in (
        ("(", "missing )"),
        ("(" * 5000 + ")" * 5000, "nested too deeply"),
        ("a{99999999999}", "too big"),
    ):
        with pytest.raises(patterns.COMPILE_ERRORS) as info:
            patterns.compile(pattern)
        assert reason in patterns.problem(info.value)
    _, errors = compile_mapping_errors("m.json", {"name": "m", "url_patterns": [{"type": "regex", "pattern": "a)"}]})
    assert [e.reason for e in errors] == ["invalid regex: unbalanced parenthesis at position 1"]


# Reported on issue 27: 24 characters that took all 24 GB to compile.
REPEAT_BOMB = "((a{1000}){1000}){1000}"


def _never_compiled(*args: object, **kwargs: object) -> None:
    raise AssertionError("compiled a pattern the size check should have refused")


@pytest.mark.parametrize(
    "pattern",
    [
        REPEAT_BOMB,
        "a{10001}",
        "(a{100}){101}",
        "(?:(?:a{100}){100})" * 2,  # each allowed alone; together 20,000 copies
        r"(?:(?:\b){1000}){1000}",  # zero-width atoms unroll too
        "(?:a{1000}?){1000}",  # lazy
        "(?:a{1000}+){1000}",  # possessive
        "(?x)((a{1000}) {1000}) {1000}",  # verbose: the spaces are not atoms
        "(?x)((a{1000}#)\n){1000}){1000}",  # verbose: a comment's ")" closes nothing
        "x(?i)((a{1000}){1000}){1000}",  # a global flag mid-pattern makes the engine parse again
        "a{4294967294}",  # was a MemoryError out of compile
    ],
)
def test_a_pattern_whose_repeats_unroll_past_the_limit_is_refused_before_compiling(
    monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    import regex

    monkeypatch.setattr(regex, "compile", _never_compiled)
    with pytest.raises(patterns.COMPILE_ERRORS) as info:
        patterns.compile(pattern)
    assert patterns.problem(info.value).startswith("too large")


@pytest.mark.parametrize(
    "pattern",
    [r"\d{4}-\d{2}", "(a{100}){100}", "a{10000}", "[a-z]{2,30}", r"\p{L}{1,500}", "(?:(?:){1000}){1000}", "[(]{9000}"],
)
def test_ordinary_counted_repeats_compile(pattern: str) -> None:
    assert patterns.compile(pattern).pattern == pattern


def _cli_within_1_gib(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess whose memory is capped, so a pattern that compiles to gigabytes fails it fast."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    exe = Path(sys.executable).parent / "crawlstack"
    return subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60, check=False, preexec_fn=cap)


def test_rules_validate_refuses_a_repeat_bomb_in_one_line(tmp_path: Path) -> None:
    mapping = {
        "name": "bomb",
        "url_patterns": [{"type": "regex", "pattern": REPEAT_BOMB}],
        "fields": [{"name": "t", "processors": [{"type": "regex", "parameters": {"pattern": REPEAT_BOMB}}]}],
    }
    (tmp_path / "bomb.json").write_text(json.dumps(mapping), encoding="utf-8")
    proc = _cli_within_1_gib("rules", "validate", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert [line.split(": ", 2)[2] for line in lines] == [
        "url_patterns[0].pattern: invalid regex: too large (its counted repeats stand for over 10,000 copies)",
        "fields[0].processors[0].parameters.pattern: invalid regex: too large (its counted repeats stand for over "
        "10,000 copies)",
    ]


@pytest.mark.parametrize("flag", ["--allow", "--deny"])
def test_crawl_refuses_a_repeat_bomb_in_allow_or_deny_before_anything_is_written(tmp_path: Path, flag: str) -> None:
    out = tmp_path / "out"
    proc = _cli_within_1_gib("crawl", "--local", flag, REPEAT_BOMB, "--out", str(out), "http://127.0.0.2/")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"crawlstack crawl: error: argument {flag}: invalid regex '{REPEAT_BOMB}': too large (its counted repeats "
        "stand for over 10,000 copies)"
    )
    assert "Traceback" not in proc.stderr and not out.exists()


def test_the_cli_validates_allow_and_deny_with_the_crawl_engine() -> None:
    # A variable-width lookbehind: re refuses it, the crawl's engine runs it.
    assert regex_flag(r"(?<=/(?:b|books)/)\d+$") == r"(?<=/(?:b|books)/)\d+$"
    assert patterns.compile(r"(?<=/(?:b|books)/)\d+$").search("https://x.example/books/12") is not None


def test_a_call_that_timed_out_waiting_for_the_cpu_gets_a_second_go(short_timeout: None) -> None:
    """The timeout is wall-clock time: on a busy machine an ordinary match can run out of it off the CPU."""
    from crawlstack.rules.patterns import _bounded

    calls: list[float] = []

    def descheduled_then_fine(timeout: float) -> str:
        calls.append(timeout)
        if len(calls) == 1:
            raise TimeoutError  # no CPU spent: it was waiting, not backtracking
        return "matched"

    assert _bounded(descheduled_then_fine) == "matched"
    assert len(calls) == 2


def test_a_call_that_spent_its_time_backtracking_is_not_tried_again(short_timeout: None) -> None:
    from crawlstack.rules.patterns import _bounded

    calls: list[float] = []

    def backtracking(timeout: float) -> str:
        calls.append(timeout)
        spent = time.thread_time()
        while time.thread_time() - spent < timeout:  # CPU, as a backtracking match burns it
            pass
        raise TimeoutError

    with pytest.raises(TimeoutError):
        _bounded(backtracking)
    assert len(calls) == 1
