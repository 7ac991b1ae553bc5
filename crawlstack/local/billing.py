"""What AWS would bill for the calls a counting endpoint saw: units per call, priced.

An observer of :class:`crawlstack.local.faulty.FaultyEndpoint` (``Bill.observe``)
turns each call into billable units, the way each service meters them:

* **SQS**: one request per call, and one per 64 KiB chunk of its payload.
  ``GetQueueAttributes`` and the other queue-management calls are the local
  pump's own (an event source mapping does not make them) and ``ReceiveMessage``
  calls that return nothing are its idle polling: both are counted apart
  (``unbilled``), not priced per page.  S3 sends one message to the extract
  queue per object it announces; moto does that inside the server, out of the
  endpoint's sight, so each announced ``PutObject`` (a WARC, under
  ``settings.PAGES_PREFIX``) adds one SQS request here.
* **DynamoDB, on demand**: a write unit per KiB of item written, at least
  one, for every write call, successful or not (a failed condition is billed
  too); ``BatchWriteItem`` per item; a read unit per 4 KiB read, halved for
  eventually consistent reads, at least one unit per item (``GetItem``,
  ``BatchGetItem``) or per call (``Query``, ``Scan``, summed over the items
  returned).  An ``UpdateItem`` or ``DeleteItem`` is billed on the size of
  the item it writes, which the endpoint does not see: it counts one unit per
  KiB of what the request sends, at least one.  Crawl state items are far
  below a KiB, so this is exact for them.
* **S3**: ``PutObject``, ``CopyObject``, ``List*`` and uploads at the PUT
  price, ``GetObject`` and ``HeadObject`` at the GET price; ``DeleteObject``
  is free.
* **EventBridge**: ``PutEvents`` is billed per entry, one custom event per
  started 64 KB chunk of the entry's size as EventBridge counts it
  (``event_entry_size``: Source, DetailType, Detail and each Resources
  string in UTF-8, 14 bytes for a Time).  Every entry sent is counted, also
  one the reply marks failed (an upper bound: a failed entry may not be
  billed).  Delivery to a rule's targets is not billed to the publisher.
* Table, queue and bucket management is free and counted apart.

Prices (``PRICES``) are us-east-1 list prices.  Lambda is priced separately,
from measured handler time (``lambda_usd``) and invocations
(``lambda_requests_usd``), and so are the CloudWatch Logs the functions
write (``logs_usd``), from the bytes :class:`LogMeter` counts where the
handlers emit them.

Settings: ``settings.PAGES_PREFIX``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from crawlstack import settings
from crawlstack.prices import PRICES

SQS_CHUNK = 64 * 1024
EVENT_CHUNK = 64 * 1024

_SQS_BILLED = {
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
}
_DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}
_S3_PUT_CLASS = {
    "PutObject",
    "CopyObject",
    "ListObjects",
    "ListObjectsV2",
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
}
_S3_GET_CLASS = {"GetObject", "HeadObject"}


def item_size(item: dict[str, Any]) -> int:
    """Bytes DynamoDB bills for an item in its wire form: names plus values."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return math.ceil(len(str(v).lstrip("-").replace(".", "")) / 2) + 1
    if kind == "B":
        return math.ceil(len(str(v)) * 3 / 4)  # base64 on the wire
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_value_size(x) + 1 for x in v)
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: x}) for x in v)
    return len(json.dumps(v))


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


