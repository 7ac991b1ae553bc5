"""In-memory fakes of the stores the domain services use, with the semantics of crawlstack.aws.

Each conditional write here checks the same condition as its DynamoDB
counterpart in ``crawlstack/aws/`` and, like DynamoDB, either applies the
whole update or none of it.  A lock makes every call atomic, as DynamoDB makes
every request atomic, so the fakes can be shared by threads (the fetcher runs
a batch on a thread pool).

``journal`` (optional, shared) records writes in order, for tests that care
what happened before what.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from crawlstack import settings
from crawlstack.config import CrawlConfig
from crawlstack.fetch.crawllog import url_ends
from crawlstack.jobs import UnknownCrawl
from crawlstack.messages import FetchTask
from crawlstack.ports import Claim, RobotsRecord, UrlState
from crawlstack.records.resolution import ResolvedRecord
from crawlstack.records.storable import fit_merge, fit_record, item_size
from crawlstack.runs.ports import Bundle, HostRun


@dataclass
class FakeClock:
    """A clock that only moves when told; ``sleep`` advances it and records the wait."""

    now: float = 1_700_000_000.0
    sleeps: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeHosts:
    """The hosts table's robots.txt cache (``crawlstack.aws.hosts.HostStore``)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.robots: dict[str, RobotsRecord] = {}
        self.calls: list[tuple[str, ...]] = []
        self._lock = threading.RLock()

    def get_robots(self, origin: str) -> RobotsRecord | None:
        with self._lock:
            self.calls.append(("get_robots", origin))
            record = self.robots.get(origin)
            return None if record is None or record.expired(self.clock()) else record

    def put_robots(self, record: RobotsRecord) -> None:
        with self._lock:
            self.calls.append(("put_robots", record.origin))
            self.robots[record.origin] = record


class FakeCrawls:
    """The crawls table: config per crawl (defaults when absent), seed hosts, page budget."""

    def __init__(self, *configs: CrawlConfig, defaults: CrawlConfig | None = None) -> None:
        self.configs = {c.crawl_id: c for c in configs}
        self.defaults = defaults or CrawlConfig()
        self.pages: dict[str, int] = {}
        self.logged: dict[str, Counter[str]] = {}  # crawl -> outcome -> tries only the crawl log holds
        self._lock = threading.Lock()

    def count_logged(self, crawl_id: str, counts: dict[str, int]) -> None:
        with self._lock:
            self.logged.setdefault(crawl_id, Counter()).update({k: n for k, n in counts.items() if n})

    def get(self, crawl_id: str, max_age: float | None = None) -> CrawlConfig:
        with self._lock:
            return self.configs.get(crawl_id) or replace(self.defaults, crawl_id=crawl_id)

    def put(self, config: CrawlConfig) -> None:
        with self._lock:
            self.configs[config.crawl_id] = config

    def put_new(self, config: CrawlConfig, only: Collection[str] | None = None) -> bool:
        stored = config if only is None else CrawlConfig.from_item(config.to_item(only), self.defaults)
        with self._lock:
            return self.configs.setdefault(config.crawl_id, stored) is stored

    def add_seed_host(self, crawl_id: str, host: str) -> None:
        with self._lock:
            config = self.configs.get(crawl_id) or replace(self.defaults, crawl_id=crawl_id)
            self.configs[crawl_id] = replace(config, seed_hosts=config.seed_hosts | {host})

    def set_state(self, crawl_id: str, state: str) -> None:
        with self._lock:
            if crawl_id not in self.configs:
                raise UnknownCrawl(crawl_id)
            self.configs[crawl_id] = replace(self.configs[crawl_id], state=state)

    def count_page(self, crawl_id: str, max_pages: int) -> bool:
        return self.take_pages(crawl_id, max_pages, 1) is not None

    def take_pages(self, crawl_id: str, max_pages: int, pages: int) -> int | None:
        with self._lock:
            if self.pages.get(crawl_id, 0) + pages > max_pages:
                return None
            self.pages[crawl_id] = self.pages.get(crawl_id, 0) + pages
            return self.pages[crawl_id]


