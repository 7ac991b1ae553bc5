"""OUT/report.html in a real headless browser: Debian's chromium through chromedriver (``make setup``).

The report of a real loopback crawl loads with no console error (its
Content-Security-Policy refuses every network request, so one would show
as an error), every plot holds data points, and a screenshot is saved to
``artifacts/report.png``.  A report whose every page string is hostile
runs none of them: they are shown as text.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_report import HOSTILE, hostile_facts
from webs import Crawl, host_pattern, mapping, page, star_site

from crawlstack.demo.server import LoopbackWeb
from crawlstack.report import render

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
A, B = "127.0.0.2", "127.0.0.3"
PLOTS = ("pages", "statuses", "timeline", "gaps", "depths", "coverage", "reasons", "slowest")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "Debian's chromium and chromium-driver are missing: run `make setup`"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()


def load(browser: Any, path: Path) -> list[dict[str, Any]]:
    """Open the file, wait until every plot is drawn; the console's errors."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # drop what an earlier page left
    browser.get(path.as_uri())
    WebDriverWait(browser, 30).until(
        lambda b: b.execute_script(
            "return document.readyState === 'complete' && "
            "[...document.querySelectorAll('.js-plotly-plot')].every(p => p._fullLayout)"
        )
    )
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def test_a_crawls_report_loads_cleanly_and_every_plot_has_points(crawl: Crawl, web: LoopbackWeb, browser: Any) -> None:
    web.add_host(
        A, {**star_site(4), "/script.html": page("<script>window.__xss = 3</script>", [f"http://{A}:9/closed"])}
    )
    web.add_host(B, star_site(3))
    rules = [mapping("page", host_pattern(A, r"/p\d+\.html"), {"title": "//h1/text()", "missing": "//h2/text()"})]
    result = crawl(web.url(A, "/"), web.url(B, "/"), web.url(A, "/script.html"), rules=rules)
    report = result.out / "report.html"
    assert report.is_file(), "a local crawl writes OUT/report.html"

    errors = load(browser, report)
    assert errors == [], errors
    points = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('section')].map(s => {"
        "  const plot = s.querySelector('.js-plotly-plot');"
        "  if (!plot) return [s.id, 0];"
        "  return [s.id, plot.data.reduce((n, t) => n + (t.z ? t.z.flat().length : (t.x || []).length), 0)];"
        "}))"
    )
    assert set(points) == set(PLOTS) and all(points[p] > 0 for p in PLOTS), points
    drawn = browser.execute_script("return document.querySelectorAll('.plot-container .point, .hm').length")
    assert drawn > 0, "plotly drew no marks"
    assert browser.execute_script("return window.__xss") is None
    ARTIFACTS.mkdir(exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1200, min(int(height) + 50, 8000))
    assert browser.save_screenshot(str(ARTIFACTS / "report.png"))


def test_hostile_strings_stay_text_in_the_browser(tmp_path: Path, browser: Any) -> None:
    facts = hostile_facts()
    path = tmp_path / "report.html"
    path.write_text(render(facts), encoding="utf-8")

    errors = load(browser, path)
    assert errors == [], errors
    assert browser.execute_script("return window.__xss") is None
    assert browser.execute_script("return document.querySelectorAll('body img').length") == 0
    assert HOSTILE in browser.execute_script("return document.querySelector('h1').textContent")
    labels = browser.execute_script(
        "return [...document.querySelectorAll('#reasons .ytick text')].map(t => t.textContent)"
    )
    assert any(HOSTILE in label for label in labels), json.dumps(labels)
