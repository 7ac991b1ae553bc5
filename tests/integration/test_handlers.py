"""The three Lambda handlers on the embedded emulator (moto), with Lambda-shaped SQS events.

Each test gets fresh queues, tables and bucket, and a fresh container
(``container.reset()``), the way ``crawlstack.local.runner`` sets them up.
Pages are served by a tiny HTTP server on 127.0.0.2, which the crawl's
config lets through the address guard.  Dispatch puts what it admits in
the host's backlog and sends a run message (``{"host", "run_id"}``) for a
run it starts; fetch takes run messages and works each host's backlog.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from drains import drain as drain_queue
from outcomes import crawl_outcomes
from webs import describe, page, robots

from crawlstack import aws, settings
from crawlstack.config import CrawlConfig
from crawlstack.demo.server import LoopbackWeb, Response
from crawlstack.fetch.warc import read_warc
from crawlstack.local import resources
from crawlstack.local.emulator import EmbeddedAws
from crawlstack.local.pump import LambdaContext
from crawlstack.messages import FetchTask, FrontierMessage, RunMessage, created_objects, frontier_messages
from crawlstack.urls import canonicalize, fingerprint
from crawlstack.watch.sources import Source
from functions import container
from functions.dispatch import handler as dispatch
from functions.extract import handler as extract
from functions.fetch import handler as fetch

CRAWL = "itest"
ADDRESS = "127.0.0.2"
UA = "crawlstack/itest (+https://example.invalid/bot)"
BOOK_RULE = {
    "name": "book",
    "url_patterns": [{"type": "regex", "pattern": r"/books/[\w-]+\.html$"}],
    "fields": [
        {
            "name": "title",
            "processors": [
                {"type": "xpath", "parameters": {"expression": "//h1/text()"}},
                {"type": "trim", "parameters": {}},
            ],
        }
    ],
}


# --- a tiny web server -------------------------------------------------------
class Site:
    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        self.redirects: dict[str, str] = {}
        self.requests: list[tuple[str, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append((self.path, self.headers.get("User-Agent", "")))
                status, ctype, body = site.routes.get(self.path, (404, "text/plain", b"not found"))
                self.send_response(status)
                if self.path in site.redirects:
                    self.send_header("Location", site.redirects[self.path])
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((ADDRESS, 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://{ADDRESS}:{self.server.server_address[1]}"

    def page(self, path: str, title: str, *links: str, ctype: str = "text/html; charset=utf-8") -> str:
        anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
        body = f"<html><body><h1> {title} </h1>{anchors}</body></html>".encode()
        self.routes[path] = (200, ctype, body)
        return self.base + path


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    thread = threading.Thread(target=s.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        s.server.shutdown()
        s.server.server_close()


# --- the emulated stack ------------------------------------------------------
@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "book.json").write_text(json.dumps(BOOK_RULE), encoding="utf-8")
    monkeypatch.setenv(settings.ENV_RULES_DIR, str(rules))
    monkeypatch.setenv(settings.ENV_DEFAULT_CRAWL_ID, CRAWL)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    # The adapters' default connection (the environment's) finds moto through these; EmbeddedAws writes none.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with EmbeddedAws():
        container.reset()
        names = resources.create_all(visibility_timeout=30)
        for key, value in names.items():
            monkeypatch.setenv(key, value)
        aws.CrawlStore(aws.StackNames.from_env(names).crawls).put(
            CrawlConfig(crawl_id=CRAWL, delay=0.0, user_agent=UA, max_depth=2, allow_private=("127.0.0.0/8",))
        )
        try:
            yield names
        finally:
            container.reset()


def queue_arn(names: dict[str, str], key: str) -> str:
    url = names[settings.ENV_QUEUE_URL[key]]
    attrs = aws.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(attrs["Attributes"]["QueueArn"])


def sqs_event(names: dict[str, str], key: str, *bodies: str, ids: list[str] | None = None) -> dict[str, Any]:
    arn = queue_arn(names, key)
    return {
        "Records": [
            {
                "messageId": ids[i] if ids else str(uuid.uuid4()),
                "receiptHandle": f"rh-{i}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for i, body in enumerate(bodies)
        ]
    }


def drain(names: dict[str, str], key: str) -> list[dict[str, Any]]:
    """Every message in the stack's ``key`` queue (delayed ones are not visible: the tests use delay 0)."""
    return drain_queue(names[settings.ENV_QUEUE_URL[key]])