class FakeHeld:
    """Held work of stopped crawls (``crawlstack.jobs``): written only while the crawl is stopped, atomically."""

    def __init__(self, crawls: FakeCrawls) -> None:
        self.crawls = crawls
        self.items: dict[str, dict[str, str]] = {}
        self.holds = 0

    def hold(self, crawl_id: str, key: str, body: str) -> bool:
        # The crawls' lock makes the check and the write one step, as the transaction does.
        with self.crawls._lock:
            config = self.crawls.configs.get(crawl_id)
            if config is None or not config.stopped:
                return False
            self.items.setdefault(crawl_id, {})[key] = body
            self.holds += 1
            return True

    def held(self, crawl_id: str, limit: int) -> list[tuple[str, str]]:
        with self.crawls._lock:
            return sorted(self.items.get(crawl_id, {}).items())[:limit]

    def release(self, crawl_id: str, key: str) -> None:
        with self.crawls._lock:
            self.items.get(crawl_id, {}).pop(key, None)

    def count(self) -> int:
        with self.crawls._lock:
            return sum(len(v) for v in self.items.values())


class FakeUrls:
    """The urls table: written once per crawl and URL (dedupe), then its outcome.

    An item marked ``claimable`` (a URL passed over for a complete record,
    never fetched) may be claimed again.
    """

    def __init__(self, journal: list[tuple[str, ...]] | None = None, clock: Callable[[], float] = time.time) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.journal = journal if journal is not None else []
        self.clock = clock  # a claim's seen_at
        self.reads = 0  # fetch_states calls
        self._lock = threading.Lock()

    def claim(
        self, crawl_id: str, fp: str, url: str, depth: int, claimer: str = "", record_id: str | None = None
    ) -> Claim:
        with self._lock:
            old = self.items.get((crawl_id, fp))
            if (
                old is not None
                and old.get("claimable") is not True
                and not (claimer and old.get("claimed_by") == claimer and old["state"] == "queued")
            ):
                return Claim(False, old.get("depth"), old.get("state"))
            # put_item: the whole item is replaced.
            item: dict[str, Any] = {"url": url, "depth": depth, "state": "queued", "seen_at": self.clock()}
            if claimer:
                item["claimed_by"] = claimer
            if record_id:
                item["record_id"] = record_id
            self.items[(crawl_id, fp)] = item
            self.journal.append(("claim", crawl_id, fp))
            return Claim(True)

    def seen_many(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Claim | None]:
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            self.journal.append(("seen_many", str(len(wanted))))
        return {key: self.seen(*key) for key in wanted}

    def seen(self, crawl_id: str, fp: str) -> Claim | None:
        with self._lock:
            old = self.items.get((crawl_id, fp))
            if old is None or old.get("claimable") is True:
                return None
            return Claim(False, old.get("depth"), old.get("state"), old.get("claimed_by"))

    def lower_depth(self, crawl_id: str, fp: str, depth: int) -> bool:
        with self._lock:
            item = self.items.get((crawl_id, fp))
            unfetched = item is not None and item.get("state") in ("queued", "retrying", "fetching")
            if item is None or not unfetched or item.get("depth", 0) <= depth:
                return False
            item["depth"] = depth
            self.journal.append(("lower_depth", crawl_id, fp))
            return True

    def depths(self, crawl_id: str, fps: Iterable[str]) -> dict[str, int]:
        with self._lock:
            items = {fp: self.items.get((crawl_id, fp), {}) for fp in fps}
            return {fp: item["depth"] for fp, item in items.items() if "depth" in item}

    def note_skip(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        with self._lock:
            if (crawl_id, fp) in self.items:
                return False
            item = {"url": url, "depth": depth, "state": "skipped", "reason": reason, "claimable": True}
            self.items[(crawl_id, fp)] = item
            self.journal.append(("note_skip", crawl_id, fp))
            return True

    def unclaim(self, crawl_id: str, fp: str, record_id: str, reason: str, stale_before: float) -> bool:
        with self._lock:
            item = self.items.get((crawl_id, fp))
            if item is None or item.get("record_id") != record_id:
                return False
            state = item.get("state")
            stale = state == "fetching" and item.get("started_at", 0.0) < stale_before
            if not (state in ("queued", "retrying") or stale):
                return False
            item.update({"state": "skipped", "reason": reason, "claimable": True})
            self.journal.append(("outcome", crawl_id, fp, "skipped"))
            return True

    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None:
        with self._lock:
            item = self.items.setdefault((crawl_id, fp), {})
            item.update({"state": outcome, **{k: v for k, v in fields.items() if v is not None}})
            self.journal.append(("outcome", crawl_id, fp, outcome))

    def add_note(self, crawl_id: str, fp: str, note: str) -> None:
        with self._lock:
            if (crawl_id, fp) in self.items:  # as UrlStore's condition: never an item of its own
                self.items[(crawl_id, fp)]["note"] = note

    def fetch_states(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], UrlState]:
        with self._lock:
            self.reads += 1
            found = {key: self.items[key] for key in keys if key in self.items}
            return {
                key: UrlState(item.get("state"), int(item.get("attempt", 1)), float(item.get("retry_at", 0.0)))
                for key, item in found.items()
            }

    def state(self, crawl_id: str, fp: str) -> str | None:
        with self._lock:
            item = self.items.get((crawl_id, fp))
            return item.get("state") if item else None

    def item(self, crawl_id: str, fp: str) -> dict[str, Any]:
        with self._lock:
            return dict(self.items[(crawl_id, fp)])


