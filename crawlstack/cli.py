"""The ``crawlstack`` command.

    crawlstack crawl --local SEED_URL... --rules DIR --out DIR [options]
    crawlstack rules validate PATH
    crawlstack rules test RULES_FILE_OR_DIR --url URL [--file SAVED_PAGE]

Every user mistake (a bad URL, a broken rules file, a bad flag) ends in a
one-line message on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.rules import RuleSet, RulesInvalid, load_rules
from crawlstack.urls import InvalidURL, canonicalize


class UsageError(Exception):
    """A mistake in what the user asked for; printed as one line."""


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a CIDR: {value!r}") from exc


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"invalid regex {value!r}: {exc}") from exc
    return value


def _non_negative_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from exc
    if number < 0 or number != number:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return number


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from exc
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more")
        return number

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawlstack", description="A polite, serverless web crawler and scraper.")
    sub = parser.add_subparsers(dest="command", required=True)

    crawl = sub.add_parser("crawl", help="run a crawl", description="Run a crawl locally, on an embedded AWS emulator.")
    crawl.add_argument("seeds", nargs="*", metavar="SEED_URL", help="URLs to start from (depth 0)")
    crawl.add_argument("--local", action="store_true", help="run in this process on an embedded AWS emulator (moto)")
    crawl.add_argument("--rules", metavar="DIR", help="directory of JSON mapping rules (or one file)")
    crawl.add_argument("--out", metavar="DIR", required=True, help="output directory")
    crawl.add_argument("--max-depth", type=_non_negative_int, default=settings.DEFAULT_MAX_DEPTH, metavar="N")
    crawl.add_argument("--max-pages", type=_positive_int, default=None, metavar="N", help="page budget")
    crawl.add_argument(
        "--delay",
        type=_non_negative_float,
        default=settings.DEFAULT_DELAY_SECONDS,
        metavar="SECONDS",
        help="seconds between requests to one host when robots.txt gives no longer Crawl-delay (default 5)",
    )
    crawl.add_argument("--user-agent", default=settings.DEFAULT_USER_AGENT, metavar="STRING")
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
    crawl.add_argument("--concurrency", type=_positive_int, default=4, metavar="N", help="concurrent fetch batches")
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
        '{"mapping", "fields", "links", "url", "status", "content_type"}; exits 1 when no mapping matches.',
    )
    test.add_argument("rules", metavar="RULES_FILE_OR_DIR")
    test.add_argument("--url", required=True, help="the page's URL (chooses the mapping; resolves relative links)")
    test.add_argument("--file", metavar="SAVED_PAGE", help="read the page from this file instead of fetching it")
    test.add_argument(
        "--content-type", metavar="TYPE", help="the saved page's Content-Type (default: guessed from the file name)"
    )
    test.add_argument("--user-agent", default=settings.DEFAULT_USER_AGENT, metavar="STRING")
    test.add_argument(
        "--delay",
        type=_non_negative_float,
        default=1.0,
        metavar="SECONDS",
        help="seconds between robots.txt and the page (robots.txt Crawl-delay wins if longer; default 1)",
    )
    test.add_argument("--allow-private", type=_cidr, action="append", default=[], metavar="CIDR", help="as for crawl")
    return parser


SEED_KEYS = frozenset({"url", "record_id", "want"})


def _read_seeds(args: argparse.Namespace, rules: RuleSet | None = None) -> list[object]:
    from crawlstack.local.runner import Seed

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
                seed = _seed_line(line, f"{path}:{number}", fields if rules is not None else None, wants)
                seeds.append(seed)
        if not seeds:
            raise UsageError(f"no seeds: {path} has no seed lines")
    if not seeds:
        raise UsageError("no seeds: give SEED_URL arguments or --seeds-file")
    return list(seeds)


def _seed_line(line: str, where: str, fields: set[str] | None, wants: dict[str, tuple[str, ...]]) -> Any:
    """One line of a seeds file, checked as strictly as a rules file: a typo must not pass silently."""
    from crawlstack.local.runner import Seed

    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise UsageError(f'{where}: expected an object with a "url" string')
    unknown = sorted(set(data) - SEED_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (allowed: record_id, url, want)")
    record_id = data.get("record_id")
    if record_id is not None:
        if isinstance(record_id, bool) or not isinstance(record_id, str | int):
            raise UsageError(f'{where}: "record_id" must be a string (or an integer)')
        record_id = str(record_id)
        if not record_id.strip():
            raise UsageError(f'{where}: "record_id" must not be empty')
    want = data.get("want", [])
    if not isinstance(want, list) or not all(isinstance(w, str) and w for w in want):
        raise UsageError(f'{where}: "want" must be a list of field names')
    if want and record_id is None:
        raise UsageError(f'{where}: "want" needs a "record_id" to gather the fields into')
    if want and fields is None:
        raise UsageError(f'{where}: "want" needs --rules: no mapping extracts any field')
    missing = sorted(set(want) - (fields or set()))
    if want and missing:
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


def _crawl(args: argparse.Namespace) -> int:
    from crawlstack.local.runner import LocalOptions, crawl_local

    if not args.local:
        raise UsageError(
            "only local crawls run from here (--local); to crawl with a deployed stack, "
            "send seed messages to its frontier queue (see README)"
        )
    if args.rules and not Path(args.rules).exists():
        raise UsageError(f"rules: {args.rules}: no such file or directory")
    # Every problem up front, before any request.
    ruleset = load_rules(args.rules, check_schema=True) if args.rules else None
    seeds = _read_seeds(args, ruleset)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a directory")
    options = LocalOptions(
        rules_dir=args.rules,
        out_dir=args.out,
        max_depth=args.max_depth,
        max_pages=args.max_pages,
        delay=args.delay,
        user_agent=args.user_agent,
        allow_private=tuple(args.allow_private),
        allow=tuple(args.allow),
        deny=tuple(args.deny),
        endpoint_url=args.endpoint_url,
        fetch_concurrency=args.concurrency,
        progress=False if args.no_progress else None,
    )
    summary = crawl_local(seeds, options)  # type: ignore[arg-type]
    outcomes = summary["outcomes"]
    print(
        f"crawled {summary['pages_fetched']} pages in {summary['elapsed_seconds']:.1f}s: "
        f"{summary['records']} records, {outcomes.get('skipped', 0)} skipped, {outcomes.get('failed', 0)} failed "
        f"-> {args.out}"
    )
    if summary["handler_errors"]:
        print(
            f"warning: {len(summary['handler_errors'])} handler errors, first: {summary['handler_errors'][0]}",
            file=sys.stderr,
        )
    dead = {queue: n for queue, n in summary["dead_letter"].items() if n}
    if dead:
        # Dead-lettered messages are work the crawl never did (records or links lost): not a success.
        counts = ", ".join(f"{queue} {n}" for queue, n in sorted(dead.items()))
        print(f"crawlstack: warning: messages went to dead-letter queues ({counts}); see summary.json", file=sys.stderr)
        return 1
    return 0


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
        fetcher = PoliteFetcher(args.user_agent, args.delay, tuple(args.allow_private))
        try:
            fetched = fetcher.get(url)
        except TesterError as exc:
            raise UsageError(str(exc)) from exc
        url, status, content_type, body = fetched.url, fetched.status, fetched.content_type, fetched.body
    result = run_rules(ruleset, url, body, content_type)
    result.update(url=url, status=status, content_type=content_type)
    print(json.dumps(result, ensure_ascii=False, indent=2))
    if result["mapping"] is None:
        print(f"crawlstack: no mapping in {args.rules} matches {url}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "crawl":
            return _crawl(args)
        if args.command == "rules" and args.rules_command == "validate":
            return _validate(args)
        if args.command == "rules" and args.rules_command == "test":
            return _test(args)
    except RulesInvalid as exc:
        for error in exc.errors:
            print(f"crawlstack: {error}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"crawlstack: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("crawlstack: interrupted", file=sys.stderr)
        return 130
    parser.error("unknown command")
    return 2


if __name__ == "__main__":
    sys.exit(main())