def context(name: str) -> LambdaContext:
    spec = settings.FUNCTIONS[name]
    return LambdaContext(f"crawlstack-{name}", spec.memory_mb, spec.timeout_seconds)


def seed(url: str, depth: int = 0) -> str:
    return FrontierMessage(url=url, depth=depth, crawl_id=CRAWL).to_json()


def dispatch_and_collect(names: dict[str, str], *urls: str) -> list[dict[str, Any]]:
    """Dispatch ``urls`` as seeds, in one batch; the run messages it sent to the fetch queue."""
    response = dispatch.handler(sqs_event(names, "frontier", *(seed(u) for u in urls)), context("dispatch"))
    assert response == {"batchItemFailures": []}
    return drain(names, "fetch")


def backlog(names: dict[str, str], host: str = ADDRESS) -> list[FetchTask]:
    """The tasks waiting in ``host``'s backlog, shallowest bundle first."""
    bundles = aws.BacklogStore(aws.StackNames.from_env(names).parked).peek(host, 100)
    return [task for bundle in bundles for task in bundle.tasks]


def s3_event(bucket: str, key: str, name: str = "ObjectCreated:Put") -> str:
    return json.dumps(
        {
            "Records": [
                {
                    "eventVersion": "2.1",
                    "eventSource": "aws:s3",
                    "eventName": name,
                    "s3": {"bucket": {"name": bucket}, "object": {"key": key.replace("=", "%3D"), "size": 1}},
                }
            ]
        }
    )


# --- dispatch ----------------------------------------------------------------
def test_dispatch_partial_batch_response_queues_valid_seeds_only(
    stack: dict[str, str], site: Site, monkeypatch: pytest.MonkeyPatch, stack_names: aws.StackNames
) -> None:
    url = site.page("/", "home")
    svc = container.services()
    real = svc.dispatcher.dispatch

    def flaky(msg: FrontierMessage, outbox: Any, message_id: str = "") -> Any:
        if msg.url.endswith("/explode"):
            raise RuntimeError("table unavailable")
        return real(msg, outbox, message_id=message_id)

    monkeypatch.setattr(svc.dispatcher, "dispatch", flaky)
    warned: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(dispatch.logger, "warning", lambda msg, **keys: warned.append((msg, keys)))
    event = sqs_event(
        stack,
        "frontier",
        seed(url),
        "{not json",
        seed("http://off-site.invalid/page", depth=1),
        seed(site.base + "/explode"),
        ids=["m-seed", "m-bad-json", "m-off-site", "m-explode"],
    )
    response = dispatch.handler(event, context("dispatch"))
    # Only the message that may succeed later is reported; invalid and off-site ones are done with.
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-explode"}]}
    # Its reason is logged, one line, so a message that ends in the DLQ has its cause in the logs.
    assert warned == [
        (
            "message failed, to be retried",
            {"message_id": "m-explode", "receive_count": "1", "reason": "RuntimeError: table unavailable"},
        )
    ]

    # The seed waits in its host's backlog; the host's run was started, and its one message sent.
    [message] = drain(stack, "fetch")
    run = RunMessage.from_json(message["Body"])
    assert run.host == ADDRESS
    assert aws.RunStore(stack_names.hosts).get(ADDRESS).run_id == run.run_id
    [task] = backlog(stack)
    assert (task.url, task.crawl_id, task.depth, task.host) == (canonicalize(url), CRAWL, 0, ADDRESS)
    urls = aws.UrlStore(stack_names.urls)
    assert urls.state(CRAWL, fingerprint(canonicalize(url))) == "queued"
    # The off-site URL took no claim; it is noted, for the crawl log, as dropped with its reason.
    items = {item["url"]: item for item in urls.scan_crawl(CRAWL)}
    assert set(items) == {canonicalize(url), "http://off-site.invalid/page"}
    assert items[canonicalize(url)]["claimed_by"] == "m-seed"
    noted = items["http://off-site.invalid/page"]
    assert (noted["state"], noted["reason"], noted["claimable"]) == (
        "dropped",
        "off-site: not a seed host, a mapping or an allow pattern",
        True,
    )
    # Dispatch made no request: robots.txt is the host's run's to fetch.
    assert site.requests == []
    assert ADDRESS in aws.CrawlStore(stack_names.crawls).get(CRAWL, max_age=0).seed_hosts


