"""What a local crawl is asked to do: its seeds and options (``crawlstack crawl --local``'s flags).

The crawl's settings are ``config``, a ``CrawlConfig`` of the settings
``crawl`` takes (``crawlstack.config.schema``); the other fields are the
run's own.  ``saved_options`` is what the crawl's state keeps for
``--resume``: those settings, by name, and ``SAVED_OPTIONS``;
``RESUME_OPTIONS`` are the ones a resume takes from its command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crawlstack.config import CrawlConfig
from crawlstack.config.schema import of_command


@dataclass(frozen=True)
class Seed:
    url: str
    record_id: str | None = None
    want: tuple[str, ...] = ()


@dataclass
class LocalOptions:
    rules_dir: str | None
    out_dir: str
    # The crawl's settings (its id is ``crawl_id``'s, below).
    config: CrawlConfig = field(default_factory=CrawlConfig)
    endpoint_url: str | None = None
    fetch_concurrency: int = 8
    # Extract invocations at once; deployed, extract scales out, so more
    # instances send dispatch the duplicate links it sees there.
    extract_concurrency: int = 1
    progress: bool | None = None
    crawl_id: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # moto in this process (--emulate-aws) rather than the local backend; an endpoint_url implies AWS too.
    emulate_aws: bool = False
    # Start afresh where OUT holds an earlier crawl's state (without it, that is refused).
    overwrite: bool = False

    @property
    def on_aws(self) -> bool:
        return self.emulate_aws or self.endpoint_url is not None


# What a resume takes from the command line; everything else comes from the saved crawl.
RESUME_OPTIONS = ("out_dir", "progress", "fetch_concurrency")
# The run's own options saved for a resume, besides the crawl's settings.
SAVED_OPTIONS = ("extract_concurrency", "crawl_id", "extra_env")


def saved_options(options: LocalOptions) -> dict[str, Any]:
    """What the state keeps for a resume, as JSON: the crawl's settings by name, and ``SAVED_OPTIONS``."""
    kept = {s.name: s.to_json(options.config.value(s.name)) for s in of_command("crawl")}
    return kept | {k: getattr(options, k) for k in SAVED_OPTIONS}


def restored_options(saved: dict[str, Any]) -> dict[str, Any]:
    """``LocalOptions``' keyword arguments from ``saved_options``; a setting saved before it existed is its default."""
    settings = {s.name: s.from_json(saved[s.name]) for s in of_command("crawl") if s.name in saved}
    return {"config": CrawlConfig().with_values(**settings)} | {k: saved[k] for k in SAVED_OPTIONS if k in saved}
