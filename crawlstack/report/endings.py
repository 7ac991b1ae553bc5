"""What became of a crawl's URLs, in a few lines: the top reasons for each outcome, and the guards that bit.

``Endings`` is fed each crawl-log line (``add``) and the count of links the
extractor skipped as off-site (``off_site``); it keeps the reasons by class,
not by URL (``reason_class``), so its memory is bounded by the kinds of
reason, not the crawl's size.  ``guard_hints`` names the flag that would
have let the crawl reach what its guards kept it from: ``--allow-private``
for addresses that are not public, ``--allow-port`` for ports not allowed,
``--allow`` for links off the seeds' hosts.

Settings: ``TOP_REASONS`` (here).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crawlstack.fetch.addresses import REFUSAL

# Reasons listed per outcome.
TOP_REASONS = 5
ENDED = ("skipped", "failed", "dropped")
_PORT = re.compile(r"^port (\d+) is not allowed$")


def reason_class(reason: str) -> str:
    """The kind of a reason, without the URL or value it names: the text before its first colon.

    ``off-site: not a seed host, ...`` -> ``off-site``; a reason without a
    colon (``port 8081 is not allowed``, ``503 Service Unavailable after 3
    attempts``) is its own class.  A refused address is one class whatever
    the address.
    """
    if REFUSAL in reason:
        return f"address {REFUSAL}"
    head, colon, _ = reason.partition(":")
    return head.strip() if colon else reason.strip()


@dataclass
class Endings:
    reasons: dict[str, Counter[str]] = field(default_factory=dict)  # outcome -> reason class -> URLs
    ports: Counter[int] = field(default_factory=Counter)  # ports not allowed -> URLs
    off_site: int = 0  # links the extractor skipped as off-site (metrics' HrefsSkippedOffSite)

    def add(self, line: dict[str, Any]) -> None:
        outcome, reason = line.get("outcome", ""), str(line.get("reason") or "")
        if outcome not in ENDED or not reason:
            return
        self.reasons.setdefault(outcome, Counter())[reason_class(reason)] += 1
        if match := _PORT.match(reason):
            self.ports[int(match.group(1))] += 1

    def top(self) -> dict[str, list[tuple[str, int]]]:
        """Per outcome, its most frequent reasons with their counts."""
        return {outcome: counts.most_common(TOP_REASONS) for outcome, counts in sorted(self.reasons.items())}

    def guard_hints(self) -> list[str]:
        """One line per guard that kept the crawl from URLs, naming the flag that lets them in."""
        hints = []
        private = sum(c for counts in self.reasons.values() for r, c in counts.items() if REFUSAL in r)
        if private:
            hints.append(f"{private} URLs are on addresses that are not public: --allow-private CIDR reaches them")
        if self.ports:
            ports = " ".join(f"--allow-port {p}" for p, _ in self.ports.most_common(3))
            hints.append(f"{sum(self.ports.values())} URLs are on ports not allowed: {ports} reaches them")
        if self.off_site:
            hints.append(f"{self.off_site} links lead off the seeds' hosts: --allow REGEX (or more seeds) follows them")
        return hints
