"""The ``crawlstack`` command.

    crawlstack crawl --local SEED_URL... --rules DIR --out DIR [options]
    crawlstack rules validate PATH
    crawlstack rules test RULES_FILE_OR_DIR --url URL [--file SAVED_PAGE]

For a deployed stack (its CloudFormation outputs, ``crawlstack.deployed``):

    crawlstack seed URL... [--crawl-id ID] [--seeds-file F]
    crawlstack status [ID] [--local OUT_DIR]
    crawlstack records [--crawl-id ID] [--mapping M | --resolved] [--limit N] [--format jsonl|csv] [--local OUT_DIR]
    crawlstack query "SQL" [--local OUT_DIR]
    crawlstack report OUT_DIR | --crawl-id ID --out FILE
    crawlstack dlq show|redrive [QUEUE] [--local OUT_DIR]
    crawlstack crawl stop|resume ID

Every user mistake (a bad URL, a broken rules file, a bad flag) ends in a
one-line message on stderr and exit status 2, never a traceback; a failure
at run time (an AWS error, a failed query) is one line and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawlstack import limits, patterns, settings
from crawlstack.limits import (
    NOT_UTF8,
    crawl_config_problem,
    crawl_id_flag,
    crawl_id_lookup_flag,
    integer_flag,
    is_utf8_text,
    number_flag,
    record_id_problem,
    user_agent_flag,
)
from crawlstack.rules import RuleSet, RulesInvalid, load_rules
from crawlstack.safe_text import csv_cell, terminal_text
from crawlstack.urls import InvalidURL, canonicalize

if TYPE_CHECKING:
    from crawlstack.aws import StackNames


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line."""


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a CIDR: {value!r}") from exc


def _regex(value: str) -> str:
    try:
        patterns.compile(value)  # the engine the crawl runs --allow/--deny on
    except patterns.COMPILE_ERRORS as exc:
        raise argparse.ArgumentTypeError(f"invalid regex {value!r}: {patterns.problem(exc)}") from exc
    return value


# Every numeric flag has a finite range (crawlstack.limits): a value past what
# DynamoDB or the crawl can take is a usage error here, not a traceback mid-crawl.
_delay = number_flag(limits.DELAY_SECONDS)
_max_depth = integer_flag(limits.MAX_DEPTH)
_max_pages = integer_flag(limits.MAX_PAGES)
_max_pages_per_host = integer_flag(limits.MAX_PAGES_PER_HOST)
_list_limit = integer_flag(limits.LIST_LIMIT)


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from exc
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port {number} out of range (1-65535)")
    return number


_PER_HOST_HELP = (
    "URLs admitted per host name, a bound on spider traps "
    f"(default {settings.DEFAULT_MAX_PAGES_PER_HOST}; 0 for no cap)"
)
_ALLOW_PORT_HELP = (
    "also fetch this port on any host in scope (repeatable); otherwise only 80, 443 "
    "and each seed's own port, on that seed's host, are fetched"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawlstack", description="A polite, serverless web crawler and scraper.")
    sub = parser.add_subparsers(dest="command", required=True)

    crawl = sub.add_parser(
        "crawl",
        help="run a crawl",
        description="Run a crawl locally, in this process. Its state is kept in OUT/state.sqlite, so a crawl "
        "that was stopped or killed goes on with --resume.",
        epilog=limits.CRAWL_RANGES_HELP,
    )
    crawl.add_argument("seeds", nargs="*", metavar="SEED_URL", help="URLs to start from (depth 0)")
    crawl.add_argument("--local", action="store_true", help="run in this process (state and outputs in --out)")
    crawl.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished crawl in --out with its own seeds, rules and settings "
        "(only --out, --no-progress and --concurrency may be given)",
    )
    crawl.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh where --out holds an earlier crawl: remove what it wrote (and nothing else)",
    )
    crawl.add_argument(
        "--emulate-aws",
        action="store_true",
        help="run the handlers on the AWS adapters against moto in this process (fidelity mode; no resume)",
    )
    crawl.add_argument("--rules", metavar="DIR", help="directory of JSON mapping rules (or one file)")
    crawl.add_argument("--out", metavar="DIR", required=True, help="output directory")
    crawl.add_argument("--max-depth", type=_max_depth, default=settings.DEFAULT_MAX_DEPTH, metavar="N")
    crawl.add_argument("--max-pages", type=_max_pages, default=None, metavar="N", help="page budget")
    crawl.add_argument(
        "--max-pages-per-host",
        type=_max_pages_per_host,
        default=settings.DEFAULT_MAX_PAGES_PER_HOST,
        metavar="N",
        help=_PER_HOST_HELP,
    )
    crawl.add_argument("--allow-port", type=_port, action="append", default=[], metavar="PORT", help=_ALLOW_PORT_HELP)
    crawl.add_argument(
        "--delay",
        type=_delay,
        default=settings.DEFAULT_DELAY_SECONDS,
        metavar="SECONDS",
        help="seconds between requests to one host when robots.txt gives no longer Crawl-delay (default 5)",
    )
    crawl.add_argument("--user-agent", type=user_agent_flag, default=settings.DEFAULT_USER_AGENT, metavar="STRING")
    crawl.add_argument(
        "--allow-private",
        type=_cidr,
        action="append",
        default=[],
        metavar="CIDR",
        help="let the crawler reach loopback/private/link-local addresses in CIDR (repeatable)",
    )
    crawl.add_argument("--seeds-file", metavar="FILE", help='JSON lines: {"url", "record_id"?, "want"?}')
    crawl.add_argument(
        "--endpoint-url", metavar="URL", help="use this AWS-compatible endpoint instead of the embedded one"
    )
    crawl.add_argument(
        "--allow", type=_regex, action="append", default=[], metavar="REGEX", help="also follow URLs matching REGEX"
    )
    crawl.add_argument(
        "--deny", type=_regex, action="append", default=[], metavar="REGEX", help="never follow URLs matching REGEX"
    )
    crawl.add_argument(
        "--concurrency", type=integer_flag(limits.CONCURRENCY), default=8, metavar="N", help="concurrent fetch batches"
    )
    crawl.add_argument(
        "--extract-concurrency",
        type=integer_flag(limits.CONCURRENCY),
        default=1,
        metavar="N",
        help="concurrent extract invocations (default 1); deployed, extract scales out, and more "
        "instances send more duplicate links to dispatch",
    )
    crawl.add_argument("--no-progress", action="store_true", help="no progress display even on a terminal")

    rules = sub.add_parser("rules", help="work with mapping rules")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    validate = rules_sub.add_parser("validate", help="check rules files; exits non-zero on any error")
    validate.add_argument("path", metavar="PATH")
    test = rules_sub.add_parser(
        "test",
        help="run the matching mapping on one page and print its fields and links as JSON",
        description="Run the mapping that matches --url on a saved page (--file), or on the page fetched once, "
        "politely (robots.txt first, then --delay seconds before the page). Prints JSON "
        '{"mapping", "fields", "links", "url", "status", "content_type"}, and "items" (each item\'s fields) '
        "for a mapping with items; exits 1 when no mapping matches.",
    )
    test.add_argument("rules", metavar="RULES_FILE_OR_DIR")
    test.add_argument("--url", required=True, help="the page's URL (chooses the mapping; resolves relative links)")
    test.add_argument("--file", metavar="SAVED_PAGE", help="read the page from this file instead of fetching it")
    test.add_argument(
        "--content-type", metavar="TYPE", help="the saved page's Content-Type (default: guessed from the file name)"
    )
    test.add_argument("--user-agent", type=user_agent_flag, default=settings.DEFAULT_USER_AGENT, metavar="STRING")
    test.add_argument(
        "--delay",
        type=_delay,
        default=1.0,
        metavar="SECONDS",
        help="seconds between robots.txt and the page (robots.txt Crawl-delay wins if longer; default 1)",
    )
    test.add_argument("--allow-private", type=_cidr, action="append", default=[], metavar="CIDR", help="as for crawl")
    test.add_argument(
        "--allow-port",
        type=_port,
        action="append",
        default=[],
        metavar="PORT",
        help="also follow a redirect to this port (repeatable); otherwise only 80, 443 and --url's own port, "
        "on its own host",
    )
    _add_deployed_commands(sub)
    _add_sources_commands(sub)
    _add_watch_command(sub)
    return parser