def test_dispatch_queues_a_url_once_for_two_messages(stack: dict[str, str], site: Site) -> None:
    url = site.page("/a.html", "a")
    for message_id in ("m-1", "m-2"):
        event = sqs_event(stack, "frontier", seed(url), ids=[message_id])
        assert dispatch.handler(event, context("dispatch")) == {"batchItemFailures": []}
    container.reset()  # a second container sees the same table
    event = sqs_event(stack, "frontier", seed(url.replace(ADDRESS, ADDRESS.upper()) + "#x"), ids=["m-3"])
    dispatch.handler(event, context("dispatch"))
    # One task in the backlog, one run started for it.
    assert [t.url for t in backlog(stack)] == [canonicalize(url)]
    assert len(drain(stack, "fetch")) == 1


# --- fetch -------------------------------------------------------------------
def record_seed(url: str, record_id: str) -> str:
    return json.dumps({"url": url, "depth": 0, "crawl_id": CRAWL, "record_id": record_id, "want": ["title"]})


def test_a_seed_whose_record_id_is_not_utf8_is_one_invalid_message_and_its_batch_goes_on(
    stack: dict[str, str], site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 27: "\ud800" (JSON for a lone surrogate) passed, and its batch's read of records failed them all.
    a, b = site.page("/books/a.html", "a"), site.page("/books/b.html", "b")
    errors: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(dispatch.logger, "error", lambda msg, **keys: errors.append((msg, keys)))
    bad = record_seed(site.base + "/books/bad.html", "\ud800")
    assert "\\ud800" in bad  # the escape, as JSON carries it
    event = sqs_event(stack, "frontier", record_seed(a, "r-a"), bad, record_seed(b, "r-b"), ids=["m-a", "m-bad", "m-b"])
    # Invalid, so never retried: logged and let go; the good seeds are queued.
    assert dispatch.handler(event, context("dispatch")) == {"batchItemFailures": []}
    assert sorted(t.url for t in backlog(stack)) == [canonicalize(a), canonicalize(b)]
    [(message, keys)] = errors
    assert message == "invalid frontier message" and keys["reason"].startswith("'record_id' is not valid UTF-8")


def test_a_batched_read_that_one_message_breaks_fails_only_that_message(
    stack: dict[str, str], site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As DynamoDB refuses a whole BatchGetItem for one key it cannot take.
    a, b = site.page("/books/a.html", "a"), site.page("/books/b.html", "b")
    resolved = container.services().dispatcher.record_complete.resolved  # type: ignore[union-attr]
    real = resolved.get_many

    def refuses_poison(crawl_id: str, record_ids: Any) -> Any:
        ids = list(record_ids)
        if any(rid.startswith("poison") for rid in ids):
            raise RuntimeError("ValidationException: a key the table cannot take")
        return real(crawl_id, ids)

    monkeypatch.setattr(resolved, "get_many", refuses_poison)
    poison = record_seed(site.base + "/books/poison.html", "poison")
    bodies = (record_seed(a, "r-a"), poison, record_seed(b, "r-b"))
    event = sqs_event(stack, "frontier", *bodies, ids=["m-a", "m-p", "m-b"])
    assert dispatch.handler(event, context("dispatch")) == {"batchItemFailures": [{"itemIdentifier": "m-p"}]}
    assert sorted(t.url for t in backlog(stack)) == [canonicalize(a), canonicalize(b)]
    assert len(drain(stack, "fetch")) == 1  # the host's run, started for the good seeds


def test_a_failed_admission_fails_only_the_messages_whose_tasks_it_held(
    stack: dict[str, str], site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = "127.0.0.3"
    a, b = site.page("/books/a.html", "a"), site.page("/books/b.html", "b")
    elsewhere = site.base.replace(ADDRESS, other) + "/books/c.html"
    store = container.services().backlog
    real = store.add

    def refuses_other(host: str, depth: int, tasks: Any) -> Any:
        if host == other:
            raise RuntimeError("ValidationException: an item the table cannot take")
        return real(host, depth, tasks)

    monkeypatch.setattr(store, "add", refuses_other)
    event = sqs_event(stack, "frontier", seed(a), seed(elsewhere), seed(b), ids=["m-a", "m-other", "m-b"])
    # Hosts are admitted in the order first dispatched (ADDRESS, then the other): only the other's message failed.
    assert dispatch.handler(event, context("dispatch")) == {"batchItemFailures": [{"itemIdentifier": "m-other"}]}
    assert sorted(t.url for t in backlog(stack)) == [canonicalize(a), canonicalize(b)]
    assert [RunMessage.from_json(m["Body"]).host for m in drain(stack, "fetch")] == [ADDRESS]
    assert backlog(stack, other) == []


def test_fetch_writes_one_warc_for_a_batch_and_records_outcomes(
    stack: dict[str, str], site: Site, stack_names: aws.StackNames
) -> None:
    pages = [site.page(f"/books/b{i}.html", f"Book {i}") for i in range(4)]
    site.routes["/logo.png"] = (200, "image/png", b"\x89PNG")
    urls = [*pages, site.base + "/logo.png", site.base + "/missing.html"]
    # One host: one run, whose message carries all six URLs' work.
    [message] = dispatch_and_collect(stack, *urls)
    assert {t.url for t in backlog(stack)} == {canonicalize(u) for u in urls}

    response = fetch.handler(sqs_event(stack, "fetch", message["Body"]), context("fetch"))
    assert response == {"batchItemFailures": []}

    blobs = aws.BlobStore(stack_names.bucket)
    [key] = list(blobs.keys(settings.PAGES_PREFIX))
    archived = {p.url: p for p in read_warc(blobs.get(key))}
    expected = {canonicalize(u) for u in [*pages, site.base + "/missing.html"]}
    assert set(archived) == expected
    assert archived[canonicalize(pages[0])].body.startswith(b"<html><body><h1> Book 0 </h1>")
    assert archived[canonicalize(pages[0])].metadata["crawl_id"] == CRAWL

    items = crawl_outcomes(stack_names, CRAWL)
    for url in pages:
        item = items[canonicalize(url)]
        assert (item["state"], item["status"], item["warc"]) == ("fetched", 200, key)
    assert items[canonicalize(site.base + "/missing.html")]["status"] == 404
    logo = items[canonicalize(site.base + "/logo.png")]
    assert (logo["state"], logo["reason"]) == ("skipped", "content-type image/png is not text")
    assert "warc" not in logo
    # And the crawl log for Athena: one object, one line per outcome.
    [log_key] = list(blobs.keys(settings.CRAWL_LOG_PREFIX))
    assert log_key.startswith(f"{settings.CRAWL_LOG_PREFIX}crawl_id={CRAWL}/dt=")
    log = {line["url"]: line for line in map(json.loads, gzip.decompress(blobs.get(log_key)).decode().splitlines())}
    assert set(log) == set(items)
    assert (log[logo["url"]]["outcome"], log[logo["url"]]["reason"]) == ("skipped", logo["reason"])
    assert log[canonicalize(pages[0])]["status"] == 200
    # The run fetched robots.txt as the host's first request, then each URL once, with the crawl's user agent.
    paths = [path for path, _ in site.requests]
    assert paths[0] == "/robots.txt"
    assert sorted(paths[1:]) == sorted(u.removeprefix(site.base) for u in urls)
    assert all(ua == UA for _, ua in site.requests)
    # The backlog is worked through and the run ended: no lease held, no wake-up sent.
    assert backlog(stack) == []
    run = aws.RunStore(stack_names.hosts).get(ADDRESS)
    assert (run.run_id, run.holder) == (None, None)
    assert drain(stack, "fetch") == []


def test_fetch_sends_a_redirect_back_to_the_frontier(stack: dict[str, str], site: Site) -> None:
    site.routes["/old"] = (301, "text/html", b"")
    site.redirects["/old"] = "/new.html"
    [message] = dispatch_and_collect(stack, site.base + "/old")
    assert fetch.handler(sqs_event(stack, "fetch", message["Body"]), context("fetch")) == {"batchItemFailures": []}
    [frontier] = drain(stack, "frontier")
    nxt = FrontierMessage.from_json(frontier["Body"])
    assert (nxt.url, nxt.hops, nxt.referrer) == (site.base + "/new.html", 1, canonicalize(site.base + "/old"))


def test_fetch_drops_stale_and_invalid_run_messages_and_fails_only_a_failed_hosts(
    stack: dict[str, str], site: Site, monkeypatch: pytest.MonkeyPatch, stack_names: aws.StackNames
) -> None:
    url = site.page("/a.html", "a")
    [message] = dispatch_and_collect(stack, url)
    run_id = RunMessage.from_json(message["Body"]).run_id
    real = aws.BacklogStore.peek
    calls: list[str] = []

    def down_once(
        self: aws.BacklogStore, host: str, limit: int, after: str | None = None, consistent: bool = True
    ) -> Any:
        calls.append(host)
        if len(calls) == 1:
            raise RuntimeError("backlog unavailable")
        return real(self, host, limit, after, consistent)

    monkeypatch.setattr(aws.BacklogStore, "peek", down_once)
    stale = RunMessage("other.invalid", "no-such-run").to_json()  # a host with no run: its lease is refused
    event = sqs_event(stack, "fetch", '{"host": ""}', stale, message["Body"], ids=["m-bad", "m-stale", "m-run"])
    # Only the failed host's message comes back; an invalid or refused one is done with.
    assert fetch.handler(event, context("fetch")) == {"batchItemFailures": [{"itemIdentifier": "m-run"}]}
    assert site.requests == []
    # The lease was given back under the same run id, so the redelivered message takes it at once.
    run = aws.RunStore(stack_names.hosts).get(ADDRESS)
    assert (run.run_id, run.holder) == (run_id, None)
    assert [t.url for t in backlog(stack)] == [canonicalize(url)]

    # Redelivered (twice in one batch, as SQS may): the host is leased once and its URL fetched once.
    event = sqs_event(stack, "fetch", message["Body"], message["Body"], ids=["m-run", "m-dup"])
    assert fetch.handler(event, context("fetch")) == {"batchItemFailures": []}
    assert [path for path, _ in site.requests] == ["/robots.txt", "/a.html"]
    assert crawl_outcomes(stack_names, CRAWL)[canonicalize(url)]["state"] == "fetched"
    assert backlog(stack) == []


def test_robots_txt_is_fetched_by_the_run_and_its_cached_policy_serves_dispatch(
    stack: dict[str, str], site: Site, stack_names: aws.StackNames
) -> None:
    site.routes["/robots.txt"] = (200, "text/plain", b"User-agent: *\nDisallow: /private/\n")
    home = site.page("/", "home")
    first, later = site.page("/private/a.html", "a"), site.page("/private/b.html", "b")
    # Dispatch knows no policy yet: both URLs wait in the backlog, and the run checks them.
    [message] = dispatch_and_collect(stack, home, first)
    assert len(backlog(stack)) == 2
    assert fetch.handler(sqs_event(stack, "fetch", message["Body"]), context("fetch")) == {"batchItemFailures": []}
    assert [path for path, _ in site.requests] == ["/robots.txt", "/"]
    skipped = crawl_outcomes(stack_names, CRAWL)[canonicalize(first)]
    assert (skipped["state"], skipped["reason"]) == ("skipped", "robots: disallowed by robots.txt")

    # A container that finds the run's cached robots.txt skips a disallowed URL at once: no backlog, no run.
    container.reset()
    assert dispatch_and_collect(stack, later) == []
    assert backlog(stack) == []
    skipped = crawl_outcomes(stack_names, CRAWL)[canonicalize(later)]
    assert (skipped["state"], skipped["reason"]) == ("skipped", "robots: disallowed by robots.txt")
    assert [path for path, _ in site.requests] == ["/robots.txt", "/"]


def test_a_rescheduled_hosts_wake_up_goes_out_while_its_invocation_works_other_hosts(
    stack: dict[str, str], web: LoopbackWeb
) -> None:
    # Two hosts in one invocation: A's one page is slow; B's Crawl-delay after its robots.txt is a wait
    # cheaper to be woken from than to sleep through (crawlstack.fetch.pacing), so B is released.
    web.add_host("127.0.0.3", {"/slow.html": Response(page("slow"), delay=5.0)})
    web.add_host("127.0.0.4", {"/robots.txt": robots("User-agent: *\nCrawl-delay: 2\n"), "/b.html": page("b")})
    messages = dispatch_and_collect(stack, web.url("127.0.0.3", "/slow.html"), web.url("127.0.0.4", "/b.html"))
    assert len(messages) == 2
    responses: list[Any] = []
    invocation = threading.Thread(
        target=lambda: responses.append(
            fetch.handler(sqs_event(stack, "fetch", *(m["Body"] for m in messages)), context("fetch"))
        )
    )
    invocation.start()
    woken: list[RunMessage] = []
    while invocation.is_alive() and not woken:
        woken = [RunMessage.from_json(m["Body"]) for m in drain(stack, "fetch")]
        time.sleep(0.05)
    invocation.join()
    assert responses == [{"batchItemFailures": []}]
    assert [e.bare_path for e in web.requests_for("127.0.0.4")] == ["/robots.txt"], describe(web.log)
    # B's wake-up was due 2 s after its robots.txt, while A's page still had 3 s to go.
    assert [m.host for m in woken] == ["127.0.0.4"], describe(web.log)


# --- extract -----------------------------------------------------------------
def test_extract_writes_records_and_sends_outlinks(
    stack: dict[str, str], site: Site, stack_names: aws.StackNames
) -> None:
    book = site.page("/books/emma.html", "Emma", "/books/persuasion.html", "/about.html", "http://elsewhere.invalid/")
    home = site.page("/", "Home", "/books/emma.html", "/authors/")
    bodies = [m["Body"] for m in dispatch_and_collect(stack, book, home)]
    assert fetch.handler(sqs_event(stack, "fetch", *bodies), context("fetch")) == {"batchItemFailures": []}
    [key] = list(aws.BlobStore(stack_names.bucket).keys(settings.PAGES_PREFIX))
    # The bucket notified the extract queue, as the stack configures it: an s3:TestEvent when the
    # notification was set up, then ObjectCreated for the WARC (key URL-encoded).  Deliver both.
    notifications = [m["Body"] for m in drain(stack, "extract")]
    assert len(notifications) == 2
    assert any("s3:TestEvent" in body for body in notifications)
    assert created_objects(notifications[-1]) == [(settings.BUCKET_NAME, key)]

    event = sqs_event(stack, "extract", *notifications)
    assert extract.handler(event, context("extract")) == {"batchItemFailures": []}

    results = aws.client("dynamodb").scan(TableName=stack[settings.ENV_TABLE["results"]])["Items"]
    assert len(results) == 1
    result = results[0]
    assert result["url"]["S"] == canonicalize(book)
    assert result["mapping"]["S"] == "book"
    assert result["fields"]["M"]["title"]["S"] == "Emma"
    assert result["pk"]["S"] == f"{CRAWL}#{fingerprint(canonicalize(book))}"

    blobs = aws.BlobStore(stack_names.bucket)
    [records_key] = list(blobs.keys(settings.RECORDS_PREFIX))
    assert records_key.startswith(settings.RECORDS_PREFIX + "crawl_id=")
    assert records_key.endswith("/" + key.rsplit("/", 1)[-1].replace(".warc.gz", ".jsonl.gz"))
    lines = [json.loads(x) for x in gzip.decompress(blobs.get(records_key)).decode().splitlines()]
    assert [(r["url"], r["fields"]) for r in lines] == [(canonicalize(book), {"title": "Emma"})]

    sent = [msg for m in drain(stack, "frontier") for msg in frontier_messages(m["Body"])]
    outlinks = {m.url: m for m in sent}
    assert len(sent) == len(outlinks)
    assert set(outlinks) == {
        site.base + "/books/persuasion.html",
        site.base + "/about.html",
        site.base + "/books/emma.html",
        site.base + "/authors/",
    }
    assert all(m.depth == 1 and m.crawl_id == CRAWL for m in outlinks.values())
    assert outlinks[site.base + "/about.html"].referrer == canonicalize(book)


def test_extract_ignores_s3_test_events_and_other_objects(stack: dict[str, str], stack_names: aws.StackNames) -> None:
    test_event = json.dumps(
        {"Service": "Amazon S3", "Event": "s3:TestEvent", "Time": "2024-01-01T00:00:00Z", "Bucket": "b"}
    )
    other_prefix = s3_event(settings.BUCKET_NAME, "records/x.jsonl.gz")
    removed = s3_event(settings.BUCKET_NAME, "pages/x.warc.gz", name="ObjectRemoved:Delete")
    event = sqs_event(stack, "extract", test_event, other_prefix, removed)
    assert extract.handler(event, context("extract")) == {"batchItemFailures": []}
    assert list(aws.BlobStore(stack_names.bucket).keys(settings.RECORDS_PREFIX)) == []
    assert drain(stack, "frontier") == []


def test_extract_reports_a_missing_object_as_a_failed_item(stack: dict[str, str]) -> None:
    event = sqs_event(
        stack,
        "extract",
        s3_event(settings.BUCKET_NAME, "pages/gone.warc.gz"),
        json.dumps({"Event": "s3:TestEvent"}),
        ids=["m-gone", "m-test"],
    )
    assert extract.handler(event, context("extract")) == {"batchItemFailures": [{"itemIdentifier": "m-gone"}]}


# --- a watched source, through the deployed handlers --------------------------------
LISTING_RULE = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": r"/news"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [
        {"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}}]},
        {"name": "title", "processors": [{"type": "css", "parameters": {"selector": "a"}}]},
    ],
}


def listing(site: Site, *titles: str) -> str:
    items = "".join(f'<li><a href="/n/{t}">{t}</a></li>' for t in titles)
    site.routes["/news"] = (200, "text/html; charset=utf-8", f"<html><ul>{items}</ul></html>".encode())
    return site.base + "/news"


def test_a_check_goes_from_the_schedule_through_the_handlers_to_events_on_the_bus(
    stack: dict[str, str], site: Site, stack_names: aws.StackNames, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from functions.schedule import handler as schedule

    (tmp_path / "rules" / "listing.json").write_text(json.dumps(LISTING_RULE), encoding="utf-8")
    monkeypatch.setenv(settings.ENV_ALLOW_PRIVATE, "127.0.0.0/8")
    monkeypatch.setenv(settings.ENV_DEFAULT_DELAY, "0")
    container.reset()
    events, sqs = aws.client("events"), aws.client("sqs")
    target = sqs.create_queue(QueueName="items")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = json.dumps({"detail-type": [settings.EVENT_DETAIL_TYPE]})
    events.put_rule(Name="items", EventBusName=stack_names.event_bus, EventPattern=pattern)
    events.put_targets(Rule="items", EventBusName=stack_names.event_bus, Targets=[{"Id": "q", "Arn": arn}])
    url = listing(site, "one", "two")
    aws.DynamoSources(stack_names.watch).add_all([Source("news", canonicalize(url), "listing", priority_max=48.0)])

    start = time.time()
    for at in (start, start + 16 * 60):  # the day's plan, then its first check, due a quarter of an hour in
        monkeypatch.setattr(schedule, "clock", lambda at=at: at)
        schedule.handler({}, context("schedule"))
    [check] = drain(stack, "frontier")
    response = dispatch.handler(sqs_event(stack, "frontier", check["Body"]), context("dispatch"))
    assert response == {"batchItemFailures": []}
    [run] = drain(stack, "fetch")
    assert fetch.handler(sqs_event(stack, "fetch", run["Body"]), context("fetch")) == {"batchItemFailures": []}
    [key] = list(aws.BlobStore(stack_names.bucket).keys(settings.PAGES_PREFIX))
    s3 = s3_event(stack_names.bucket, key)
    assert extract.handler(sqs_event(stack, "extract", s3), context("extract")) == {"batchItemFailures": []}

    published = [json.loads(m["Body"])["detail"] for m in drain_queue(target)]
    assert sorted(e["identity"] for e in published) == ["/n/one", "/n/two"]  # the identity field as extracted
    assert {e["source_id"] for e in published} == {"news"}
    source = aws.DynamoSources(stack_names.watch)
    [item] = [i for i in source.items() if i["sk"] == "news"]
    assert (item["checks_done"], item["items_found"]) == (1, 2)  # the check ended once, its yield applied
    # The same WARC announced again (S3 delivers at least once): no event twice, the check not ended twice.
    assert extract.handler(sqs_event(stack, "extract", s3), context("extract")) == {"batchItemFailures": []}
    assert drain_queue(target) == []
    [item] = [i for i in source.items() if i["sk"] == "news"]
    assert (item["checks_done"], item["items_found"]) == (1, 2)
    # The check fetched the page once, and no link of it was followed.
    assert [p for p, _ in site.requests] == ["/robots.txt", "/news"]
    assert drain(stack, "frontier") == []
