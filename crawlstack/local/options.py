"""What a local crawl is asked to do: its seeds and options (``crawlstack crawl --local``'s flags).

``SAVED_OPTIONS`` are kept in the crawl's state for ``--resume``;
``RESUME_OPTIONS`` are the ones a resume takes from its command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crawlstack import settings


@dataclass(frozen=True)
class Seed:
    url: str
    record_id: str | None = None
    want: tuple[str, ...] = ()


@dataclass
class LocalOptions:
    rules_dir: str | None
    out_dir: str
    max_depth: int = settings.DEFAULT_MAX_DEPTH
    max_pages: int | None = None
    delay: float = settings.DEFAULT_DELAY_SECONDS
    user_agent: str = settings.DEFAULT_USER_AGENT
    allow_private: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    max_pages_per_host: int | None = settings.DEFAULT_MAX_PAGES_PER_HOST
    allow_ports: tuple[int, ...] = ()
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
# What is saved for a resume (LocalOptions' fields, less the per-run ones).
SAVED_OPTIONS = (
    "max_depth", "max_pages", "delay", "user_agent", "allow_private", "allow", "deny",
    "max_pages_per_host", "allow_ports", "extract_concurrency", "crawl_id", "extra_env",
)  # fmt: skip
