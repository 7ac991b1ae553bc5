"""A fault-injecting AWS endpoint: a loopback HTTP proxy in front of an AWS-compatible one.

It forwards every request to an upstream endpoint (a moto server, LocalStack)
and fails a share of them, as AWS now and then does::

    with FaultyEndpoint("http://127.0.0.1:5000", FaultPlan(failure_rate=0.15, seed=7)) as faulty:
        run_a_crawl(endpoint_url=faulty.url)
    faulty.calls[("dynamodb", "PutItem")]       # every call, by service and operation
    faulty.faults[("dynamodb", "PutItem", "after")]  # the ones it failed, by kind

A failed call fails in one of two ways:

* **before**: an error reply without forwarding, so nothing was done: a 500
  (``InternalServerError`` for JSON protocols, ``InternalError`` for S3's
  XML and SQS's query protocol) or a throttling error (``ThrottlingException``,
  400; S3's ``SlowDown``, 503).  botocore's standard retry mode retries both.
* **after**: forwarded, so the upstream did the work, then the reply is lost:
  a 500 in place of it, or the connection dropped.  Only successful replies
  are lost (an error's retry would meet the same error).  The client retries a
  call that already happened: a conditional write then meets its own write,
  a counter is added twice, a message is sent twice.

Service and operation come from the request: ``X-Amz-Target`` for JSON
protocols (DynamoDB, SQS), ``Action=`` for the query protocol, and the
method, path and query for S3 (path-style addressing, as botocore uses for an
IP address endpoint); the service itself from the SigV4 credential scope.
Every call is counted (``calls``), failed or not, and ``observers`` see each
one (:class:`Call`, with its request and reply sizes), so a cost model can be
laid over the same counts later.

Faults are drawn from one RNG seeded by ``FaultPlan.seed``; which calls fail
still depends on the order concurrent calls arrive in.  ``plan`` may be
replaced while the endpoint serves (set up resources without faults, then
turn them on).  Requests are
forwarded one at a time (``serialize``): moto's backends are not safe under
concurrent requests, and DynamoDB makes each request atomic.

``python -m crawlstack.local.faulty --upstream URL --failure-rate 0.1 --port N``
runs one by hand (``--upstream`` omitted: a moto server of its own); point a
crawl at it with ``crawlstack crawl --local --endpoint-url http://127.0.0.1:N``.
Settings: none; everything is in :class:`FaultPlan`.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import random
import re
import signal
import socket
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["KINDS", "Call", "FaultPlan", "FaultyEndpoint", "identify", "main"]

# before: nothing done, an error returned.  after: done upstream, the reply lost.
KINDS = ("before", "after")
# A lost ReceiveMessage reply only hides its messages until their visibility
# timeout ends (a minute or more in local mode): a delay, not a case the
# crawler's code decides anything about.  Spared by default; see ``after_exempt``.
DEFAULT_AFTER_EXEMPT = frozenset({"sqs:ReceiveMessage"})
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
}
_CREDENTIAL = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/,\s]+/([^/,\s]+)/aws4_request")


@dataclass(frozen=True)
class FaultPlan:
    """Which calls fail, and how.

    ``failure_rate``: the share of calls failed.  Of those, ``after_share``
    fail after the work (the rest before it); of the after-faults,
    ``drop_share`` drop the connection (the rest return a 500); of the
    before-faults, ``throttle_share`` are throttling errors (the rest 500s).
    ``exempt``: ``service:Operation`` names never failed; ``after_exempt``:
    never failed after the work (failed before it instead).

    ``fail_attempts``: only attempts up to this number of a call fail (the
    SDK's ``amz-sdk-request: attempt=N`` header), so that retries end in
    success; None fails any attempt.  At a failure share far above AWS's,
    failing every attempt mostly measures botocore's retry quota: each
    client has 500 tokens, a retry costs 14, and a call that ends in an
    error (a conditional write retried after its reply was lost fails its
    condition) gives none back, so the quota drains and the client stops
    retrying at all.
    """

    failure_rate: float = 0.1
    seed: int = 0
    after_share: float = 0.5
    drop_share: float = 0.5
    throttle_share: float = 0.25
    exempt: frozenset[str] = frozenset()
    after_exempt: frozenset[str] = DEFAULT_AFTER_EXEMPT
    fail_attempts: int | None = None

    def __post_init__(self) -> None:
        for name in ("failure_rate", "after_share", "drop_share", "throttle_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {value}")


@dataclass(frozen=True)
class Call:
    """One call through the endpoint, as observers see it."""

    service: str
    operation: str
    fault: str | None  # None, or the kind and form: "before-500", "before-throttle", "after-500", "after-drop"
    status: int | None  # the status the client got (None: connection dropped)
    request_bytes: int
    response_bytes: int
    # What was sent and answered, for observers that price calls (crawlstack.local.billing).
    path: str = field(default="", repr=False)
    request: bytes = field(default=b"", repr=False)
    reply: bytes = field(default=b"", repr=False)


def identify(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[str, str]:
    """(service, operation) of an AWS request; ``("unknown", METHOD)`` when it cannot tell."""
    lower = {k.lower(): v for k, v in headers.items()}
    target = lower.get("x-amz-target", "")
    match = _CREDENTIAL.search(lower.get("authorization", ""))
    service = match.group(1) if match else ""
    split = urlsplit(path)
    query = parse_qs(split.query, keep_blank_values=True)
    if not service and "X-Amz-Credential" in query:  # a presigned URL
        parts = query["X-Amz-Credential"][0].split("/")
        service = parts[3] if len(parts) > 3 else ""
    if target:
        prefix, _, operation = target.rpartition(".")
        if not service:
            service = "dynamodb" if prefix.startswith("DynamoDB") else "sqs" if "SQS" in prefix else prefix.lower()
        return service, operation
    if service != "s3":
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True) if body else {}
        action = (form.get("Action") or query.get("Action") or [""])[0]
        if action:
            return service or "sqs", action
        if service:
            return service, method
    return "s3", _s3_operation(method, split.path, query, lower)


def _s3_operation(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> str:
    parts = [p for p in path.split("/") if p]
    if not parts:
        return "ListBuckets" if method == "GET" else method
    sub = next((q for q in ("notification", "delete", "uploads", "uploadId", "tagging", "policy") if q in query), "")
    if len(parts) == 1:  # the bucket itself
        if sub == "notification":
            return {"PUT": "PutBucketNotificationConfiguration", "GET": "GetBucketNotificationConfiguration"}.get(
                method, method
            )
        if sub == "delete" and method == "POST":
            return "DeleteObjects"
        bucket_ops = {
            "PUT": "CreateBucket",
            "HEAD": "HeadBucket",
            "DELETE": "DeleteBucket",
            "GET": "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects",
        }
        return bucket_ops.get(method, method)
    if sub == "uploads" and method == "POST":
        return "CreateMultipartUpload"
    if sub == "uploadId":
        return {"PUT": "UploadPart", "POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload"}.get(
            method, "ListParts"
        )
    if method == "PUT":
        return "CopyObject" if "x-amz-copy-source" in headers else "PutObject"
    return {"GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)


def _attempt(headers: dict[str, str]) -> int:
    """Which attempt of its call a request is (botocore's ``amz-sdk-request: attempt=N; max=M``), 1 if unsaid."""
    value = next((v for k, v in headers.items() if k.lower() == "amz-sdk-request"), "")
    match = re.search(r"attempt=(\d+)", value)
    return int(match.group(1)) if match else 1


def _error(service: str, headers: dict[str, str], body: bytes, throttle: bool) -> tuple[int, str, bytes]:
    """(status, content type, body) of an error botocore's standard retry mode retries, in the call's protocol."""
    lower = {k.lower() for k in headers}
    if "x-amz-target" in lower:  # JSON protocols (DynamoDB, SQS)
        code, status = ("ThrottlingException", 400) if throttle else ("InternalServerError", 500)
        payload = {"__type": f"com.amazonaws.{service}#{code}", "message": "injected fault"}
        return status, "application/x-amz-json-1.0", json.dumps(payload).encode()
    if service == "s3":
        code, status = ("SlowDown", 503) if throttle else ("InternalError", 500)
        xml = f"<Error><Code>{code}</Code><Message>injected fault</Message><RequestId>faulty</RequestId></Error>"
        return status, "application/xml", xml.encode()
    code, status = ("Throttling", 400) if throttle else ("InternalError", 500)
    xml = (
        f"<ErrorResponse><Error><Type>Receiver</Type><Code>{code}</Code><Message>injected fault</Message></Error>"
        "<RequestId>faulty</RequestId></ErrorResponse>"
    )
    return status, "text/xml", xml.encode()


class FaultyEndpoint:
    """The proxy; a context manager that serves on ``url`` (``127.0.0.1``, a free port unless given)."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None, port: int = 0, serialize: bool = True) -> None:
        split = urlsplit(upstream)
        if split.scheme != "http" or not split.hostname:
            raise ValueError(f"upstream must be an http:// URL, not {upstream!r}")
        self.upstream_host = split.hostname
        self.upstream_port = split.port or 80
        self.plan = plan or FaultPlan()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.faults: Counter[tuple[str, str, str]] = Counter()
        self.observers: list[Callable[[Call], None]] = []
        self._rng = random.Random(self.plan.seed)
        self._lock = threading.Lock()
        self._forward_lock = threading.Lock() if serialize else None
        self._local = threading.local()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def fault_count(self, kind: str) -> int:
        """Calls failed ``before`` or ``after`` the work, over every operation."""
        return sum(n for (_, _, k), n in self.faults.items() if k == kind)

    def start(self) -> FaultyEndpoint:
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultyEndpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- the work ----------------------------------------------------------------
    def _decide(self, service: str, operation: str, attempt: int) -> str | None:
        """The fault for this call, if any: ``before-500``, ``before-throttle``, ``after-500``, ``after-drop``."""
        name = f"{service}:{operation}"
        plan = self.plan
        with self._lock:
            self.calls[(service, operation)] += 1
            if self._rng.random() >= plan.failure_rate or name in plan.exempt:
                return None
            if plan.fail_attempts is not None and attempt > plan.fail_attempts:
                return None
            after = self._rng.random() < plan.after_share and name not in plan.after_exempt
            if after:
                fault = "after-drop" if self._rng.random() < plan.drop_share else "after-500"
            else:
                fault = "before-throttle" if self._rng.random() < plan.throttle_share else "before-500"
            if fault.startswith("before"):
                self.faults[(service, operation, "before")] += 1
            return fault

    def _count_after(self, service: str, operation: str) -> None:
        with self._lock:
            self.faults[(service, operation, "after")] += 1

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, list[Any], bytes]:
        """Send the request upstream on this thread's connection; (status, headers, body)."""
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
                self._local.conn = conn
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.getheaders(), data
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:  # a fresh connection failed too: the upstream is down
                    raise
        raise AssertionError("unreachable")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without this, Nagle's
                # algorithm and delayed ACKs hold each reply back 40 ms.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _serve(self) -> None:
                body = self._read_body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                if "Transfer-Encoding" in self.headers or "transfer-encoding" in self.headers:
                    headers["Content-Length"] = str(len(body))
                service, operation = identify(self.command, self.path, headers, body)
                fault = endpoint._decide(service, operation, _attempt(headers))
                status: int | None
                if fault is not None and fault.startswith("before"):
                    status, ctype, data = _error(service, headers, body, throttle=fault == "before-throttle")
                    self._reply(status, [("Content-Type", ctype)], data)
                else:
                    if endpoint._forward_lock is not None:
                        with endpoint._forward_lock:
                            status, reply_headers, data = endpoint._forward(self.command, self.path, headers, body)
                    else:
                        status, reply_headers, data = endpoint._forward(self.command, self.path, headers, body)
                    if fault is not None and status >= 300:
                        # Only a success is lost: an error's retry meets the same error,
                        # which tests nothing and spends botocore's retry quota.
                        fault = None
                    if fault is not None:
                        endpoint._count_after(service, operation)
                    if fault == "after-drop":
                        status, data = None, b""
                        self.close_connection = True
                        with contextlib.suppress(OSError):
                            self.connection.shutdown(socket.SHUT_RDWR)
                    elif fault == "after-500":
                        status, ctype, data = _error(service, headers, body, throttle=False)
                        self._reply(status, [("Content-Type", ctype)], data)
                    else:
                        self._reply(status, reply_headers, data)
                call = Call(service, operation, fault, status, len(body), len(data), self.path, body, data)
                for observer in list(endpoint.observers):
                    observer(call)

            def _read_body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks: list[bytes] = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _reply(self, status: int, headers: Iterable[tuple[str, str]], data: bytes) -> None:
                self.send_response_only(status)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP and name.lower() not in ("content-length", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crawlstack.local.faulty",
        description="An AWS-compatible endpoint that fails a share of calls, in front of another one.",
    )
    parser.add_argument(
        "--upstream", metavar="URL", help="the endpoint to forward to (default: a moto server of its own)"
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on, on 127.0.0.1 (default: a free one)")
    parser.add_argument("--failure-rate", type=float, default=0.1, help="share of calls failed (default 0.1)")
    parser.add_argument("--after-share", type=float, default=0.5, help="share of faults after the work (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault RNG (default 0)")
    parser.add_argument(
        "--fail-attempts",
        type=int,
        default=None,
        metavar="N",
        help="fail only a call's first N attempts, so retries end in success (default: any attempt)",
    )
    parser.add_argument(
        "--fail-receive", action="store_true", help="also lose ReceiveMessage replies (spared by default)"
    )
    args = parser.parse_args(argv)
    try:
        plan = FaultPlan(
            failure_rate=args.failure_rate,
            after_share=args.after_share,
            seed=args.seed,
            fail_attempts=args.fail_attempts,
            after_exempt=frozenset() if args.fail_receive else DEFAULT_AFTER_EXEMPT,
        )
    except ValueError as exc:
        print(f"faulty: {exc}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as resources:
        upstream = args.upstream or resources.enter_context(moto_server())
        try:
            endpoint = FaultyEndpoint(upstream, plan, port=args.port)
        except (ValueError, OSError) as exc:
            print(f"faulty: {exc}", file=sys.stderr)
            return 2
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with endpoint:
            print(f"faulty endpoint {endpoint.url} -> {upstream}, failing {plan.failure_rate:.0%} of calls", flush=True)
            try:
                while not stop.wait(0.5):
                    pass
            except KeyboardInterrupt:
                pass
    print(_report(endpoint), file=sys.stderr)
    return 0


@contextlib.contextmanager
def moto_server(reset: bool = False) -> Iterator[str]:
    """A moto server on a free loopback port, without a log line per request; its URL while the block runs.

    ``reset``: empty it first.  A threaded moto server keeps its state in the
    process's backends, which other servers and mocks of this process share.
    """
    import logging
    import urllib.request

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        if reset:
            urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).close()
        yield url
    finally:
        server.stop()


def _report(endpoint: FaultyEndpoint) -> str:
    lines = [f"{sum(endpoint.calls.values())} calls, {sum(endpoint.faults.values())} failed:"]
    for (service, operation), n in sorted(endpoint.calls.items()):
        before = endpoint.faults[(service, operation, "before")]
        after = endpoint.faults[(service, operation, "after")]
        lines.append(f"  {service}:{operation} {n} (failed {before} before, {after} after)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
