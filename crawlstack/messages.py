"""Messages on the frontier and fetch queues.

Frontier message (what a user sends to seed a crawl)::

    {"url": "...", "depth": 0, "crawl_id"?: "...", "referrer"?: "...",
     "record_id"?: "...", "want"?: ["field", ...]}

Fetch task: a frontier message that passed scope, dedupe and robots.txt, with
its canonical URL, fingerprint, host and reserved politeness slot.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from crawlstack import settings


class InvalidMessage(ValueError):
    """A queue message that can never be processed; the text says why."""


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidMessage(f"{key!r} must be a string")
    return value


@dataclass(frozen=True)
class FrontierMessage:
    url: str
    depth: int = 0
    crawl_id: str = settings.DEFAULT_CRAWL_ID
    referrer: str | None = None
    record_id: str | None = None
    want: tuple[str, ...] = ()
    hops: int = 0
    # The mapping whose url_parsers chose this link: such links are followed
    # off-site too (depth, deny patterns and robots.txt still apply).
    via: str | None = None

    @classmethod
    def from_json(cls, body: str, default_crawl_id: str = settings.DEFAULT_CRAWL_ID) -> FrontierMessage:
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, TypeError) as exc:
            raise InvalidMessage(f"not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise InvalidMessage("not a JSON object")
        return cls.from_dict(data, default_crawl_id)

    @classmethod
    def from_dict(cls, data: dict[str, Any], default_crawl_id: str = settings.DEFAULT_CRAWL_ID) -> FrontierMessage:
        url = data.get("url")
        if not isinstance(url, str) or not url.strip():
            raise InvalidMessage("'url' is missing or not a string")
        depth = data.get("depth", 0)
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            raise InvalidMessage("'depth' must be a non-negative integer")
        hops = data.get("hops", 0)
        if not isinstance(hops, int) or isinstance(hops, bool) or hops < 0:
            raise InvalidMessage("'hops' must be a non-negative integer")
        want = data.get("want") or []
        if not isinstance(want, list) or not all(isinstance(w, str) for w in want):
            raise InvalidMessage("'want' must be a list of field names")
        return cls(
            url=url.strip(),
            depth=depth,
            crawl_id=_optional_str(data, "crawl_id") or default_crawl_id,
            referrer=_optional_str(data, "referrer"),
            record_id=_optional_str(data, "record_id"),
            want=tuple(want),
            hops=hops,
            via=_optional_str(data, "via"),
        )

    def to_json(self) -> str:
        data: dict[str, Any] = {"url": self.url, "depth": self.depth, "crawl_id": self.crawl_id}
        if self.referrer:
            data["referrer"] = self.referrer
        if self.record_id:
            data["record_id"] = self.record_id
        if self.want:
            data["want"] = list(self.want)
        if self.hops:
            data["hops"] = self.hops
        if self.via:
            data["via"] = self.via
        return json.dumps(data, separators=(",", ":"))


@dataclass(frozen=True)
class FetchTask:
    url: str
    fp: str
    host: str
    depth: int
    crawl_id: str
    not_before: float
    delay: float
    window: int = 1
    hops: int = 0
    referrer: str | None = None
    record_id: str | None = None
    want: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        data = asdict(self)
        data["want"] = list(self.want)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, body: str) -> FetchTask:
        try:
            data = json.loads(body)
            data["want"] = tuple(data.get("want") or ())
            return cls(**data)
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidMessage(f"bad fetch task: {exc}") from exc

    def metadata(self) -> dict[str, Any]:
        """What extract needs to know about the page besides the HTTP exchange."""
        return {
            "crawl_id": self.crawl_id,
            "depth": self.depth,
            "fp": self.fp,
            "referrer": self.referrer,
            "record_id": self.record_id,
            "want": list(self.want),
        }
