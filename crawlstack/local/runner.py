"""``crawlstack crawl --local``: one crawl, start to finish, in this process.

On the local backend (the default) its state is ``OUT/state.sqlite`` and its
bucket ``OUT/`` itself (``crawlstack.local.backend``); ``resume_local``
continues a crawl stopped or killed there.  With ``emulate_aws`` it runs on
the AWS adapters against moto in the process, and with ``endpoint_url``
against an external AWS-compatible endpoint (a moto server or LocalStack)
with a fresh crawl id, so earlier runs' state there does not dedupe this
one's URLs away.

Either way it stores the crawl's config, sends the seeds to the frontier
exactly as a deployed user would, runs the event pump until nothing is
queued, delayed or in flight, and writes ``OUT/`` (``crawlstack.local.outputs``):

* ``records.jsonl``: one line per extracted record, appended as pages are
  extracted on the local backend;
* ``crawl-log.jsonl``: one line per URL the crawl met (duplicates aside), from
  the urls table and the crawl-log objects (``crawlstack.fetch.crawllog.outcome_of``):
  ``fetched``, ``skipped`` or ``failed``, or ``dropped`` by dispatch before
  dedupe (invalid, out of scope, a port not allowed, a spider trap, over the
  budget or its host's cap), each with its reason; ``started_at`` and
  ``fetched_at`` of its last try, ``earlier_tries`` and ``attempts`` when it
  was tried more than once; ``refetched`` when a kill made it go twice;
* ``resolved.jsonl``: one line per seed ``record_id``, its merged fields
  (``crawlstack.records.resolution``), sorted by record id;
* ``warc/*.warc.gz``: the fetched pages, one file per flush;
* ``summary.json``: counts and timings;
* ``report.html``: the crawl's plots (``crawlstack.report``), drawn from the files above, written last.

Records are strict JSON (NaN and infinities as null), their fields in the
order the mapping lists them.

Ctrl-C stops the crawl: no more batches are handed out, the running ones
finish, and ``OUT/`` is written from what was done so far, its summary
saying ``"interrupted": true``; then the KeyboardInterrupt goes on to the
caller.  Another Ctrl-C while batches finish or files are written abandons
the rest.  A full disk under ``OUT/`` (the state, or ``metrics.jsonl``)
stops it the same way, then raises ``StorageFull``, and so does a write
that finds no room anywhere else: one line at the CLI, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from crawlstack import aws, settings
from crawlstack.config import CrawlConfig, seed_port_key
from crawlstack.lambdas.environment import HandlerSettings, services_on_aws
from crawlstack.local import outputs, resources
from crawlstack.local.backend import LocalState, SavedCrawl, start_afresh
from crawlstack.local.billing import LogMeter
from crawlstack.local.emulator import EmbeddedAws
from crawlstack.local.metrics import MetricsFile, serialised_metrics
from crawlstack.local.options import RESUME_OPTIONS, LocalOptions, Seed, restored_options, saved_options
from crawlstack.local.outdir import holding
from crawlstack.local.progress import progress, snapshot
from crawlstack.local.pump import EventPump, Handler, Source
from crawlstack.local.services import handler_env, local_handlers, log_level
from crawlstack.local.sqlite import SqliteJournal
from crawlstack.local.sqlite.db import StorageFull, stops_when_full
from crawlstack.messages import FrontierMessage
from crawlstack.queueing import MessageQueue
from crawlstack.rules import load_rules, rule_files
from crawlstack.urls import canonicalize, host_of, url_port
from crawlstack.wiring import Services, Stores, stop_runs

# A failed batch comes back after this long (the deployed queues wait 6x the
# function timeout).  Each must exceed what one invocation can take: a fetch
# invocation works its hosts' runs until the function's timeout nears.
LOCAL_VISIBILITY_TIMEOUT = {
    "frontier": 60,
    "fetch": settings.FUNCTIONS["fetch"].timeout_seconds + 60,
    "extract": 60,
}
# A message a handler failed comes back after this long, not the visibility
# timeout: the invocation is over (and on to the DLQ after maxReceiveCount).
# A host whose run failed gave its lease back (crawlstack.fetch.host_runner), so
# its redelivered run message may lease again at once.
LOCAL_RETRY_SECONDS: dict[str, int | None] = {"frontier": 2, "fetch": 2, "extract": 2}
# Extract waits while the frontier holds this many messages or more.
FRONTIER_HIGH_WATER = 200
# Fetch waits while the extract queue holds this many WARCs or more.
EXTRACT_HIGH_WATER = 20


def _emulator(endpoint_url: str | None) -> contextlib.AbstractContextManager[EmbeddedAws | None]:
    """moto in this process; nothing to start for an external endpoint (``_connection`` reaches it)."""
    return contextlib.nullcontext() if endpoint_url else EmbeddedAws()


def _connection(endpoint_url: str | None, embedded: EmbeddedAws | None) -> aws.Connection:
    """The AWS a crawl on the AWS adapters runs on: moto in this process (``embedded``), or ``endpoint_url``.

    The endpoint is reached in the environment's region and with its keys,
    else in us-east-1 with keys an emulator takes; nothing is written to the
    environment.
    """
    if embedded is not None:
        return embedded.connection
    return aws.Connection(
        region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        endpoint_url=endpoint_url,
        credentials=aws.Credentials(
            os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
            os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
            os.environ.get("AWS_SESSION_TOKEN"),
        ),
    )


def _emulator_stats(emulator: Any) -> dict[str, float] | None:
    """The embedded emulator's requests and seconds inside its lock so far; None against an endpoint."""
    if not isinstance(emulator, EmbeddedAws):
        return None
    return {"calls": emulator.calls, "seconds": round(emulator.seconds, 3)}


