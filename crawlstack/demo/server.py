"""A small multi-host web server on loopback addresses, for the demo and the tests.

Each "host" gets its own loopback address (``127.0.0.2``, ``127.0.0.3``, ...;
every ``127.x.y.z`` is loopback on Linux) and its own port, so a crawler sees
several independent origins, each with its own robots.txt and politeness::

    with LoopbackWeb({"127.0.0.2": {"/": "<a href='/a'>a</a>", "/a": "hello"}}) as web:
        seed = web.url("127.0.0.2", "/")
        ...
        assert web.paths("127.0.0.2") == ["/robots.txt", "/", "/a"]

A host is served from a dict of path -> response, a directory of static
files, or both (routes first).  A response is a :class:`Response`, a ``str``
or ``bytes`` body (200, ``text/html``), a dict of :class:`Response` fields, or a
callable taking the :class:`Request` and returning any of these (``None``
means 404).  Route keys are matched first with the query string, then
without.  robots.txt is just another path; a missing path is a 404.

``{{url}}`` in a ``str`` body or a static text file becomes the host's own
base URL (``http://127.0.0.2:PORT``) and ``{{url:127.0.0.3}}`` another host's,
so pages can link across hosts whose ports are only known once bound.

Every request is logged (thread-safe) with its arrival time, both monotonic
and wall-clock, and the monotonic time its response finished; see
:attr:`LoopbackWeb.log`, :meth:`LoopbackWeb.requests_for` and
:meth:`LoopbackWeb.paths`.  Nothing is written to stderr per request.

``python -m crawlstack.demo.server`` serves the bundled demo site and prints
its seed URLs.
"""

from __future__ import annotations

import argparse
import contextlib
import mimetypes
import posixpath
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Union
from urllib.parse import unquote, urlsplit

__all__ = [
    "DEMO_HOSTS",
    "RULES_DIR",
    "SITE_DIR",
    "Host",
    "LoggedRequest",
    "LoopbackWeb",
    "Request",
    "Response",
    "demo_seeds",
    "demo_web",
    "main",
]

DEMO_DIR = Path(__file__).resolve().parent
SITE_DIR = DEMO_DIR / "site"
RULES_DIR = DEMO_DIR / "rules"
# Demo host address -> its directory under SITE_DIR: a bookshop, its authors, a
# Tumblr-like JSON post API and the journal its posts reblog.
DEMO_HOSTS = {"127.0.0.2": "books", "127.0.0.3": "authors", "127.0.0.4": "api", "127.0.0.5": "journal"}
# Seed paths per demo host (the journal has none: the API's posts lead there).
DEMO_SEED_PATHS = {
    "127.0.0.2": "/catalogue/page-1.html",
    "127.0.0.3": "/authors/",
    "127.0.0.4": "/v2/blog/bookish/posts/page-1.json",
}

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml", "application/javascript")
_PLACEHOLDER = re.compile(r"\{\{url(?::([0-9A-Za-z.:\[\]-]+))?\}\}")


@dataclass
class Response:
    """What a host answers: status, headers, body and an optional delay before answering.

    ``content_type`` defaults to ``text/html; charset=utf-8`` unless ``headers``
    has a Content-Type.  A ``str`` body is encoded as UTF-8 after placeholder
    substitution.  ``delay`` seconds are slept after the request arrives and
    before the status line is sent; ``drip`` seconds before each byte of the
    body (a server that trickles its answer), ``drip_head`` before each byte
    of the status line and headers.
    """

    body: bytes | str = b""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    content_type: str | None = None
    drip: float = 0.0
    drip_head: float = 0.0


@dataclass(frozen=True)
class Request:
    """A request as handed to a callable route."""

    method: str
    path: str  # with the query string
    headers: Mapping[str, str]
    address: str
    port: int
    web: LoopbackWeb

    @property
    def bare_path(self) -> str:
        return urlsplit(self.path).path

    @property
    def query(self) -> str:
        return urlsplit(self.path).query


ResponseLike = Union[Response, str, bytes, Mapping[str, Any], Callable[[Request], Any], None]  # noqa: UP007


