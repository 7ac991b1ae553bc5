"""Messages on the frontier and fetch queues.

Frontier message (what a user sends to seed a crawl)::

    {"url": "...", "depth": 0, "crawl_id"?: "...", "referrer"?: "...",
     "record_id"?: "...", "want"?: ["field", ...]}

``"canonical": true`` says the URL is canonical already (extract's links,
``crawlstack.urls.resolve_link``): dispatch does not canonicalise it again
(``crawlstack.dispatch``).  Left out, the URL is canonicalised, as a seed's
is; a message sent without it reads as it always did.

Link bundle: the links extract found on one page travel together, one queue
message for up to ``settings.LINKS_PER_FRONTIER_MESSAGE`` of them, with the
fields they share said once::

    {"urls": ["...", ...], "depth": 2, "crawl_id": "...", "referrer"?: "...",
     "record_id"?: "...", "want"?: [...], "hops"?: 0, "via"?: "...",
     "canonical"?: true}

(``pack_links``, ``frontier_messages``).  A bundle costs one send, receive and
delete where a message per link cost one each (a tenth of a batched call).

Fetch task: a frontier message that passed scope, dedupe and robots.txt, with
its canonical URL, fingerprint and host, waiting in its host's backlog.  Two
fields are left out of its JSON at their defaults: ``attempt`` (1-based; a
retry of an HTTP error is the same task with ``attempt`` + 1,
``crawlstack.fetch.outcomes``) and ``adaptive_delay`` (read from tasks
written before host runs; the host's run keeps its slowed-down delay now).

Run message: a host's run to work (``crawlstack.runs``)::

    {"host": "example.com", "run_id": "..."}

(``RunMessage``); the fetch invocation that receives it takes the host's
lease for that run, or drops it if the run is no longer the host's.

Extract message: the bucket's S3 ``ObjectCreated`` event notification of a
WARC (``created_objects``), as S3 sends it deployed and ``LocalBlobs`` locally.

A frontier or run message any string of which is not valid UTF-8 (a lone
surrogate, JSON's ``"\\ud800"``) is invalid: no key, store or queue takes it,
and a batched read holding it would fail every message of its batch.

Settings: ``settings.DEFAULT_CRAWL_ID``, ``settings.LINKS_PER_FRONTIER_MESSAGE``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import unquote_plus

from crawlstack import settings
from crawlstack.limits import NOT_UTF8, is_utf8_json, is_utf8_text


class InvalidMessage(ValueError):
    """A queue message that can never be processed; the text says why."""


def _json_object(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, TypeError) as exc:
        raise InvalidMessage(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidMessage("not a JSON object")
    for key, value in data.items():
        if not is_utf8_text(key) or not is_utf8_json(value):
            raise InvalidMessage(f"{key!r} {NOT_UTF8}")
    return data


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidMessage(f"{key!r} must be a string")
    return value


@dataclass(frozen=True)
class CheckRef:
    """A page of a watch's check of a source: the check's slot, the page's number, the last validators.

    A checked URL is fetched again at every check: its dedupe key is the
    check's (``Link.fp``), not the URL's alone.  The first page of a check
    carries the source's last ``ETag`` and ``Last-Modified``, sent as a
    conditional GET.  Every page carries ``highest_id``, the highest identity
    the source's last check saw on its first page (a cursor check stops
    below it), and the pages after the first carry ``first_items``, the
    first page's item count (a shorter page ends page-number paging).  Both
    travel with the check: its first page replaces the stored ``highest_id``.
    """

    source_id: str
    slot: str
    page: int = 1
    etag: str | None = None
    last_modified: str | None = None
    highest_id: str | None = None
    first_items: int | None = None

    @property
    def key(self) -> str:
        return f"{self.source_id} {self.slot}"

    def request_headers(self) -> list[tuple[str, str]]:
        headers = []
        if self.etag:
            headers.append(("If-None-Match", self.etag))
        if self.last_modified:
            headers.append(("If-Modified-Since", self.last_modified))
        return headers

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Any) -> CheckRef:
        if not isinstance(data, dict):
            raise InvalidMessage("'check' must be an object")
        source_id, slot, page = data.get("source_id"), data.get("slot"), data.get("page", 1)
        if not isinstance(source_id, str) or not source_id or not isinstance(slot, str) or not slot:
            raise InvalidMessage("'check' needs 'source_id' and 'slot' strings")
        if not _whole(page, 1):
            raise InvalidMessage("'check.page' must be a positive integer")
        first_items = data.get("first_items")
        if first_items is not None and not _whole(first_items, 0):
            raise InvalidMessage("'check.first_items' must be a non-negative integer")
        return cls(
            source_id,
            slot,
            page,
            _optional_str(data, "etag"),
            _optional_str(data, "last_modified"),
            _optional_str(data, "highest_id"),
            first_items,
        )


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
    # The URL is canonical (crawlstack.urls.canonicalize) already: dispatch need not canonicalise it.
    canonical: bool = False
    # A page of a watch's check (crawlstack.watch): fetched again at each check, conditionally.
    check: CheckRef | None = None

    @classmethod
    def from_json(cls, body: str, default_crawl_id: str = settings.DEFAULT_CRAWL_ID) -> FrontierMessage:
        return cls.from_dict(_json_object(body), default_crawl_id)

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
        canonical = data.get("canonical", False)
        if not isinstance(canonical, bool):
            raise InvalidMessage("'canonical' must be true or false")
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
            canonical=canonical,
            check=CheckRef.from_dict(data["check"]) if data.get("check") is not None else None,
        )

    def to_json(self) -> str:
        return json.dumps(self._fields({"url": self.url}), separators=(",", ":"))

    def _fields(self, data: dict[str, Any]) -> dict[str, Any]:
        data.update(depth=self.depth, crawl_id=self.crawl_id)
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
        if self.canonical:
            data["canonical"] = True
        if self.check is not None:
            data["check"] = self.check.to_dict()
        return data


def pack_links(links: Iterable[FrontierMessage], per_message: int | None = None) -> list[str]:
    """Queue message bodies for ``links``: bundles of the links that share every field but the URL.

    A lone link goes as a plain frontier message.  Order is kept within each bundle.
    """
    per_message = per_message or settings.LINKS_PER_FRONTIER_MESSAGE
    groups: dict[FrontierMessage, list[str]] = {}
    for link in links:
        groups.setdefault(replace(link, url=""), []).append(link.url)
    bodies = []
    for shared, urls in groups.items():
        for start in range(0, len(urls), per_message):
            chunk = urls[start : start + per_message]
            if len(chunk) == 1:
                bodies.append(replace(shared, url=chunk[0]).to_json())
            else:
                bodies.append(json.dumps(shared._fields({"urls": chunk}), separators=(",", ":")))
    return bodies


def frontier_messages(body: str, default_crawl_id: str = settings.DEFAULT_CRAWL_ID) -> list[FrontierMessage]:
    """The frontier messages of one queue message: a single one, or every link of a bundle."""
    data = _json_object(body)
    if "urls" not in data:
        return [FrontierMessage.from_dict(data, default_crawl_id)]
    urls = data.pop("urls")
    if "url" in data:
        raise InvalidMessage("a message has 'url' or 'urls', not both")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise InvalidMessage("'urls' must be a non-empty list of URL strings")
    first = FrontierMessage.from_dict({**data, "url": urls[0]}, default_crawl_id)
    return [replace(first, url=u.strip()) for u in urls]


# Fields tasks no longer carry, dropped when an older task is read: ``delay`` (the run works the host's
# delay out at each request).
RETIRED_TASK_FIELDS = frozenset({"delay"})


@dataclass(frozen=True)
class FetchTask:
    url: str
    fp: str
    host: str
    depth: int
    crawl_id: str
    not_before: float
    window: int = 1
    hops: int = 0
    referrer: str | None = None
    record_id: str | None = None
    want: tuple[str, ...] = field(default_factory=tuple)
    # Which try this is at the URL (retries of HTTP errors, crawlstack.fetch.outcomes).
    attempt: int = 1
    # The host's adaptive delay when the slot was reserved (0: not slowed down).
    adaptive_delay: float = 0.0
    # A watch's check (``CheckRef.to_dict`` as JSON text, so the task stays hashable); None for a crawl's page.
    check: str | None = None

    @property
    def check_ref(self) -> CheckRef | None:
        return CheckRef.from_dict(json.loads(self.check)) if self.check else None

    @property
    def attempt_key(self) -> str:
        """``crawl_id#fp``, plus ``#attempt`` for a retry: names a WARC or crawl-log object apart from earlier tries."""
        key = f"{self.crawl_id}#{self.fp}"
        return key if self.attempt <= 1 else f"{key}#{self.attempt}"

    def to_json(self) -> str:
        data = asdict(self)
        data["want"] = list(self.want)
        # Left out at their defaults: a fetcher of before retries reads the message as it always did.
        if self.attempt == 1:
            del data["attempt"]
        if not self.adaptive_delay:
            del data["adaptive_delay"]
        if self.check is None:
            del data["check"]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FetchTask:
        """A task from its fields, as ``to_json`` and a backlog's bundles hold them.

        A task written before a field was retired (``RETIRED_TASK_FIELDS``)
        still reads: a deployed backlog may hold it for days.
        """
        values = {k: v for k, v in data.items() if k not in RETIRED_TASK_FIELDS}
        return cls(**{**values, "want": tuple(values.get("want") or ())})

    @classmethod
    def from_json(cls, body: str) -> FetchTask:
        try:
            task = cls.from_dict(json.loads(body))
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidMessage(f"bad fetch task: {exc}") from exc
        if not isinstance(task.attempt, int) or isinstance(task.attempt, bool) or task.attempt < 1:
            raise InvalidMessage("bad fetch task: 'attempt' must be a positive integer")
        return task

    def metadata(self) -> dict[str, Any]:
        """What extract needs to know about the page besides the HTTP exchange."""
        return {
            "crawl_id": self.crawl_id,
            "depth": self.depth,
            "fp": self.fp,
            "referrer": self.referrer,
            "record_id": self.record_id,
            "want": list(self.want),
            **({"check": json.loads(self.check)} if self.check else {}),
        }