class FakeBlobs:
    """The pages bucket."""

    def __init__(self, bucket: str = "crawlstack-pages", journal: list[tuple[str, ...]] | None = None) -> None:
        self.bucket = bucket
        self.objects: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.journal = journal if journal is not None else []
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, content_type: str) -> None:
        with self._lock:
            self.objects[(self.bucket, key)] = (data, content_type)
            self.journal.append(("put", key))

    def get(self, key: str, bucket: str | None = None) -> bytes:
        with self._lock:
            return self.objects[(bucket or self.bucket, key)][0]

    def keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for _, k in self.objects if k.startswith(prefix))


def url_outcome(urls: FakeUrls, blobs: FakeBlobs, crawl_id: str, fp: str) -> dict[str, Any]:
    """A URL's end as the crawl reports it: its urls-table item with its crawl log (``crawllog.url_ends``)."""
    [item] = url_ends([urls.item(crawl_id, fp)], blobs, crawl_id)
    return item


class FakeResults:
    """The results table: one record per crawl and fingerprint (put_item overwrites).

    Items are fitted as ``ResultStore`` fits them (``crawlstack.records.storable``), without its ``pk``.
    """

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def put(self, record: dict[str, Any]) -> None:
        pk = f"{record['crawl_id']}#{record['fp']}"
        item = fit_record({"pk": pk, **record})
        del item["pk"]
        self.items[pk] = item


class FakeResolved:
    """The resolved table: per field, the first value merged wins, with its source URL.

    ``calls`` records each merge and read, for tests that count them.
    """

    def __init__(self) -> None:
        # (crawl_id, record_id) -> {"want": tuple, "fields": dict, "sources": dict, "complete"?: True}
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def merge(
        self, crawl_id: str, record_id: str, want: Sequence[str], fields: Mapping[str, Any], source_url: str
    ) -> ResolvedRecord:
        with self._lock:
            self.calls.append(("merge", crawl_id, record_id, source_url))
            item = self.items.setdefault((crawl_id, record_id), {"want": tuple(want), "fields": {}, "sources": {}})
            # Fitted as ResolvedStore fits them: a value too large for what is left of the item is a marker.
            new = {name: value for name, value in fields.items() if name not in item["fields"]}
            for name, value in fit_merge(new, source_url, self._size(crawl_id, record_id), 13).items():
                item["fields"][name] = value
                item["sources"][name] = source_url
            record = self._record(crawl_id, record_id)
            if record.complete:
                item["complete"] = True
            return record

    def get_many(self, crawl_id: str, record_ids: Iterable[str]) -> dict[str, ResolvedRecord]:
        with self._lock:
            ids = list(dict.fromkeys(record_ids))
            self.calls.append(("get_many", crawl_id, tuple(ids)))
            return {rid: self._record(crawl_id, rid) for rid in ids if (crawl_id, rid) in self.items}

    def scan_crawl(self, crawl_id: str) -> list[ResolvedRecord]:
        with self._lock:
            return [self._record(c, r) for c, r in self.items if c == crawl_id]

    def reads(self) -> int:
        return sum(1 for call in self.calls if call[0] == "get_many")

    def _size(self, crawl_id: str, record_id: str) -> int:
        """The item's size in ResolvedStore's layout: flat ``field.<name>`` and ``source.<name>`` attributes."""
        item = self.items[(crawl_id, record_id)]
        flat: dict[str, Any] = {"pk": f"{crawl_id}#{record_id}", "crawl_id": crawl_id, "record_id": record_id}
        flat.update(want=list(item["want"]), complete=True)
        flat.update({f"field.{name}": value for name, value in item["fields"].items()})
        flat.update({f"source.{name}": url for name, url in item["sources"].items()})
        return item_size(flat)

    def _record(self, crawl_id: str, record_id: str) -> ResolvedRecord:
        item = self.items[(crawl_id, record_id)]
        return ResolvedRecord(crawl_id, record_id, item["want"], dict(item["fields"]), dict(item["sources"]))