def _json(data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def dynamodb_units(operation: str, request: bytes, reply: bytes) -> dict[str, float]:
    """``{"ddb_wru": n}`` or ``{"ddb_rru": n}`` for one DynamoDB call; ``{}`` for a free one."""
    req = _json(request)
    if operation == "PutItem":
        return {"ddb_wru": write_units(item_size(req.get("Item", {})))}
    if operation in _DDB_WRITES:
        sent = item_size(req.get("Key", {})) + len(json.dumps(req.get("ExpressionAttributeValues", {})))
        return {"ddb_wru": write_units(sent)}
    if operation == "BatchWriteItem":
        units = 0.0
        for requests in req.get("RequestItems", {}).values():
            for r in requests:
                put = r.get("PutRequest")
                units += write_units(item_size(put["Item"])) if put else 1
        return {"ddb_wru": units}
    if operation == "TransactWriteItems":
        return {"ddb_wru": 2 * len(req.get("TransactItems", []))}
    rep = _json(reply)
    if operation == "GetItem":
        return {"ddb_rru": read_units(item_size(rep.get("Item", {})), bool(req.get("ConsistentRead")))}
    if operation == "BatchGetItem":
        units = 0.0
        for table, asked in req.get("RequestItems", {}).items():
            consistent = bool(asked.get("ConsistentRead"))
            found = rep.get("Responses", {}).get(table, [])
            units += sum(read_units(item_size(item), consistent) for item in found)
            units += read_units(0, consistent) * max(0, len(asked.get("Keys", [])) - len(found))
        return {"ddb_rru": units}
    if operation in ("Query", "Scan"):
        size = sum(item_size(item) for item in rep.get("Items", []))
        return {"ddb_rru": read_units(size, bool(req.get("ConsistentRead")))}
    return {}


def sqs_units(operation: str, request: bytes, reply: bytes) -> dict[str, float]:
    if operation not in _SQS_BILLED:
        return {}
    if operation == "ReceiveMessage" and not _json(reply).get("Messages"):
        return {}
    payload = len(reply) if operation == "ReceiveMessage" else len(request)
    return {"sqs_requests": max(1, math.ceil(payload / SQS_CHUNK))}


def s3_units(operation: str, path: str) -> dict[str, float]:
    if operation in _S3_PUT_CLASS:
        units: dict[str, float] = {"s3_put": 1}
        # The object's key, path-style: /bucket/key.  A WARC's creation is announced to the extract queue.
        key = path.split("?", 1)[0].lstrip("/").partition("/")[2]
        if operation == "PutObject" and key.startswith(settings.PAGES_PREFIX):
            units["sqs_requests"] = 1
        return units
    if operation in _S3_GET_CLASS:
        return {"s3_get": 1}
    return {}


def event_entry_size(entry: dict[str, Any]) -> int:
    """A PutEvents entry's size as EventBridge counts it ("Calculating PutEvents event entry size")."""
    size = 14 if entry.get("Time") is not None else 0
    for name in ("Source", "DetailType", "Detail"):
        value = entry.get(name)
        size += len(value.encode("utf-8")) if isinstance(value, str) else 0
    resources = entry.get("Resources")
    for resource in resources if isinstance(resources, list) else []:
        size += len(resource.encode("utf-8")) if isinstance(resource, str) else 0
    return size


def events_units(operation: str, request: bytes) -> dict[str, float]:
    """``{"events_put": n}``: the custom events a ``PutEvents`` call is billed, a 64 KB chunk of an entry each."""
    if operation != "PutEvents":
        return {}
    entries = _json(request).get("Entries")
    chunks = sum(
        max(1, math.ceil(event_entry_size(e) / EVENT_CHUNK))
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
    )
    return {"events_put": chunks} if chunks else {}


def units_of(service: str, operation: str, path: str, request: bytes, reply: bytes) -> dict[str, float]:
    """The billable units of one successful call (see the module docstring)."""
    if service == "dynamodb":
        return dynamodb_units(operation, request, reply)
    if service == "sqs":
        return sqs_units(operation, request, reply)
    if service == "s3":
        return s3_units(operation, path)
    if service == "events":
        return events_units(operation, request)
    return {}


def _write_units_by_table(operation: str, request: bytes, units: dict[str, float]) -> dict[str, float]:
    """A DynamoDB call's write units per table (a batch write's per table it names)."""
    wru = units.get("ddb_wru", 0)
    if not wru:
        return {}
    req = _json(request)
    if isinstance(req.get("TableName"), str):
        return {req["TableName"]: wru}
    if operation == "BatchWriteItem":
        return {
            table: dynamodb_units(operation, json.dumps({"RequestItems": {table: asked}}).encode(), b"")["ddb_wru"]
            for table, asked in req.get("RequestItems", {}).items()
        }
    return {"(transactions)": wru}


def lambda_usd(gb_seconds: float) -> float:
    return gb_seconds * PRICES["lambda_gb_s"]


def lambda_requests_usd(invocations: float) -> float:
    return invocations * PRICES["lambda_requests"]


def logs_usd(ingested_bytes: float) -> float:
    return ingested_bytes / 1e9 * PRICES["logs_ingested_gb"]


class _CountingStream:
    """A log handler's stream that counts the bytes written through it."""

    def __init__(self, inner: IO[str], count: Callable[[int], None]) -> None:
        self.inner = inner
        self._count = count

    def write(self, text: str) -> int:
        self._count(len(text.encode("utf-8", "surrogatepass")))
        return self.inner.write(text)

    def flush(self) -> None:
        self.inner.flush()


class LogMeter:
    """The bytes each function logs, as CloudWatch Logs would ingest them.

    Two kinds of lines reach a function's log group in Lambda, both counted
    where local mode emits them:

    * its Powertools ``Logger``'s JSON lines, at the level the process runs
      (deployed: INFO, infra.functions' application log level; local mode's
      default is WARNING, so set ``POWERTOOLS_LOG_LEVEL=INFO`` to count what a
      deployed crawl logs).  ``counting()`` wraps the stream of each handler of
      the logger named after the function (Powertools names it after its
      service) and counts every byte written through it, line feeds included;
    * its metrics' EMF lines, which Lambda ingests as log events too: local
      mode writes them to ``OUT/metrics.jsonl``, and ``by_function()`` counts
      that file's lines by their ``service`` key.

    Not counted: Lambda's own START/END/REPORT lines (the system log level is
    WARN, infra.functions, so they are not sent) and the records of other
    loggers (``crawlstack.*``: warnings only, none in a clean crawl).
    """

    def __init__(self) -> None:
        self.logger_bytes: Counter[str] = Counter()
        self.functions: set[str] = set()
        self.wrapped: set[str] = set()
        self._lock = threading.Lock()

    def _counter(self, function: str) -> Callable[[int], None]:
        def count(n: int) -> None:
            with self._lock:
                self.logger_bytes[function] += n

        return count

    @contextlib.contextmanager
    def counting(self, functions: Iterable[str]) -> Iterator[LogMeter]:
        """Count what the functions' loggers (already set up: the handlers imported) write meanwhile."""
        swapped: list[tuple[logging.StreamHandler[Any], IO[str]]] = []
        for function in functions:
            self.functions.add(function)
            for handler in logging.getLogger(function).handlers:
                if isinstance(handler, logging.StreamHandler):
                    inner = handler.stream
                    handler.setStream(_CountingStream(inner, self._counter(function)))
                    swapped.append((handler, inner))
                    self.wrapped.add(function)
        try:
            yield self
        finally:
            for handler, inner in swapped:
                handler.setStream(inner)

    def by_function(self, metrics_file: Path | None = None) -> dict[str, dict[str, int | None]]:
        """``{function: {"logger": bytes, or None when no logger was found, "emf": bytes}}``.

        Every function ``counting()`` was given is there; EMF lines of no
        function's are under ``"(other)"``.
        """
        emf: Counter[str] = Counter()
        if metrics_file is not None and metrics_file.exists():
            with metrics_file.open("rb") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    try:
                        service = json.loads(line).get("service")
                    except (ValueError, AttributeError):
                        service = None
                    emf[service if isinstance(service, str) else "(other)"] += len(line)
        functions = sorted(self.functions | set(emf))
        return {f: {"logger": self.logger_bytes[f] if f in self.wrapped else None, "emf": emf[f]} for f in functions}


@dataclass
class Bill:
    """Units and calls seen by a counting endpoint; ``observe`` is its observer."""

    units: Counter[str] = field(default_factory=Counter)
    # DynamoDB write units per table: where a page's writes go.
    write_units_by_table: Counter[str] = field(default_factory=Counter)
    billed_calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Units by (service, operation, unit): which calls a service's bill comes from.
    units_by_operation: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    unbilled_calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, call: Any) -> None:
        # A failed call is billed too, mostly; this prices none but the failed
        # conditions (400): a counting run fails nothing else.
        failed = call.status is None or call.status >= 300
        condition_failed = call.service == "dynamodb" and call.status == 400 and call.operation in _DDB_WRITES
        if failed and not condition_failed:
            return
        units = units_of(call.service, call.operation, call.path, call.request, call.reply)
        if condition_failed:
            units = {"ddb_wru": units.get("ddb_wru", 1)}
        by_table = _write_units_by_table(call.operation, call.request, units) if call.service == "dynamodb" else {}
        with self._lock:
            if units:
                self.billed_calls[(call.service, call.operation)] += 1
                self.units.update(units)
                self.units_by_operation.update({(call.service, call.operation, u): n for u, n in units.items()})
                self.write_units_by_table.update(by_table)
            else:
                self.unbilled_calls[(call.service, call.operation)] += 1

    def usd(self) -> dict[str, float]:
        """Dollars per service: sqs, dynamodb, s3, events."""
        u = self.units
        return {
            "sqs": u["sqs_requests"] * PRICES["sqs_requests"],
            "dynamodb": u["ddb_wru"] * PRICES["ddb_wru"] + u["ddb_rru"] * PRICES["ddb_rru"],
            "s3": u["s3_put"] * PRICES["s3_put"] + u["s3_get"] * PRICES["s3_get"],
            "events": u["events_put"] * PRICES["events_put"],
        }

    def calls_by_service(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (service, _), n in self.billed_calls.items():
            out[service] += n
        return dict(out)