@dataclass
class LoggedRequest:
    """One request in the log.  ``finished`` is None until the response is written."""

    address: str
    port: int
    method: str
    path: str  # with the query string
    user_agent: str | None
    arrived: float  # time.monotonic()
    arrived_wall: float  # time.time()
    finished: float | None = None  # time.monotonic()
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        """``address:port``, as in a URL's netloc."""
        return f"{self.address}:{self.port}"

    @property
    def bare_path(self) -> str:
        return urlsplit(self.path).path


@dataclass
class Host:
    """One served host.  ``port`` 0 picks a free port; after start it holds the bound one."""

    address: str
    routes: dict[str, ResponseLike] = field(default_factory=dict)
    root: Path | None = None
    port: int = 0
    fallback: ResponseLike = None  # answers paths no route or file matches; None -> 404
    _server: _HostServer | None = field(default=None, repr=False, compare=False)
    _thread: threading.Thread | None = field(default=None, repr=False, compare=False)

    @property
    def netloc(self) -> str:
        return f"{self.address}:{self.port}" if self.port != 80 else self.address

    @property
    def base_url(self) -> str:
        return f"http://{self.netloc}"


class _HostServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, web: LoopbackWeb, host: Host) -> None:
        self.web = web
        self.host_spec = host
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__((host.address, host.port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.connections_lock:
            conns = list(self.connections)
            self.connections.clear()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "LoopbackWeb/1.0"
    timeout = 30
    server: _HostServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve()

    def flush_headers(self) -> None:
        drip = getattr(self, "_drip_head", 0.0)
        if drip <= 0:
            super().flush_headers()
            return
        head = b"".join(getattr(self, "_headers_buffer", []))
        self._headers_buffer: list[bytes] = []
        for i in range(len(head)):
            time.sleep(drip)
            self.wfile.write(head[i : i + 1])
            self.wfile.flush()

    def do_HEAD(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._serve()

    def _serve(self) -> None:
        arrived, arrived_wall = time.monotonic(), time.time()
        web, host = self.server.web, self.server.host_spec
        entry = LoggedRequest(
            address=host.address,
            port=host.port,
            method=self.command,
            path=self.path,
            user_agent=self.headers.get("User-Agent"),
            arrived=arrived,
            arrived_wall=arrived_wall,
            headers={k: v for k, v in self.headers.items()},
        )
        web._record(entry)
        try:
            request = Request(self.command, self.path, entry.headers, host.address, host.port, web)
            try:
                response = web._resolve(host, request)
            except Exception as exc:  # a broken callable route answers 500
                response = Response(f"route error: {exc!r}", status=500, content_type="text/plain; charset=utf-8")
            if response.delay > 0:
                time.sleep(response.delay)
            body = response.body
            if isinstance(body, str):
                body = web.substitute(body, host).encode("utf-8")
            headers = dict(response.headers)
            lower = {k.lower() for k in headers}
            entry.status = response.status
            self._drip_head = response.drip_head
            self.send_response(response.status)
            if "content-type" not in lower:
                self.send_header("Content-Type", response.content_type or "text/html; charset=utf-8")
            for name, value in headers.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD" and response.drip > 0:
                self.wfile.flush()
                for i in range(len(body)):
                    time.sleep(response.drip)
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
            elif self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            entry.finished = time.monotonic()


def _normalise(value: Any) -> Response:
    if isinstance(value, Response):
        return value
    if isinstance(value, str | bytes):
        return Response(body=value)
    if isinstance(value, Mapping):
        return Response(**dict(value))
    if isinstance(value, tuple) and len(value) == 2:
        return Response(body=value[1], status=int(value[0]))
    raise TypeError(f"not a response: {value!r}")


def _not_found() -> Response:
    return Response("<html><body><h1>404 Not Found</h1></body></html>", status=404)


class LoopbackWeb:
    """Several HTTP hosts on loopback addresses, served from daemon threads.

    ``hosts`` maps an address to its routes dict, a static directory (``Path``)
    or a :class:`Host`; :meth:`add_host` adds more, before or after
    :meth:`start`.  Use as a context manager or call :meth:`start` and
    :meth:`stop`.
    """

    def __init__(self, hosts: Mapping[str, Mapping[str, ResponseLike] | Path | Host] | Iterable[Host] = ()) -> None:
        self.hosts: dict[str, Host] = {}
        self._lock = threading.Lock()
        self._log: list[LoggedRequest] = []
        self._started = False
        items: Iterable[Host]
        if isinstance(hosts, Mapping):
            items = [self._make_host(address, spec) for address, spec in hosts.items()]
        else:
            items = hosts
        for host in items:
            self.hosts[host.address] = host

    @staticmethod
    def _make_host(address: str, spec: Mapping[str, ResponseLike] | Path | Host) -> Host:
        if isinstance(spec, Host):
            return spec
        if isinstance(spec, Path):
            return Host(address, root=spec)
        return Host(address, routes=dict(spec))

    # --- lifecycle ---------------------------------------------------------
    def add_host(
        self,
        address: str,
        routes: Mapping[str, ResponseLike] | None = None,
        *,
        root: Path | str | None = None,
        port: int = 0,
        fallback: ResponseLike = None,
    ) -> Host:
        """Add a host (and bind it at once if the web is running); return it."""
        if address in self.hosts:
            raise ValueError(f"host {address} already added")
        host = Host(address, dict(routes or {}), Path(root) if root is not None else None, port, fallback)
        self.hosts[address] = host
        if self._started:
            try:
                self._bind(host)
            except BaseException:
                del self.hosts[address]
                raise
        return host

    def _bind(self, host: Host) -> None:
        server = _HostServer(self, host)
        host.port = server.server_address[1]
        host._server = server
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"loopweb-{host.netloc}", daemon=True
        )
        host._thread = thread
        thread.start()

    def start(self) -> LoopbackWeb:
        if not self._started:
            self._started = True
            try:
                for host in self.hosts.values():
                    if host._server is None:
                        self._bind(host)
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self) -> None:
        """Stop serving and close the listening sockets and open connections."""
        for host in self.hosts.values():
            server = host._server
            if server is None:
                continue
            server.shutdown()
            server.close_connections()
            server.server_close()
            if host._thread is not None:
                host._thread.join(timeout=5)
            host._server = None
            host._thread = None
        self._started = False

    def __enter__(self) -> LoopbackWeb:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- addresses ---------------------------------------------------------
    def host(self, address: str) -> Host:
        return self.hosts[address]

    def port(self, address: str) -> int:
        return self.hosts[address].port

    def netloc(self, address: str) -> str:
        return self.hosts[address].netloc

    def base_url(self, address: str) -> str:
        return self.hosts[address].base_url

    def url(self, address: str, path: str = "/") -> str:
        if not path.startswith("/"):
            path = "/" + path
        return self.base_url(address) + path

    def substitute(self, text: str, host: Host | None = None) -> str:
        """Replace ``{{url}}`` (``host``'s base URL) and ``{{url:ADDRESS}}`` in ``text``."""

        def repl(match: re.Match[str]) -> str:
            address = match.group(1)
            if address is None:
                return host.base_url if host is not None else match.group(0)
            target = self.hosts.get(address)
            return target.base_url if target is not None else match.group(0)

        return _PLACEHOLDER.sub(repl, text) if "{{url" in text else text

    # --- routes ------------------------------------------------------------
    def set_route(self, address: str, path: str, response: ResponseLike) -> None:
        """Add or replace a route; ``None`` removes it."""
        routes = self.hosts[address].routes
        if response is None:
            routes.pop(path, None)
        else:
            routes[path] = response

    def _resolve(self, host: Host, request: Request) -> Response:
        for key in (request.path, request.bare_path):
            if key in host.routes:
                return self._call(host.routes[key], request)
        if host.root is not None:
            static = self._static(host, request.bare_path)
            if static is not None:
                return static
        if host.fallback is not None:
            return self._call(host.fallback, request)
        return _not_found()

    def _call(self, value: ResponseLike, request: Request) -> Response:
        while callable(value) and not isinstance(value, Response):
            value = value(request)
        if value is None:
            return _not_found()
        return _normalise(value)

    def _static(self, host: Host, path: str) -> Response | None:
        assert host.root is not None
        root = host.root.resolve()
        rel = posixpath.normpath(unquote(path)).lstrip("/")
        if rel in ("", "."):
            rel = ""
        if rel.startswith(".."):
            return None
        target = (root / rel).resolve()
        if target != root and root not in target.parents:
            return None
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            return None
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        data = target.read_bytes()
        if ctype.startswith(_TEXT_TYPES):
            text = self.substitute(data.decode("utf-8"), host)
            return Response(text.encode("utf-8"), content_type=f"{ctype}; charset=utf-8")
        return Response(data, content_type=ctype)

    # --- the request log ---------------------------------------------------
    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)

    @property
    def log(self) -> list[LoggedRequest]:
        """All requests so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._log)

    def count(self) -> int:
        """How many requests the log holds (without copying it)."""
        with self._lock:
            return len(self._log)

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    @staticmethod
    def _matches(entry: LoggedRequest, host: str) -> bool:
        return host in (entry.address, entry.host)

    def requests_for(self, host: str) -> list[LoggedRequest]:
        """Requests to ``host`` (an address or ``address:port``), in arrival order."""
        return [e for e in self.log if self._matches(e, host)]

    def paths(self, host: str) -> list[str]:
        """Request paths (with query) to ``host``, in arrival order."""
        return [e.path for e in self.requests_for(host)]

    def wait_idle(self, quiet_seconds: float = 0.2, timeout: float = 10.0) -> bool:
        """Wait until no request is in flight and none arrived for ``quiet_seconds``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.log
            now = time.monotonic()
            busy = any(e.finished is None for e in log)
            last = max((e.arrived for e in log), default=0.0)
            if not busy and now - last >= quiet_seconds:
                return True
            time.sleep(0.02)
        return False


