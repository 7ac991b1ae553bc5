"""A crawl report's facts whose every string from a page is hostile markup (unit and browser tests share it)."""

from __future__ import annotations

from crawlstack.report.facts import CrawlFacts, Request

# Each part sets window.__xss if it ever runs as markup.
HOSTILE = "<script>window.__xss = 1</script><img src=x onerror=window.__xss=2>"


def hostile_facts() -> CrawlFacts:
    """Hostile strings as the crawl id, the source, a host, reasons, a mapping and a field."""
    facts = CrawlFacts(HOSTILE, 1.0, HOSTILE)
    for n, outcome in enumerate(("fetched", "failed", "dropped")):
        reason = None if outcome == "fetched" else f"{HOSTILE}: why {n}"
        line = {"url": f"http://{n}.test/", "outcome": outcome, "status": 200, "depth": n, "reason": reason}
        facts.add_end(line, 1_767_225_600.0 + n)
    facts.requests[HOSTILE] = [Request(1_767_225_600.0 + i, 0.1, "fetched", 200) for i in range(3)]
    facts.add_record(HOSTILE, {HOSTILE: "x", "title": ""})
    return facts