def crawl_local(seeds: list[Seed], options: LocalOptions) -> dict[str, Any]:
    """Run one local crawl; returns the summary also written to OUT/summary.json.

    On the local backend (the default) the state is ``OUT/state.sqlite``
    (``crawlstack.local.backend``); with ``options.on_aws``, moto or an endpoint.
    """
    with stops_when_full(options.out_dir):
        if options.on_aws:
            return _crawl_on_aws(seeds, options)
        load_rules(options.rules_dir)  # raises RulesInvalid before OUT is touched
        mode = "overwrite" if options.overwrite else "new"
        state = LocalState(options.out_dir, mode, crawl_defaults=_handler_settings(options)[0].crawl_defaults)
        try:
            state.save_crawl(
                SavedCrawl(
                    seeds=[asdict(s) for s in seeds],
                    options=saved_options(options),
                    rules=_rule_texts(options.rules_dir),
                    started=time.time(),
                )
            )
            return _crawl_on_state(state, seeds, options, resumed=False)
        finally:
            state.close()


def resume_local(options: LocalOptions) -> dict[str, Any]:
    """Continue the unfinished crawl in ``OUT/state.sqlite``: its seeds, rules and settings are the saved ones.

    Only ``RESUME_OPTIONS`` come from ``options``.
    """
    with stops_when_full(options.out_dir):
        return _resume_local(options)


def _resume_local(options: LocalOptions) -> dict[str, Any]:
    state = LocalState(options.out_dir, "resume")
    try:
        saved = state.load_crawl()
        kept = {k: getattr(options, k) for k in RESUME_OPTIONS} | restored_options(saved.options)
        restored = LocalOptions(rules_dir=None, **kept)
        # Before the checks below build the stores: the crawl's config is read with its own defaults.
        state.crawl_defaults = _handler_settings(restored)[0].crawl_defaults
        # The crawl log's objects are read back for OUT/crawl-log.jsonl at the end.
        state.check_files(read_back=(settings.CRAWL_LOG_PREFIX,))
        state.recover()
        with tempfile.TemporaryDirectory(prefix="crawlstack-rules-") as rules_dir:
            for name, text in saved.rules.items():
                (Path(rules_dir) / name).write_text(text, encoding="utf-8")
            restored = replace(restored, rules_dir=rules_dir if saved.rules else None)
            seeds = [Seed(s["url"], s.get("record_id"), tuple(s.get("want") or ())) for s in saved.seeds]
            return _crawl_on_state(state, seeds, restored, resumed=True, started=saved.started)
    finally:
        state.close()