@dataclass(frozen=True)
class RunMessage:
    """A host's run to work: the fetch invocation that receives it takes the lease for ``run_id``."""

    host: str
    run_id: str

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "run_id": self.run_id}, separators=(",", ":"))

    @classmethod
    def from_json(cls, body: str) -> RunMessage:
        data = _json_object(body)
        extra = set(data) - {"host", "run_id"}
        if extra:
            raise InvalidMessage(f"bad run message: unknown keys {sorted(extra)}")
        host, run_id = data.get("host"), data.get("run_id")
        if not isinstance(host, str) or not host:
            raise InvalidMessage("bad run message: 'host' must be a non-empty string")
        if not isinstance(run_id, str) or not run_id:
            raise InvalidMessage("bad run message: 'run_id' must be a non-empty string")
        return cls(host, run_id)


def created_objects(body: str) -> list[tuple[str, str]]:
    """(bucket, key) of each WARC an S3 event notification announces."""
    event = json.loads(body)
    out = []
    for rec in event.get("Records", []):  # an s3:TestEvent has none
        if not str(rec.get("eventName", "")).startswith("ObjectCreated"):
            continue
        key = unquote_plus(rec["s3"]["object"]["key"])
        if key.startswith(settings.PAGES_PREFIX):
            out.append((rec["s3"]["bucket"]["name"], key))
    return out