# --- the bundled demo ------------------------------------------------------
def demo_web(ports: Mapping[str, int] | None = None) -> LoopbackWeb:
    """The bundled demo site, one host per :data:`DEMO_HOSTS` entry (not started)."""
    ports = ports or {}
    return LoopbackWeb([Host(addr, root=SITE_DIR / name, port=ports.get(addr, 0)) for addr, name in DEMO_HOSTS.items()])


def demo_seeds(web: LoopbackWeb) -> list[str]:
    """Seed URLs of a started :func:`demo_web`."""
    return [web.url(addr, path) for addr, path in DEMO_SEED_PATHS.items()]


def demo_allow_ports(web: LoopbackWeb) -> list[str]:
    """``--allow-port`` flags for the demo hosts without a seed (the journal): a crawl fetches other
    ports than 80 and 443 only on its seeds' host and port, or where allowed."""
    ports = sorted({web.hosts[addr].port for addr in DEMO_HOSTS if addr not in DEMO_SEED_PATHS})
    return [flag for port in ports for flag in ("--allow-port", str(port))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crawlstack.demo.server", description="Serve the crawlstack demo site on loopback addresses."
    )
    parser.add_argument("--port", type=int, default=8000, help="port for every demo host (0 = a free one each)")
    args = parser.parse_args(argv)
    web = demo_web({addr: args.port for addr in DEMO_HOSTS})
    try:
        web.start()
    except OSError as exc:
        print(f"cannot bind the demo hosts: {exc}", file=sys.stderr)
        return 1
    seeds = demo_seeds(web)
    print("Serving the crawlstack demo site:")
    for addr, name in DEMO_HOSTS.items():
        print(f"  {name:8} {web.base_url(addr)}/  (from {SITE_DIR / name})")
    print("\nSeed URLs:")
    for seed in seeds:
        print(f"  {seed}")
    print("\nCrawl it with:")
    print(
        "  crawlstack crawl --local " + " ".join(seeds) + f" --rules {RULES_DIR} --out demo-out"
        " --max-depth 3 --delay 0.5 --allow-private 127.0.0.0/8 " + " ".join(demo_allow_ports(web))
    )
    print("\nPress Ctrl-C to stop.", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        web.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