def _rule_texts(rules_dir: str | None) -> dict[str, str]:
    if not rules_dir:
        return {}
    return {f.name: f.read_text(encoding="utf-8-sig") for f in rule_files(Path(rules_dir))}


def _crawl_on_state(
    state: LocalState, seeds: list[Seed], options: LocalOptions, resumed: bool, started: float | None = None
) -> dict[str, Any]:
    crawl_id = options.crawl_id or "local"
    handler_settings, env = _handler_settings(options)
    stores = state.stores()
    # A resume of a crawl stopped before its seeds were all sent sends them (again: dispatch dedupes).
    if not state.seeded():
        stores.crawls.put_new(_config(crawl_id, seeds, options))
        _send_seeds(stores.frontier_queue, crawl_id, seeds)
        state.mark_seeded()
    handlers = local_handlers(lambda: svc, log_level(env))
    pump = _pump(stores, handlers, options.fetch_concurrency, options.extract_concurrency)
    # A host's run need not linger for links once nothing but the runs is left (HostRunner.settled).
    svc = Services(handler_settings.rules(), stores, run_hooks=state.run_hooks(settled=pump.settled))
    return _run(
        seeds,
        options,
        crawl_id,
        svc,
        pump,
        started=started if started is not None else time.time(),
        emulator=None,
        resumed=resumed,
        fault=lambda: state.db.fault,
        journal=state.journal,
    )


def _crawl_on_aws(seeds: list[Seed], options: LocalOptions) -> dict[str, Any]:
    load_rules(options.rules_dir)  # raises RulesInvalid before anything starts
    # No state in OUT/ here, but the same outputs: an earlier crawl's are refused or overwritten, never mixed in.
    with holding(Path(options.out_dir)):
        start_afresh(Path(options.out_dir), options.overwrite)
        return _crawl_on_emulator(seeds, options)


def _crawl_on_emulator(seeds: list[Seed], options: LocalOptions) -> dict[str, Any]:
    started = time.time()
    crawl_id = options.crawl_id or ("local" if not options.endpoint_url else f"local-{int(started * 1000)}")
    with _emulator(options.endpoint_url) as emulator:
        connection = _connection(options.endpoint_url, emulator)
        aws.reset_clients()
        try:
            names = _create_resources(options.endpoint_url is not None, connection)
            # The stack's names as a Lambda reads them, with what the crawl's options add.
            env = handler_env(crawl_id, options.rules_dir, {**names, **options.extra_env})
            # The handlers' services on the stack's adapters, whose calls go through the crawl's connection.
            svc = services_on_aws(HandlerSettings.from_env(env), connection)
            svc.crawls.put_new(_config(crawl_id, seeds, options))
            _send_seeds(svc.frontier_queue, crawl_id, seeds)
            handlers = local_handlers(lambda: svc, log_level(env))
            concurrency = (options.fetch_concurrency, options.extract_concurrency)
            pump = _pump(svc.stores, handlers, *concurrency, names, connection=connection)
            return _run(seeds, options, crawl_id, svc, pump, started=started, emulator=emulator, connection=connection)
        finally:
            aws.reset_clients()


def _handler_settings(options: LocalOptions) -> tuple[HandlerSettings, dict[str, str]]:
    """What the handlers of a crawl on the local backend read (``handler_env``), and that mapping."""
    env = handler_env(options.crawl_id or "local", options.rules_dir, options.extra_env)
    return HandlerSettings.from_env(env, stack=False), env