class FakeScopeStore:
    """Dispatch's scope bookkeeping: per-host page counters and notes of dropped URLs (in the urls fake)."""

    def __init__(self, urls: FakeUrls) -> None:
        self.urls = urls
        self.host_pages: dict[tuple[str, str], int] = {}
        self.host_page_calls = 0
        self.notes = 0
        self._lock = threading.Lock()

    def count_host_page(self, crawl_id: str, host: str, cap: int, pages: int = 1) -> bool:
        with self._lock:
            self.host_page_calls += 1
            count = self.host_pages.get((crawl_id, host), 0)
            if count + pages > cap:
                return False
            self.host_pages[(crawl_id, host)] = count + pages
            return True

    def note_drop(self, crawl_id: str, fp: str, url: str, depth: int, reason: str) -> bool:
        with self.urls._lock:
            self.notes += 1
            if (crawl_id, fp) in self.urls.items:
                return False
            item = {"url": url, "depth": depth, "state": "dropped", "reason": reason, "claimable": True}
            self.urls.items[(crawl_id, fp)] = item
            self.urls.journal.append(("note_drop", crawl_id, fp))
            return True


class FakeBacklog:
    """Each host's waiting fetch tasks in bundles (``crawlstack.runs.ports.Backlog``), as ``BacklogStore`` keeps them.

    ``items``: host -> {key: tasks}, served in key order: ``<depth:04d>#<seq>``,
    so shallowest first and, within a depth, in the order added.  A bundle
    holds tasks whose ``to_json()`` sizes (plus one each) total at most
    ``budget`` bytes: more than the adapter's compressed form takes, so the
    fake cuts no fewer bundles than DynamoDB would.
    """

    def __init__(self, budget: int = settings.BACKLOG_BUNDLE_BYTES) -> None:
        self.budget = budget
        self.items: dict[str, dict[str, tuple[FetchTask, ...]]] = {}
        self.calls: list[tuple[str, ...]] = []
        self._seq = 0
        self._lock = threading.Lock()

    @staticmethod
    def task_bytes(task: FetchTask) -> int:
        return len(task.to_json().encode("utf-8")) + 1

    def add(self, host: str, depth: int, tasks: Sequence[FetchTask]) -> list[str]:
        if not 0 <= depth <= 9999:
            raise ValueError(f"depth {depth} does not fit the backlog's order key")
        bundles: list[list[FetchTask]] = []
        size = 0
        for task in tasks:
            if not bundles or size + self.task_bytes(task) > self.budget:
                bundles.append([])
                size = 0
            bundles[-1].append(task)
            size += self.task_bytes(task)
        with self._lock:
            self.calls.append(("add", host, str(depth), str(len(tasks))))
            keys = []
            for bundle in bundles:
                self._seq += 1
                keys.append(f"{depth:04d}#{self._seq:016d}")
                self.items.setdefault(host, {})[keys[-1]] = tuple(bundle)
            return keys

    def peek(self, host: str, limit: int, after: str | None = None, consistent: bool = True) -> list[Bundle]:
        with self._lock:
            self.calls.append(("peek", host) if consistent else ("peek", host, "eventually"))
            rows = [r for r in sorted(self.items.get(host, {}).items()) if after is None or r[0] > after]
            rows = rows[: max(limit, 0)]
            return [Bundle(host, key, tasks) for key, tasks in rows]

    def replace(self, host: str, key: str, tasks: Sequence[FetchTask]) -> None:
        with self._lock:
            self.calls.append(("replace", host, key, str(len(tasks))))
            bundles = self.items.get(host, {})
            if key not in bundles:
                return  # served by a later holder: stays gone
            if tasks:
                bundles[key] = tuple(tasks)
            else:
                del bundles[key]

    def delete(self, host: str, key: str) -> None:
        with self._lock:
            self.calls.append(("delete", host, key))
            self.items.get(host, {}).pop(key, None)

    def sizes(self, host: str) -> list[int]:
        """Each of the host's bundles' bytes, as the budget counts them."""
        with self._lock:
            return [sum(map(self.task_bytes, t)) for _, t in sorted(self.items.get(host, {}).items())]