def _add_watch_command(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="re-check a watch's sources on their schedule, publishing new items to OUT/events.jsonl",
        description="Re-check the sources in OUT (crawlstack sources add) on their schedule until stopped, "
        "through the crawl's handlers and politeness; each new item is one line of OUT/events.jsonl. "
        "Run it again to resume: a flag not given is the watch's own from its last run, and a simulation goes on "
        "as it was.",
    )
    watch.add_argument("--local", metavar="OUT_DIR", required=True, help="the watch's output directory")
    watch.add_argument(
        "--checks-per-day",
        type=integer_flag(limits.CHECKS_PER_DAY),
        metavar="N",
        help="a day's budget of checks for all sources together (default: no budget)",
    )
    watch.add_argument(
        "--simulate-days",
        type=number_flag(limits.SIMULATE_DAYS, stored=False),
        metavar="N",
        help="run N simulated days, then stop; simulated time is --sim-start + --speed x wall time elapsed "
        "(run again, a simulation goes on to its own end)",
    )
    watch.add_argument(
        "--speed",
        type=number_flag(limits.SIMULATION_SPEED, stored=False),
        metavar="X",
        help="simulated seconds per wall second (default 1; run again, the simulation's own unless given)",
    )
    watch.add_argument(
        "--sim-start",
        type=limits.time_flag(limits.SIM_START_YEARS),
        metavar="ISO8601",
        help="the simulation's start, in the years {} to {} (default: now)".format(*limits.SIM_START_YEARS),
    )
    # No defaults here: a flag not given is the watch's own from its last run (WatchSettings).
    watch.add_argument("--delay", type=_delay, metavar="SECONDS", help="as for crawl")
    watch.add_argument("--user-agent", type=user_agent_flag, metavar="STRING", help="as for crawl")
    watch.add_argument("--allow-private", type=_cidr, action="append", metavar="CIDR", help="as for crawl")
    watch.add_argument("--allow-port", type=_port, action="append", metavar="PORT", help=_ALLOW_PORT_HELP)
    watch.add_argument(
        "--concurrency", type=integer_flag(limits.CONCURRENCY), default=8, metavar="N", help="concurrent fetch batches"
    )
    watch.add_argument("--no-progress", action="store_true", help="no progress lines")


def _add_sources_commands(sub: Any) -> None:
    from crawlstack.watch import sources as defaults

    sources = sub.add_parser(
        "sources",
        help="the sources a watch re-checks: listings, feeds and APIs read with a mapping that has items",
        description="Add, list, show or remove a watch's sources: in a deployed stack's watch table, whose "
        "schedule function checks them, or with --local OUT in OUT/state.sqlite for crawlstack watch --local.",
    )
    sources_sub = sources.add_subparsers(dest="sources_command", required=True)
    local = argparse.ArgumentParser(add_help=False, parents=[_stack_options()])
    local.add_argument("--local", metavar="OUT_DIR", help="a local watch's output directory instead of the stack")
    add = sources_sub.add_parser(
        "add",
        parents=[local],
        help="add a source (or every line of --file), all or none",
        description="Add a source: a URL read with a mapping that has items. Each is checked against the rules: "
        "for a stack, --rules DIR, the rules deployed with it; with --local, --rules DIR (then stored in OUT) or "
        "the rules stored there. A bad source is one line and exit 2, and nothing is added.",
    )
    add.add_argument("url", nargs="?", metavar="URL", help="the listing, feed or API to re-check")
    add.add_argument("--file", metavar="F.jsonl", help="JSON lines, each a source's fields (url, mapping, id, ...)")
    add.add_argument(
        "--rules", metavar="DIR", help="the rules to check sources against: the stack's, or stored in OUT for watch"
    )
    add.add_argument("--mapping", metavar="M", help="the mapping that reads the source (it must have items)")
    add.add_argument("--id", metavar="ID", help="the source's id (default: made from its URL and mapping)")
    add.add_argument("--identity", metavar="FIELD", help="the item field that names an item (default url)")
    add.add_argument(
        "--priority-min",
        type=float,
        metavar="P",
        help=f"the fewest checks a day, however quiet the source (default {defaults.DEFAULT_PRIORITY_MIN:g})",
    )
    add.add_argument(
        "--priority-max",
        type=float,
        metavar="P",
        help=f"the most checks a day, however busy the source (default {defaults.DEFAULT_PRIORITY_MAX:g})",
    )
    add.add_argument(
        "--pagination",
        choices=defaults.PAGINATIONS,
        help="how a check pages on until it meets items it has seen: the next link, a page number, or a cursor",
    )
    add.add_argument(
        "--pagination-parameter",
        metavar="NAME",
        help="the query parameter of --pagination page or cursor (default page, or max_id)",
    )
    add.add_argument(
        "--max-pages",
        type=int,
        metavar="N",
        help=f"pages a check reads at most (default {defaults.DEFAULT_MAX_PAGES})",
    )
    add.add_argument("--strategy", choices=defaults.STRATEGIES, help="tokens (default) or velocity scheduling")
    sources_sub.add_parser("list", parents=[local], help="every source, by id")
    show = sources_sub.add_parser("show", parents=[local], help="one source's settings, as JSON")
    show.add_argument("source_id", metavar="ID")
    remove = sources_sub.add_parser("remove", parents=[local], help="stop watching a source")
    remove.add_argument("source_id", metavar="ID")