def _config(crawl_id: str, seeds: list[Seed], options: LocalOptions) -> CrawlConfig:
    """The crawl's config as ``crawlstack seed`` would store it: its settings, its id, its seeds' hosts."""
    return replace(options.config, crawl_id=crawl_id, seed_hosts=_seed_hosts(seeds))


def _send_seeds(frontier: MessageQueue, crawl_id: str, seeds: list[Seed]) -> None:
    frontier.send(
        (FrontierMessage(url=s.url, depth=0, crawl_id=crawl_id, record_id=s.record_id, want=s.want).to_json(), 0)
        for s in seeds
    )


def _run(
    seeds: list[Seed],
    options: LocalOptions,
    crawl_id: str,
    svc: Services,
    pump: EventPump,
    started: float,
    emulator: Any,
    resumed: bool = False,
    fault: Callable[[], BaseException | None] | None = None,
    journal: SqliteJournal | None = None,
    connection: aws.Connection = aws.ENVIRONMENT,
) -> dict[str, Any]:
    """Run the pump to the end (or a Ctrl-C), then write OUT/; the handlers run on ``svc``.

    ``journal``: the local backend's, whose pages a kill left in flight are logged ``refetched``.
    ``connection``: the AWS calls' on the AWS adapters, made afresh if writing OUT/ keeps failing.
    """
    stores = svc.stores
    out = Path(options.out_dir)
    no_room: list[StorageFull] = []  # a write to OUT/ beside the state's that found no room (metrics.jsonl)

    def note(exc: BaseException) -> None:
        no_room.append(StorageFull(f"no room left to write {out}: {exc}"))

    def failure() -> BaseException | None:
        return (fault() if fault is not None else None) or next(iter(no_room), None)

    # What the handlers log, as CloudWatch Logs would ingest it.
    log_meter = LogMeter()
    out.mkdir(parents=True, exist_ok=True)
    interrupted = False
    # The handlers' CloudWatch metrics (EMF lines on stdout in Lambda)
    # go to OUT/metrics.jsonl instead of the terminal.
    with (
        progress(options.progress, lambda started: snapshot(svc, started), options.config.max_pages) as tick,
        MetricsFile(out / "metrics.jsonl", append=resumed, note=note) as emf,
        contextlib.redirect_stdout(cast(IO[str], emf)),
        serialised_metrics(),
        log_meter.counting(settings.FUNCTIONS),
        warnings.catch_warnings(),
    ):
        # The three handlers share Powertools' metric set in one
        # process (serialised_metrics keeps it consistent), so one
        # may find it flushed by another: harmless.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        try:
            pump.run(on_tick=tick, on_interrupt=lambda: stop_runs(svc), fault=failure)
            # A fault in the last round (a write whose failure its caller let pass) still stops it.
            if (stop := failure()) is not None:
                raise stop
        except KeyboardInterrupt:
            if not pump.finished:
                raise  # a second Ctrl-C while batches were finishing: stop now
            interrupted = True
    if interrupted:
        print(f"crawlstack: interrupted: writing what was done so far to {out}", file=sys.stderr)
    # Taken before the outputs' own reads: the crawl's calls only.
    emulated = _emulator_stats(emulator)
    summary = _with_retries(
        lambda: outputs.write_outputs(
            out,
            crawl_id,
            started,
            pump,
            stores,
            seeds,
            options,
            interrupted,
            refetched=journal.refetched() if journal is not None else frozenset(),
        ),
        connection,
    )
    summary["rules"] = len(svc.rules)
    summary["interrupted"] = interrupted
    summary["resumed"] = resumed
    summary["emulator"] = emulated
    summary["log_bytes"] = log_meter.by_function(out / "metrics.jsonl")
    with outputs.replacing(out / "summary.json") as fh:
        fh.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    outputs.write_report(out)
    if interrupted:
        raise KeyboardInterrupt
    return summary


