"""The end-of-crawl summary's reasons and hints (``crawlstack.report.endings``)."""

from __future__ import annotations

from crawlstack.fetch.addresses import REFUSAL
from crawlstack.report.endings import TOP_REASONS, Endings, reason_class


def test_a_reason_is_classed_without_the_url_or_value_it_names() -> None:
    assert reason_class("off-site: not a seed host, a mapping or an allow pattern") == "off-site"
    assert reason_class("invalid URL: scheme 'javascript' is not http or https") == "invalid URL"
    assert reason_class("port 8081 is not allowed") == "port 8081 is not allowed"
    assert reason_class("503 Service Unavailable after 3 attempts") == "503 Service Unavailable after 3 attempts"
    refused = f"address 10.0.0.1 {REFUSAL}: 10.0.0.0/8 private"
    assert reason_class(refused) == reason_class(f"address 192.168.1.1 {REFUSAL}: 192.168.0.0/16 private")


def test_the_top_reasons_are_counted_per_outcome_most_frequent_first() -> None:
    endings = Endings()
    for n in range(3):
        endings.add({"url": f"u{n}", "outcome": "dropped", "reason": f"trap: segment 'a' occurs {n} times"})
    endings.add({"url": "v", "outcome": "dropped", "reason": "port 81 is not allowed"})
    endings.add({"url": "w", "outcome": "skipped", "reason": "robots: disallowed by robots.txt"})
    endings.add({"url": "x", "outcome": "fetched", "status": 200})  # no reason: not a line here
    assert endings.top() == {"dropped": [("trap", 3), ("port 81 is not allowed", 1)], "skipped": [("robots", 1)]}


def test_only_the_most_frequent_reasons_are_kept_in_the_top() -> None:
    endings = Endings()
    for n in range(TOP_REASONS + 3):
        for _ in range(n + 1):
            endings.add({"url": "u", "outcome": "failed", "reason": f"{500 + n} Server Error after 3 attempts"})
    top = endings.top()["failed"]
    assert len(top) == TOP_REASONS and top[0] == (
        f"{500 + TOP_REASONS + 2} Server Error after 3 attempts",
        TOP_REASONS + 3,
    )


def test_each_guard_that_kept_urls_out_names_its_flag() -> None:
    endings = Endings(off_site=7)
    endings.add({"url": "a", "outcome": "skipped", "reason": f"address 127.0.0.2 {REFUSAL}: 127.0.0.0/8 loopback"})
    for port in (8081, 8081, 9000):
        endings.add({"url": "b", "outcome": "dropped", "reason": f"port {port} is not allowed"})
    hints = endings.guard_hints()
    assert len(hints) == 3
    assert "--allow-private" in hints[0] and hints[0].startswith("1 URLs")
    assert hints[1].startswith("3 URLs") and "--allow-port 8081 --allow-port 9000" in hints[1]
    assert hints[2].startswith("7 links") and "--allow REGEX" in hints[2]
    assert Endings().guard_hints() == []