def _stack_options() -> argparse.ArgumentParser:
    """The options every command for a deployed stack takes."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("stack")
    group.add_argument(
        "--stack",
        default=settings.STACK_NAME,
        metavar="NAME",
        help=f"the deployed stack whose outputs name the resources (default {settings.STACK_NAME})",
    )
    group.add_argument("--region", metavar="REGION", help="AWS region (default: AWS_REGION or your AWS config)")
    group.add_argument("--endpoint-url", metavar="URL", help="an AWS-compatible endpoint (moto server) instead of AWS")
    return common


def _athena_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=number_flag(limits.QUERY_TIMEOUT_SECONDS, stored=False),
        default=settings.QUERY_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"cancel an Athena query still running after this long (default {settings.QUERY_TIMEOUT_SECONDS:g})",
    )


def _add_deployed_commands(sub: Any) -> None:
    common = _stack_options()
    seed = sub.add_parser(
        "seed",
        parents=[common],
        help="send seed URLs to a deployed stack's frontier queue",
        description="Send seeds (depth 0) to the deployed stack's frontier queue, ten to a SendMessageBatch. "
        "Without --crawl-id they join the stack's default crawl. Exits 1 if SQS refused any.",
        epilog=limits.CRAWL_RANGES_HELP,
    )
    seed.add_argument("seeds", nargs="*", metavar="URL", help="URLs to start from")
    seed.add_argument(
        "--crawl-id", type=crawl_id_flag, metavar="ID", help="the crawl the seeds belong to (default: the stack's)"
    )
    seed.add_argument("--seeds-file", metavar="FILE", help='JSON lines: {"url", "record_id"?, "want"?}')
    seed.add_argument("--rules", metavar="DIR", help="check each seed's want against these rules (the ones deployed)")
    config = seed.add_argument_group(
        "a new crawl's config (with --crawl-id; stored once, when the crawl is created; unset ones follow the stack)"
    )
    config.add_argument("--max-depth", type=_max_depth, metavar="N")
    config.add_argument("--max-pages", type=_max_pages, metavar="N", help="page budget")
    config.add_argument("--max-pages-per-host", type=_max_pages_per_host, metavar="N", help=_PER_HOST_HELP)
    config.add_argument("--allow-port", type=_port, action="append", metavar="PORT", help=_ALLOW_PORT_HELP)
    config.add_argument("--delay", type=_delay, metavar="SECONDS")
    config.add_argument("--user-agent", type=user_agent_flag, metavar="STRING")
    config.add_argument("--allow", type=_regex, action="append", metavar="REGEX", help="also follow (repeatable)")
    config.add_argument("--deny", type=_regex, action="append", metavar="REGEX", help="never follow (repeatable)")
    config.add_argument(
        "--rules-set", action="append", metavar="MAPPING", help="extract with only these mappings (repeatable)"
    )

    status = sub.add_parser(
        "status",
        parents=[common],
        help="queue depths and a crawl's counts",
        description="Queue depths (visible, in flight, delayed) and dead-letter depths, then URLs per outcome "
        "and records extracted, per crawl or for crawl ID. The counts come from a Scan of the urls and results "
        "tables, which reads every item: its cost grows with the tables (--no-counts skips it). A crawl's state "
        "(running or stopped) and page budget come from the crawls table.",
    )
    status.add_argument(
        "crawl_id", nargs="?", type=crawl_id_lookup_flag, metavar="ID", help="one crawl (default: every crawl)"
    )
    status.add_argument("--no-counts", action="store_true", help="queue depths only: no table scans")
    status.add_argument(
        "--local",
        metavar="OUT_DIR",
        help="a local crawl's OUT/ instead, read without taking its lock (works while the crawl runs)",
    )

    records = sub.add_parser(
        "records",
        parents=[common],
        help="print extracted records from the results table",
        description="Scan the results table (filtered by crawl and mapping) and print records as JSON lines, "
        "as records.jsonl has them, or as CSV with one column per field.",
    )
    records.add_argument("--crawl-id", type=crawl_id_lookup_flag, metavar="ID", help="only this crawl's records")
    records.add_argument("--mapping", metavar="NAME", help="only this mapping's records")
    records.add_argument("--limit", type=_list_limit, metavar="N", help="stop after N records")
    records.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    records.add_argument(
        "--resolved",
        action="store_true",
        help="the resolved table instead: one merged record per seed record_id, as resolved.jsonl has them",
    )
    records.add_argument(
        "--local", metavar="OUT_DIR", help="a local crawl's OUT/ instead (its records.jsonl or resolved.jsonl)"
    )

    query = sub.add_parser(
        "query",
        parents=[common],
        help="run SQL on Athena, or with --local on DuckDB over OUT/",
        description="Run SQL on Athena in the stack's workgroup and Glue database, wait, print a table. "
        "With --local OUT_DIR the same SQL runs on DuckDB over a local crawl's output: tables records, "
        "crawl_log and resolved, with the Glue tables' columns and types; fields['name'] reads a record's field "
        "as text on both, numbers['name'] a numeric field as a number.",
    )
    query.add_argument("sql", metavar="SQL")
    query.add_argument("--local", metavar="OUT_DIR", help="query a local crawl's output directory instead")
    _athena_timeout(query)
    query.add_argument("--format", choices=("table", "csv", "jsonl"), default="table")

    report = sub.add_parser(
        "report",
        parents=[common],
        help="draw a crawl's plots into one self-contained HTML file",
        description="Rebuild OUT_DIR/report.html from a local crawl's output, or with --crawl-id build the "
        "report of a deployed crawl from its Athena tables into --out FILE. The file makes no network "
        "request: plotly.js is embedded.",
    )
    report.add_argument("out_dir", nargs="?", metavar="OUT_DIR", help="a local crawl's output directory")
    report.add_argument("--crawl-id", type=crawl_id_lookup_flag, metavar="ID", help="a deployed crawl, from Athena")
    report.add_argument("--out", metavar="FILE", help="where to write the report (default OUT_DIR/report.html)")
    _athena_timeout(report)

    dlq = sub.add_parser("dlq", help="inspect or redrive dead-letter queues")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)
    queues = list(settings.QUEUES)
    show = dlq_sub.add_parser(
        "show",
        parents=[common],
        help="print dead-lettered messages without removing them",
        description="Print messages of a dead-letter queue (receive count, sent time, body) and leave them there.",
    )
    show.add_argument("queue", nargs="?", choices=queues, metavar="QUEUE", help=f"one of {', '.join(queues)}")
    show.add_argument("--limit", type=_list_limit, default=10, metavar="N", help="messages per queue (default 10)")
    show.add_argument("--local", metavar="OUT_DIR", help="a local crawl's dead-letter queues instead")
    redrive = dlq_sub.add_parser(
        "redrive",
        parents=[common],
        help="move dead-lettered messages back to their queue",
        description="Move messages from a dead-letter queue back to its source queue: each batch is sent, "
        "and deleted from the DLQ only once the send succeeded.",
    )
    redrive.add_argument("queue", nargs="?", choices=queues, metavar="QUEUE", help=f"one of {', '.join(queues)}")
    redrive.add_argument("--limit", type=_list_limit, metavar="N", help="move at most N messages per queue")
    redrive.add_argument(
        "--local", metavar="OUT_DIR", help="a local crawl's instead (refused while it runs); then crawl --resume"
    )


SEED_KEYS = frozenset({"url", "record_id", "want"})


def _read_seeds(args: argparse.Namespace, rules: RuleSet | None = None, check_want: bool = True) -> list[object]:
    from crawlstack.local.options import Seed

    seeds: list[Seed] = []
    for url in args.seeds:
        seeds.append(Seed(_valid_seed(url, "seed")))
    if args.seeds_file:
        path = Path(args.seeds_file)
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read seeds file {path}: {exc}") from exc
        fields = {f.name for mapping in rules or () for f in mapping.fields}
        wants: dict[str, tuple[str, ...]] = {}
        for number, line in enumerate(lines, 1):
            if line.strip():
                seed = _seed_line(line, f"{path}:{number}", fields if rules is not None else None, wants, check_want)
                seeds.append(seed)
        if not seeds:
            raise UsageError(f"no seeds: {path} has no seed lines")
    if not seeds:
        raise UsageError("no seeds: give SEED_URL arguments or --seeds-file")
    return list(seeds)


def _seed_line(
    line: str, where: str, fields: set[str] | None, wants: dict[str, tuple[str, ...]], check_want: bool = True
) -> Any:
    """One line of a seeds file, checked as strictly as a rules file: a typo must not pass silently.

    ``check_want=False`` (seeding a deployed stack without --rules) leaves
    out the one check that needs the rules: that a mapping extracts each wanted field.
    """
    from crawlstack.local.options import Seed

    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise UsageError(f'{where}: expected an object with a "url" string')
    unknown = sorted(set(data) - SEED_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (allowed: record_id, url, want)")
    if not is_utf8_text(data["url"]):
        raise UsageError(f'{where}: "url" {NOT_UTF8}')
    record_id = data.get("record_id")
    if record_id is not None:
        if isinstance(record_id, bool) or not isinstance(record_id, str | int):
            raise UsageError(f'{where}: "record_id" must be a string (or an integer)')
        record_id = str(record_id)
        if not record_id.strip():
            raise UsageError(f'{where}: "record_id" must not be empty')
        problem = record_id_problem(record_id)
        if problem:
            raise UsageError(f"{where}: {problem}")
    want = data.get("want", [])
    if not isinstance(want, list) or not all(isinstance(w, str) and w for w in want):
        raise UsageError(f'{where}: "want" must be a list of field names')
    if not all(is_utf8_text(w) for w in want):
        raise UsageError(f'{where}: "want" {NOT_UTF8}')
    if want and record_id is None:
        raise UsageError(f'{where}: "want" needs a "record_id" to gather the fields into')
    if want and fields is None and check_want:
        raise UsageError(f'{where}: "want" needs --rules: no mapping extracts any field')
    missing = sorted(set(want) - (fields or set()))
    if want and missing and (check_want or fields is not None):
        raise UsageError(
            f"{where}: no mapping extracts a field named {missing[0]!r}, so the record would never complete"
        )
    if record_id is not None:
        earlier = wants.setdefault(record_id, tuple(want))
        if set(earlier) != set(want):
            raise UsageError(f'{where}: record {record_id!r} already has a different "want" on an earlier line')
    return Seed(_valid_seed(data["url"], where), record_id, tuple(want))


def _valid_seed(url: str, where: str) -> str:
    try:
        canonicalize(url)
    except InvalidURL as exc:
        raise UsageError(f"{where}: invalid URL {url!r}: {exc}") from exc
    return url


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``timeout``, ``kill``, a container stopping) stops a local crawl as Ctrl-C does.

    Without this the process died at once and OUT/ held nothing, not even the
    crawl log of what was fetched.  A second SIGTERM, like a second Ctrl-C,
    abandons the batches still finishing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# What ``crawl --local --resume`` may be given besides itself; everything else comes from the saved crawl.
RESUME_FLAGS = frozenset({"local", "resume", "out", "no_progress", "concurrency"})


def _flags_given(args: argparse.Namespace) -> list[str]:
    """The ``crawl`` options (and seeds) ``args`` sets to other than their defaults, as the user spells them."""
    defaults = vars(build_parser().parse_args(["crawl", "--out", "-"]))
    return [
        "SEED_URL" if dest == "seeds" else "--" + dest.replace("_", "-")
        for dest, value in vars(args).items()
        if dest in defaults and value != defaults[dest] and dest not in RESUME_FLAGS
    ]


def _crawl(args: argparse.Namespace) -> int:
    from crawlstack.local.options import LocalOptions
    from crawlstack.local.runner import crawl_local, resume_local

    if not args.local:
        raise UsageError(
            "only local crawls run from here (--local); to crawl with a deployed stack, "
            "seed it with `crawlstack seed URL...` (see README)"
        )
    if args.resume:
        if args.emulate_aws or args.endpoint_url:
            raise UsageError("--resume continues a crawl on local state; not with --emulate-aws or --endpoint-url")
        extra = _flags_given(args)
        if extra:
            raise UsageError(
                f"--resume takes its seeds, rules and settings from {args.out}; not {', '.join(extra)} "
                "(only --out, --no-progress and --concurrency)"
            )
        resumed = LocalOptions(
            rules_dir=None,
            out_dir=args.out,
            fetch_concurrency=args.concurrency,
            progress=False if args.no_progress else None,
        )
        return _run_crawl(args, lambda: resume_local(resumed))
    if args.rules and not Path(args.rules).exists():
        raise UsageError(f"rules: {args.rules}: no such file or directory")
    # Every problem up front, before any request.
    ruleset = load_rules(args.rules, check_schema=True) if args.rules else None
    seeds = _read_seeds(args, ruleset)
    _check_config_size(args.user_agent, args.allow, args.deny)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    options = LocalOptions(
        rules_dir=args.rules,
        out_dir=args.out,
        max_depth=args.max_depth,
        max_pages=args.max_pages,
        max_pages_per_host=args.max_pages_per_host or None,
        allow_ports=tuple(dict.fromkeys(args.allow_port)),
        delay=args.delay,
        user_agent=args.user_agent,
        allow_private=tuple(args.allow_private),
        allow=tuple(args.allow),
        deny=tuple(args.deny),
        endpoint_url=args.endpoint_url,
        fetch_concurrency=args.concurrency,
        extract_concurrency=args.extract_concurrency,
        progress=False if args.no_progress else None,
        emulate_aws=args.emulate_aws,
        overwrite=args.overwrite,
    )
    return _run_crawl(args, lambda: crawl_local(seeds, options))  # type: ignore[arg-type]


def _run_crawl(args: argparse.Namespace, crawl: Callable[[], dict[str, Any]]) -> int:
    """Run ``crawl``, then print its one-line summary and any warnings; the exit code."""
    from crawlstack.local.backend import StateError
    from crawlstack.local.sqlite.db import StorageFull

    try:
        with _terminate_as_interrupt():
            summary = crawl()
    except StateError as exc:
        raise UsageError(str(exc)) from None
    except StorageFull as exc:
        # Without a local state (--emulate-aws, --endpoint-url) there is nothing to resume.
        again = f"crawlstack crawl --local --resume --out {args.out}"
        if args.emulate_aws or args.endpoint_url:
            again = "run it again with --overwrite"
        print(
            f"crawlstack: error: {terminal_text(str(exc))}; the crawl stopped: make room, then {again}", file=sys.stderr
        )
        return 1
    except Exception as exc:
        if not _endpoint_failure(exc):
            raise
        endpoint = args.endpoint_url or "(embedded)"
        print(f"crawlstack: error: AWS endpoint {endpoint} unreachable or failing: {exc}", file=sys.stderr)
        return 1
    outcomes = summary["outcomes"]
    print(
        f"crawled {summary['pages_fetched']} pages in {summary['elapsed_seconds']:.1f}s: "
        f"{summary['records']} records, {outcomes.get('skipped', 0)} skipped, {outcomes.get('failed', 0)} failed, "
        f"{outcomes.get('dropped', 0)} dropped -> {args.out}"
    )
    _print_endings(summary, args.out)
    if summary["handler_errors"]:
        print(
            f"warning: {len(summary['handler_errors'])} handler errors, "
            f"first: {terminal_text(str(summary['handler_errors'][0]))}",
            file=sys.stderr,
        )
    dead = {queue: n for queue, n in summary["dead_letter"].items() if n}
    if dead:
        # Dead-lettered messages are work the crawl never did (records or links lost): not a success.
        counts = ", ".join(f"{queue} {n}" for queue, n in sorted(dead.items()))
        where = "summary.json" if args.emulate_aws or args.endpoint_url else f"crawlstack dlq show --local {args.out}"
        print(f"crawlstack: warning: messages went to dead-letter queues ({counts}); see {where}", file=sys.stderr)
        return 1
    if not summary["pages_fetched"]:
        print("crawlstack: no page was fetched (see the hints above and the crawl log)", file=sys.stderr)
        return NOTHING_FETCHED
    return 0


# ``crawl --local``'s exit status when it fetched no page at all: a crawl that ran but reached nothing.
NOTHING_FETCHED = 3


def _print_endings(summary: dict[str, Any], out: str) -> None:
    """The top reasons for each outcome, the guards that kept the crawl from URLs, and where to look next."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    reasons = summary.get("top_reasons") or {}
    if any(reasons.values()):
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        table.add_column("outcome")
        table.add_column("URLs", justify="right")
        table.add_column("reason")
        for outcome, rows in reasons.items():
            for reason, count in rows:
                table.add_row(outcome, str(count), terminal_text(reason))
        console.print(table)
    for hint in summary.get("guards") or []:
        console.print(f"hint: {terminal_text(hint)}")
    if _fresh(Path(out) / "report.html", Path(out) / "summary.json"):
        console.print(f"report: {out}/report.html (plots)")
    console.print(f"details: {out}/crawl-log.jsonl (a line a URL), {out}/summary.json")