def _seed_hosts(seeds: list[Seed]) -> frozenset[str]:
    return seed_hosts([s.url for s in seeds])


def seed_hosts(urls: list[str]) -> frozenset[str]:
    """The URLs' host names, and ``host:port`` for one on another port than 80 or 443 (which allows it)."""
    hosts: set[str] = set()
    for raw in urls:
        url = canonicalize(raw)
        hosts.add(host_of(url))
        if url_port(url) not in settings.DEFAULT_PORTS:
            hosts.add(seed_port_key(host_of(url), url_port(url)))
    return frozenset(hosts)


def _create_resources(external: bool, connection: aws.Connection = aws.ENVIRONMENT) -> dict[str, str]:
    # An external endpoint may hold them from an earlier run already.
    timeout = min(LOCAL_VISIBILITY_TIMEOUT.values())
    return resources.create_all(visibility_timeout=timeout, exist_ok=external, connection=connection)


def _pump(
    stores: Stores,
    handlers: Mapping[str, Handler],
    fetch_concurrency: int,
    extract_concurrency: int = 1,
    names: dict[str, str] | None = None,
    time_scale: float = 1.0,
    connection: aws.Connection = aws.ENVIRONMENT,
) -> EventPump:
    """The three event sources on ``stores``' queues, each invoking its function's handler (``local_handlers``).

    ``names``: the SQS queues', for their ARNs (AWS only).  ``time_scale``: a
    simulation's speed; a batching window is the mapping's seconds of the
    simulation's time, as a host's delay is.
    """
    queues = {"frontier": stores.frontier_queue, "fetch": stores.fetch_queue, "extract": stores.extract_queue}

    def source(key: str, handler: Callable[..., Any], concurrency: int, **extra: Any) -> Source:
        if names is not None:
            url = names[settings.ENV_QUEUE_URL[key]]
            attrs = connection.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            arn = attrs["Attributes"]["QueueArn"]
        else:
            url, arn = f"local:{key}", f"arn:aws:sqs:local:000000000000:{settings.QUEUES[key].name}"
        return Source(
            key,
            url,
            arn,
            handler,
            concurrency,
            batch_size=settings.QUEUES[key].batch_size,
            batching_window=settings.QUEUES[key].batching_window_seconds / time_scale,
            visibility_timeout=LOCAL_VISIBILITY_TIMEOUT[key],
            retry_after=LOCAL_RETRY_SECONDS[key],
            queue=queues[key],
            eager_when_idle=names is None,
            **extra,
        )

    # Dispatch first, so outlinks never pile up in the frontier queue.
    return EventPump(
        [
            source("frontier", handlers["dispatch"], 2),
            source(
                "extract",
                handlers["extract"],
                max(1, extract_concurrency),
                backpressure_from="frontier",
                high_water=FRONTIER_HIGH_WATER,
            ),
            source(
                "fetch",
                handlers["fetch"],
                max(1, fetch_concurrency),
                backpressure_from="extract",
                high_water=EXTRACT_HIGH_WATER,
            ),
        ],
    )


# Tries at writing OUT/ when AWS calls keep failing (a flaky --endpoint-url):
# by the end of a long crawl botocore's retry quota may be spent.
OUTPUT_TRIES = 5


def _with_retries(write: Callable[[], dict[str, Any]], connection: aws.Connection = aws.ENVIRONMENT) -> dict[str, Any]:
    """Run ``write`` (idempotent: every file is replaced whole) again, with fresh clients, while AWS calls fail."""

    for attempt in range(OUTPUT_TRIES):
        try:
            return write()
        except (BotoCoreError, ClientError) as exc:
            if attempt == OUTPUT_TRIES - 1:
                raise
            print(f"crawlstack: warning: writing outputs: {exc}; trying again", file=sys.stderr)
            connection.reset()  # fresh clients: a fresh retry quota
            time.sleep(2**attempt)
    raise AssertionError("unreachable")