class FakeRuns:
    """The hosts table's run items (``crawlstack.runs.ports.Runs``), as ``crawlstack.aws.runs.RunStore`` keeps them.

    ``items``: host -> the run item's attributes (an attribute absent is a
    key absent).  No reply is ever lost here, so a call repeated with the
    same arguments stands for a retry after a lost reply, and answers as the
    DynamoDB adapter's retry does.
    """

    GRACE = settings.RUN_GRACE_SECONDS

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    def schedule(self, host: str, run_id: str, now: float, expires: float) -> bool:
        with self._lock:
            self.calls.append(("schedule", host, run_id))
            item = self.items.setdefault(host, {})
            if "run_id" in item and item["run_expires"] >= now:
                return bool(item["run_id"] == run_id)  # our own run: a retried call
            item.update(run_id=run_id, run_expires=expires)
            return True

    def lease(self, host: str, run_id: str, holder: str, now: float, until: float) -> HostRun | None:
        with self._lock:
            self.calls.append(("lease", host, run_id, holder))
            item = self.items.get(host, {})
            if item.get("run_id") != run_id:
                return None
            if item.get("holder") not in (None, holder) and item["lease_until"] > now:
                return None
            before = self._run(host)
            item.update(holder=holder, lease_until=until, run_expires=until + self.GRACE)
            item.pop("released_by", None)
            return before

    def renew(self, host: str, holder: str, until: float, last_start: float) -> bool:
        with self._lock:
            self.calls.append(("renew", host, holder))
            item = self.items.get(host, {})
            if item.get("holder") != holder:
                return False
            item.update(lease_until=until, last_start=last_start, run_expires=until + self.GRACE)
            return True

    def release(
        self,
        host: str,
        holder: str,
        last_start: float,
        pause_until: float,
        adaptive_delay: float | None,
        next_run: str | None,
        expires: float = 0.0,
    ) -> bool:
        with self._lock:
            self.calls.append(("release", host, holder))
            item = self.items.get(host, {})
            if item.get("holder") != holder:
                return "holder" not in item and item.get("released_by") == holder  # a retried release
            item.update(last_start=last_start, pause_until=pause_until, released_by=holder)
            if adaptive_delay is None:
                item.pop("adaptive_delay", None)
            else:
                item["adaptive_delay"] = adaptive_delay
            item.pop("holder", None)
            item.pop("lease_until", None)
            if next_run is None:
                item.pop("run_id", None)
                item.pop("run_expires", None)
            else:
                item.update(run_id=next_run, run_expires=expires)
            return True

    def get(self, host: str) -> HostRun:
        with self._lock:
            self.calls.append(("get", host))
            return self._run(host)

    def _run(self, host: str) -> HostRun:
        item = self.items.get(host, {})
        return HostRun(
            host=host,
            run_id=item.get("run_id"),
            run_expires=item.get("run_expires", 0.0),
            holder=item.get("holder"),
            lease_until=item.get("lease_until", 0.0),
            last_start=item.get("last_start", 0.0),
            pause_until=item.get("pause_until", 0.0),
            adaptive_delay=item.get("adaptive_delay"),
        )