def _fresh(path: Path, since: Path) -> bool:
    """``path`` exists and was written no earlier than ``since`` (a report that failed leaves an older one)."""
    try:
        return path.stat().st_mtime >= since.stat().st_mtime
    except OSError:
        return False


def _validate(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.is_dir() and not any(path.glob("*.json")):
        raise UsageError(f"{path}: no rules files (*.json) in this directory")
    ruleset = load_rules(path, check_schema=True)
    if not ruleset:
        raise UsageError(f"{path}: no mappings: expected a rules file (*.json) or a directory of them")
    print(f"{args.path}: {len(ruleset)} mapping(s) OK")
    return 0


def _test(args: argparse.Namespace) -> int:
    from crawlstack.rules_tester import PoliteFetcher, TesterError, guess_content_type, run_rules

    ruleset = load_rules(args.rules, check_schema=True)
    try:
        url = canonicalize(args.url)
    except InvalidURL as exc:
        raise UsageError(f"--url: invalid URL {args.url!r}: {exc}") from exc
    status: int | None = None
    if args.file:
        try:
            body = Path(args.file).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
        content_type = args.content_type or guess_content_type(args.file)
    else:
        fetcher = PoliteFetcher(
            args.user_agent, args.delay, tuple(args.allow_private), allow_ports=tuple(args.allow_port)
        )
        try:
            fetched = fetcher.get(url)
        except TesterError as exc:
            raise UsageError(str(exc)) from exc
        url, status, content_type, body = fetched.url, fetched.status, fetched.content_type, fetched.body
    result = run_rules(ruleset, url, body, content_type)
    result.update(url=url, status=status, content_type=content_type)
    print(json.dumps(result, ensure_ascii=False, indent=2))
    if result["mapping"] is None:
        print(f"crawlstack: no mapping in {args.rules} matches {terminal_text(url)}", file=sys.stderr)
        return 1
    return 0


# --- a deployed stack -------------------------------------------------------------


def _stack(args: argparse.Namespace) -> Any:
    from crawlstack.deployed import Connection, Stack

    return Stack(Connection(args.region, args.endpoint_url), args.stack)


def _seed(args: argparse.Namespace) -> int:
    from crawlstack.deployed import Queues, frontier_body

    if args.rules and not Path(args.rules).exists():
        raise UsageError(f"rules: {args.rules}: no such file or directory")
    ruleset = load_rules(args.rules, check_schema=True) if args.rules else None
    seeds = _read_seeds(args, ruleset, check_want=ruleset is not None)  # every mistake before any message
    config = _crawl_settings(args)
    _check_config_size(args.user_agent or "", args.allow or [], args.deny or [], args.rules_set or [])
    if config and not args.crawl_id:
        raise UsageError(
            "crawl settings (--max-depth, --delay, ...) need --crawl-id: the default crawl's come from the stack"
        )
    if ruleset is not None and args.rules_set:
        unknown = sorted(set(args.rules_set) - {m.name for m in ruleset})
        if unknown:
            raise UsageError(f"--rules-set: no mapping named {unknown[0]!r} in {args.rules}")
    stack = _stack(args)
    if config:
        from crawlstack.deployed import Tables

        Tables(stack.connection).create_crawl(stack.table("crawls"), args.crawl_id, config)
    url = stack.queue_url("frontier")
    bodies = [frontier_body(s.url, args.crawl_id, s.record_id, s.want) for s in seeds]  # type: ignore[attr-defined]
    failed = Queues(stack.connection).send(url, bodies)
    crawl = args.crawl_id or "the stack's default crawl"
    print(f"seeded {len(bodies) - len(failed)} of {len(bodies)} URLs into {terminal_text(crawl)}")
    for body, reason in failed:
        print(f"crawlstack: not sent: {terminal_text(json.loads(body)['url'] + ': ' + reason)}", file=sys.stderr)
    return 1 if failed else 0


def _check_config_size(user_agent: str, *lists: list[str]) -> None:
    problem = crawl_config_problem([user_agent, *(s for strings in lists for s in strings)])
    if problem:
        raise UsageError(problem)


def _crawl_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The crawl settings given on the command line, as the crawls table stores them (CrawlConfig.to_item)."""
    from decimal import Decimal

    given: dict[str, Any] = {}
    if args.max_depth is not None:
        given["max_depth"] = args.max_depth
    if args.max_pages is not None:
        given["max_pages"] = args.max_pages
    if args.max_pages_per_host is not None:
        given["max_pages_per_host"] = args.max_pages_per_host  # 0: no cap, as CrawlConfig stores it
    if args.allow_port:
        given["allow_ports"] = list(dict.fromkeys(args.allow_port))
    if args.delay is not None:
        given["delay"] = Decimal(str(args.delay))
    if args.user_agent:
        given["user_agent"] = args.user_agent
    for name in ("allow", "deny"):
        if getattr(args, name):
            given[name] = list(getattr(args, name))
    if args.rules_set:
        given["rules"] = list(dict.fromkeys(args.rules_set))
    return given


def _print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if not columns:  # a statement without a result set (DDL)
        return
    # Page text reaches the terminal here: no escape sequence of it may.
    columns = [terminal_text(c) for c in columns]
    cells = [[terminal_text(_cell(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells if i < len(r))]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _status(args: argparse.Namespace) -> int:
    if args.local:
        from crawlstack.local.backend import StateError
        from crawlstack.local.status import local_status

        try:
            found = local_status(Path(args.local), args.crawl_id)
        except StateError as exc:
            raise UsageError(f"--local: {exc}") from exc
        rows = [[k, q.visible, q.in_flight, q.delayed, d.visible + d.in_flight] for k, (q, d) in found.queues.items()]
        _print_table(["queue", "visible", "in flight", "delayed", "dead-lettered"], rows)
        if not args.no_counts:
            _print_crawls(found.url_states, found.extracted, found.crawls, args.crawl_id)
        _print_watch(found.sources)
        return 0
    from crawlstack.deployed import Queues, Tables

    stack = _stack(args)
    queues = Queues(stack.connection)
    rows = []
    for key in settings.QUEUES:
        depth, dead = queues.depth(stack.queue_url(key)), queues.depth(stack.dlq_url(key))
        rows.append([key, depth.visible, depth.in_flight, depth.delayed, dead.visible + dead.in_flight])
    _print_table(["queue", "visible", "in flight", "delayed", "dead-lettered"], rows)
    if args.no_counts:
        return 0
    tables = Tables(stack.connection)
    states = tables.url_states(stack.table("urls"), args.crawl_id)
    extracted = tables.count(stack.table("results"), args.crawl_id)
    configs = tables.crawls(stack.table("crawls"), args.crawl_id)
    _print_crawls(states, extracted, configs, args.crawl_id)
    watch_table = stack.outputs.get(settings.OUTPUT_TABLE["watch"])
    if watch_table:
        sources = tables.watch_sources(watch_table)
        schedule = stack.outputs.get(settings.OUTPUT_SCHEDULE)
        if sources and schedule:
            from crawlstack.deployed import schedule_state

            state, expression = schedule_state(stack.connection, schedule)
            print(f"\nwatch: schedule {terminal_text(schedule)} {state.lower()}, {expression}")
        _print_watch(sources)
    return 0


def _print_watch(sources: Sequence[tuple[str, float | None, float | None, float | None, int, int]]) -> None:
    """A watch's sources and where each stands, as ``status`` prints them (nothing without sources)."""
    if not sources:
        return
    from crawlstack.crawllog import iso_time

    print()
    rows = [
        [sid, _num(priority), _num(tokens), iso_time(nxt)[:19] + "Z" if nxt else "", checks, items]
        for sid, priority, tokens, nxt, checks, items in sources
    ]
    _print_table(["source", "checks/day", "tokens", "next check", "checks", "items"], rows)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _print_crawls(
    states: dict[str, Counter[str]], extracted: dict[str, int], configs: dict[str, dict[str, Any]], crawl_id: str | None
) -> None:
    """URLs per state, records and the page budget of each crawl, as ``status`` prints them."""
    from crawlstack.deployed import URL_STATES, url_counts

    crawls = sorted(set(states) | set(extracted) | set(configs) | ({crawl_id} if crawl_id else set()))
    print()
    if not crawls:
        print("no crawl has seen a URL yet")
        return
    rows = []
    for crawl in crawls:
        config = configs.get(crawl, {})
        counts = url_counts(states.get(crawl, {}), config)
        budget = ""
        if config.get("max_pages") is not None:
            budget = f"{config.get('pages_admitted', 0)}/{config['max_pages']}"
        # A crawl without a config item runs on the stack's defaults.
        state = config.get("state", "running")
        rows.append([crawl, state, *(counts.get(s, 0) for s in URL_STATES), extracted.get(crawl, 0), budget])
    _print_table(["crawl", "state", *URL_STATES, "extracted", "budget"], rows)


def _records(args: argparse.Namespace) -> int:
    import csv
    import itertools

    from crawlstack.deployed import Tables

    if args.resolved and args.mapping:
        raise UsageError("--mapping: resolved records merge pages of any mapping; leave it out with --resolved")
    found: Iterator[dict[str, Any]]
    if args.local:
        found = _local_records(Path(args.local), args.resolved, args.crawl_id, args.mapping)
    elif args.resolved:
        stack = _stack(args)
        found = Tables(stack.connection).resolved(stack.table("resolved"), args.crawl_id)
    else:
        stack = _stack(args)
        found = Tables(stack.connection).records(stack.table("results"), args.crawl_id, args.mapping)
    if args.resolved:
        base = ["crawl_id", "record_id", "complete"]
    else:
        base = ["mapping", "url", "crawl_id", "depth", "fetched_at", "record_id"]
    if args.limit:
        found = itertools.islice(found, args.limit)
    if args.format == "jsonl":
        for record in found:
            print(json.dumps(record, ensure_ascii=False, default=str))
        return 0
    # CSV needs every field name for its header: the records are read first.
    records = list(found)
    names = list(dict.fromkeys(n for r in records for n in (r.get("fields") or {})))
    writer = csv.writer(sys.stdout)
    writer.writerow([csv_cell(c) for c in base + [f"fields.{n}" for n in names]])
    for r in records:
        fields = r.get("fields") or {}
        row = [_cell(r.get(c)) for c in base] + [_cell(fields.get(n)) for n in names]
        writer.writerow([csv_cell(v) for v in row])  # no page text may become a live formula
    return 0


def _local_records(out: Path, resolved: bool, crawl_id: str | None, mapping: str | None) -> Iterator[dict[str, Any]]:
    """A local crawl's records (or resolved records), as the deployed tables give them, filtered alike."""
    path = out / ("resolved.jsonl" if resolved else "records.jsonl")
    if not path.is_file():
        raise UsageError(f"--local: {path} does not exist (is {out} a local crawl's output?)")

    def read() -> Iterator[dict[str, Any]]:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                # A line a running crawl is still writing is left for the next look.
                if line.endswith("\n") and line.strip():
                    record = json.loads(line)
                    record.pop("numbers", None)  # a copy of fields for the query tables; the results table has none
                    if (crawl_id is None or record.get("crawl_id") == crawl_id) and (
                        mapping is None or record.get("mapping") == mapping
                    ):
                        yield record

    return read()


def _report(args: argparse.Namespace) -> int:
    from crawlstack.report import REPORT_FILE, from_out, write_report

    if (args.out_dir is None) == (args.crawl_id is None):
        raise UsageError("give a local crawl's OUT_DIR, or --crawl-id ID --out FILE for a deployed crawl")
    if args.out_dir is not None:
        out = Path(args.out_dir)
        if not (out / "crawl-log.jsonl").is_file():
            raise UsageError(f"{out}: no crawl-log.jsonl (is it a local crawl's output directory?)")
        target = Path(args.out) if args.out else out / REPORT_FILE
        try:
            facts = from_out(out)
        except OSError as exc:
            raise UsageError(f"cannot read {out}: {exc.strerror or exc}") from exc
    else:
        from crawlstack.deployed import Athena
        from crawlstack.report.athena import from_athena

        if not args.out:
            raise UsageError("--crawl-id: give --out FILE for the report")
        target = Path(args.out)
        stack = _stack(args)
        workgroup, database = stack.output(settings.OUTPUT_WORKGROUP), stack.output(settings.OUTPUT_GLUE_DATABASE)
        athena = Athena(stack.connection)
        facts = from_athena(
            lambda sql: athena.run(sql, workgroup, database, args.timeout), args.crawl_id, f"Athena ({database})"
        )
    try:
        write_report(facts, target)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    print(f"wrote {target}")
    return 0


def _watch(args: argparse.Namespace) -> int:
    from crawlstack.local.backend import StateError
    from crawlstack.local.sqlite.db import StorageFull
    from crawlstack.local.watch import WatchOptions, watch_local

    options = WatchOptions(
        out=args.local,
        checks_per_day=args.checks_per_day,
        delay=args.delay,
        user_agent=args.user_agent,
        allow_private=None if args.allow_private is None else tuple(args.allow_private),
        allow_ports=None if args.allow_port is None else tuple(args.allow_port),
        simulate_days=args.simulate_days,
        speed=args.speed,
        sim_start=args.sim_start,
        fetch_concurrency=args.concurrency,
        progress=not args.no_progress,
    )
    try:
        done = watch_local(options)
    except StateError as exc:
        raise UsageError(str(exc)) from exc
    except StorageFull as exc:
        print(
            f"crawlstack: error: {terminal_text(str(exc))}; the watch stopped: make room, then run it again",
            file=sys.stderr,
        )
        return 1
    print(
        f"watched until {done['sim_reached'][:19]}Z: {done['checks_sent']} checks sent, {done['checks_done']} done, "
        f"{done['items_seen']} items seen -> {args.local}/events.jsonl"
    )
    return 130 if done["interrupted"] else 0


def _sources(args: argparse.Namespace) -> int:
    from crawlstack.local import sources
    from crawlstack.local.backend import StateError
    from crawlstack.watch.sources import SourceError

    if args.local is None:
        try:
            return _deployed_sources(args)
        except SourceError as exc:
            raise UsageError(str(exc)) from exc
    out = Path(args.local)
    try:
        if args.sources_command == "add":
            _print_added(sources.add_sources(out, _source_entries(args), args.rules))
        elif args.sources_command == "list":
            _print_sources_list(sources.list_sources(out))
        elif args.sources_command == "show":
            print(json.dumps(sources.get_source(out, args.source_id).to_item(), indent=2, ensure_ascii=False))
        else:
            sources.remove_source(out, args.source_id)
            print(f"removed {args.source_id}")
    except (SourceError, StateError) as exc:
        raise UsageError(str(exc)) from exc
    return 0


def _deployed_sources(args: argparse.Namespace) -> int:
    """``sources`` against the stack's watch table: its schedule function picks up a new source's first check."""
    from crawlstack.aws.sources import DynamoSources
    from crawlstack.deployed import aws_errors
    from crawlstack.watch.sources import DuplicateSource, SourceError, duplicate_at, sources_from

    stack = _stack(args)
    entries = _source_entries(args) if args.sources_command == "add" else []
    if args.sources_command == "add":
        if not args.rules:
            raise UsageError("sources add: give --rules DIR, the rules deployed with the stack, to check sources by")
        if not Path(args.rules).exists():
            raise UsageError(f"rules: {args.rules}: no such file or directory")
        checked = sources_from(entries, load_rules(args.rules, check_schema=True))
    table = stack.table("watch")
    store = DynamoSources(table, stack.connection.client("dynamodb"))
    with aws_errors(f"sources in {table}"):
        if args.sources_command == "add":
            try:
                store.add_all(checked)
            except DuplicateSource as exc:
                raise duplicate_at(entries, checked, exc) from None
            _print_added(checked)
        elif args.sources_command == "list":
            _print_sources_list(store.list())
        elif args.sources_command == "show":
            source = store.get(args.source_id)
            if source is None:
                raise SourceError(f"no source with id {args.source_id!r} in stack {args.stack}")
            print(json.dumps(source.to_item(), indent=2, ensure_ascii=False))
        elif store.remove(args.source_id):
            print(f"removed {args.source_id}")
        else:
            raise SourceError(f"no source with id {args.source_id!r} in stack {args.stack}")
    return 0


def _print_added(added: Sequence[Any]) -> None:
    ids = ", ".join(s.id for s in added[:10]) + (f", ... ({len(added) - 10} more)" if len(added) > 10 else "")
    print(f"added {len(added)} source{'' if len(added) == 1 else 's'}: {ids}")


def _print_sources_list(sources: Sequence[Any]) -> None:
    rows = [
        [s.id, s.mapping, s.identity, f"{s.priority_min:g}-{s.priority_max:g}", s.pagination or "", s.url]
        for s in sources
    ]
    _print_table(["id", "mapping", "identity", "checks/day", "pagination", "url"], rows)


def _source_entries(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """sources add's sources: the URL with its flags, or each line of --file."""
    from crawlstack.watch.sources import KEYS

    # Each of a source's fields but its URL has a flag of the same name.
    flags = {key: getattr(args, key) for key in sorted(KEYS - {"url"}) if getattr(args, key) is not None}
    if args.file is None:
        if args.url is None:
            raise UsageError("sources add: give a URL (with --mapping), or --file F.jsonl")
        return [("", {"url": args.url, **flags})]
    if args.url is not None or flags:
        raise UsageError("sources add --file: each line holds its source's fields; give no URL or source flags")
    path = Path(args.file)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: invalid JSON: {exc.msg}") from exc
        if not isinstance(data, dict):
            raise UsageError(f"{path}:{number}: expected an object with the source's fields")
        entries.append((f"{path}:{number}", data))
    if not entries:
        raise UsageError(f"{path}: no sources in it")
    return entries


def _query(args: argparse.Namespace) -> int:
    import csv

    from crawlstack.deployed import Athena

    if args.local:
        from crawlstack.local.query import query_local

        result = query_local(args.local, args.sql)
    else:
        stack = _stack(args)
        workgroup, database = stack.output(settings.OUTPUT_WORKGROUP), stack.output(settings.OUTPUT_GLUE_DATABASE)
        result = Athena(stack.connection).run(args.sql, workgroup, database, args.timeout)
    if args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow([csv_cell(c) for c in result.columns])
        writer.writerows([csv_cell(_cell(v)) for v in row] for row in result.rows)
    elif args.format == "jsonl":
        for row in result.rows:
            print(json.dumps(dict(zip(result.columns, row, strict=False)), ensure_ascii=False, default=str))
    else:
        _print_table(result.columns, result.rows)
        print(f"({len(result.rows)} row{'' if len(result.rows) == 1 else 's'})")
    return 0


def _dlq(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from crawlstack.deployed import Queues

    if args.local:
        return _dlq_local(args)
    stack = _stack(args)
    queues = Queues(stack.connection)
    keys = [args.queue] if args.queue else list(settings.QUEUES)
    status = 0
    for key in keys:
        dlq = stack.dlq_url(key)
        if args.dlq_command == "show":
            peeked = queues.peek(dlq, args.limit)
            print(f"{key} dead-letter queue: {queues.depth(dlq).visible} messages" + (":" if peeked else ""))
            for m in peeked:
                sent = datetime.fromtimestamp(m.sent_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                print(f"  received {m.receive_count}x, sent {sent}: {terminal_text(m.body)}")
        else:
            moved = queues.move(dlq, stack.queue_url(key), args.limit)
            print(f"{key}: moved {moved.moved} messages back from its dead-letter queue")
            for failure in moved.failed:
                print(f"crawlstack: {key}: not moved: {terminal_text(str(failure))}", file=sys.stderr)
            status = status or (1 if moved.failed else 0)
    return status


def _dlq_local(args: argparse.Namespace) -> int:
    """``dlq show|redrive --local OUT``: as for a stack, on a local crawl's state (``local.dead_letters``)."""
    from datetime import UTC, datetime

    from crawlstack.local import dead_letters
    from crawlstack.local.backend import StateError

    out = Path(args.local)
    keys = [args.queue] if args.queue else list(settings.QUEUES)
    try:
        if args.dlq_command == "show":
            for shown in dead_letters.show(out, keys, args.limit):
                print(f"{shown.key} dead-letter queue: {shown.total} messages" + (":" if shown.letters else ""))
                for m in shown.letters:
                    sent = datetime.fromtimestamp(m.sent_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                    why = f" ({terminal_text(m.reason)})" if m.reason else ""
                    print(f"  received {m.receive_count}x, sent {sent}{why}: {terminal_text(m.body)}")
            return 0
        moved = dead_letters.redrive(out, keys, args.limit)
    except StateError as exc:
        raise UsageError(f"--local: {exc}") from None
    for key, count in moved.items():
        print(f"{key}: moved {count} messages back from its dead-letter queue")
    if any(moved.values()):
        print(f"next: crawlstack crawl --local --resume --out {out}")
    return 0


JOB_ACTIONS = ("stop", "resume")


def _job_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawlstack crawl",
        parents=[_stack_options()],
        description="Stop or resume a crawl of a deployed stack. A stopped crawl makes no new request within "
        f"{jobs_bound()} s; its messages and tasks are held in DynamoDB until resume sends each back once.",
    )
    parser.add_argument("action", choices=JOB_ACTIONS)
    parser.add_argument("crawl_id", type=crawl_id_flag, metavar="ID", help="the crawl's id")
    return parser


def jobs_bound() -> str:
    from crawlstack import jobs

    return f"{jobs.STATE_CACHE_SECONDS:g}"


def _crawl_job(args: argparse.Namespace) -> int:
    """``crawl stop|resume ID``: the jobs API on the resources the stack's outputs name, through ``crawlstack.aws``."""
    import os

    from crawlstack import aws, jobs
    from crawlstack.deployed import aws_errors

    stack = _stack(args)
    outputs = {settings.ENV_TABLE[key]: stack.table(key) for key in settings.TABLES}
    outputs |= {settings.ENV_QUEUE_URL[key]: stack.queue_url(key) for key in settings.QUEUES}
    outputs[settings.ENV_BUCKET] = stack.output(settings.OUTPUT_BUCKET)
    names = aws.StackNames.from_env(outputs)
    env: dict[str, str] = {}
    if args.endpoint_url:
        env["AWS_ENDPOINT_URL"] = args.endpoint_url
    if args.region:
        env["AWS_DEFAULT_REGION"] = args.region
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    aws.reset_clients()
    try:
        with aws_errors(f"crawl {args.action} {args.crawl_id}"):
            return _run_job(args, names)
    except jobs.UnknownCrawl:
        print(f"crawlstack: error: the stack's crawls table has no crawl {args.crawl_id!r}", file=sys.stderr)
        return 2
    finally:
        aws.reset_clients()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_job(args: argparse.Namespace, names: StackNames) -> int:
    from crawlstack import wiring

    if args.action == "stop":
        wiring.stop_crawl(args.crawl_id, names)
        print(
            f"stopped {args.crawl_id}: no new request within {jobs_bound()} s; "
            f"its work is held until 'crawlstack crawl resume {args.crawl_id}'"
        )
    else:
        sent = wiring.resume_crawl(args.crawl_id, names)
        print(f"resumed {args.crawl_id}: {sent} held message{'' if sent == 1 else 's'} or task sent back")
    return 0


def _deployed_call(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a deployed-stack command; its DeployedError is one line on stderr and its exit status."""
    from crawlstack.deployed import DeployedError

    try:
        return command(args)
    except DeployedError as exc:
        print(f"crawlstack: error: {terminal_text(str(exc))}", file=sys.stderr)
        return exc.status


def _endpoint_failure(exc: BaseException) -> bool:
    """The AWS endpoint could not be reached, or kept failing: a runtime failure, not a bug."""
    from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

    from crawlstack.local.pump import EndpointUnavailable

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        return status >= 500 or "Throttl" in str(error.get("Code", ""))
    return isinstance(exc, EndpointConnectionError | ConnectionClosedError | EndpointUnavailable)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "crawl" and argv[1] in JOB_ACTIONS:
        # Parsed apart: ``crawl`` takes seed URLs as positionals, and
        # ``crawl --local`` must keep working exactly as before.
        return _deployed_call(_crawl_job, _job_parser().parse_args(argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "crawl":
            return _crawl(args)
        if args.command == "rules" and args.rules_command == "validate":
            return _validate(args)
        if args.command == "rules" and args.rules_command == "test":
            return _test(args)
        if args.command == "sources":
            return _deployed_call(_sources, args)
        if args.command == "watch":
            return _watch(args)
        deployed = {
            "seed": _seed,
            "status": _status,
            "records": _records,
            "query": _query,
            "dlq": _dlq,
            "report": _report,
        }
        if args.command in deployed:
            from crawlstack.deployed import DeployedError

            try:
                return deployed[args.command](args)
            except DeployedError as exc:
                print(f"crawlstack: error: {terminal_text(str(exc))}", file=sys.stderr)
                return exc.status
    except RulesInvalid as exc:
        for error in exc.errors:
            print(f"crawlstack: {terminal_text(str(error))}", file=sys.stderr)
        return 2
    except UsageError as exc:
        # Messages may quote a seeds file's or a page's text.
        print(f"crawlstack: error: {terminal_text(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crawlstack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (``| head``): stop quietly, as other CLIs do. Python's
        # own flush of stdout at exit would fail again, so stdout goes to the null device first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    parser.error("unknown command")
    return 2
