"""``crawlstack seed``: send seed URLs to a deployed stack's frontier queue; and the seeds file crawl reads too."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawlstack.cli import common
from crawlstack.cli.common import UsageError
from crawlstack.cli.options import add_settings, check_config_size, given_settings, ranges_help
from crawlstack.cli.safe_text import terminal_text
from crawlstack.config import CrawlConfig
from crawlstack.limits import NOT_UTF8, crawl_id_flag, is_utf8_text, record_id_problem
from crawlstack.local.options import Seed
from crawlstack.rules import RuleSet, load_rules
from crawlstack.urls import InvalidURL, canonicalize

if TYPE_CHECKING:
    from crawlstack.aws.stack import Stack


def register(sub: Any) -> None:
    seed = sub.add_parser(
        "seed",
        parents=[common.stack_options()],
        help="send seed URLs to a deployed stack's frontier queue",
        description="Send seeds (depth 0) to the deployed stack's frontier queue, ten to a SendMessageBatch. "
        "Without --crawl-id they join the stack's default crawl. Exits 1 if SQS refused any.",
        epilog=ranges_help("seed"),
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
    add_settings(config, "seed", defaults=False)


def run(args: argparse.Namespace) -> int:
    from crawlstack.aws import Queue

    if args.rules and not Path(args.rules).exists():
        raise UsageError(f"rules: {args.rules}: no such file or directory")
    ruleset = load_rules(args.rules, check_schema=True) if args.rules else None
    seeds = read_seeds(args, ruleset, check_want=ruleset is not None)  # every mistake before any message
    given = given_settings(args, "seed")
    check_config_size("seed", given)
    if given and not args.crawl_id:
        raise UsageError(
            "crawl settings (--max-depth, --delay, ...) need --crawl-id: the default crawl's come from the stack"
        )
    if ruleset is not None and args.rules_set:
        unknown = sorted(set(args.rules_set) - {m.name for m in ruleset})
        if unknown:
            raise UsageError(f"--rules-set: no mapping named {unknown[0]!r} in {args.rules}")
    stack = common.stack(args)
    if given:
        _create_crawl(stack, CrawlConfig(crawl_id=args.crawl_id).with_values(**given), given)
    frontier = Queue(stack.queue_url("frontier"), "frontier", connection=stack.connection)
    bodies = [_frontier_body(s.url, args.crawl_id, s.record_id, s.want) for s in seeds]
    failed = frontier.try_send(bodies)
    crawl = args.crawl_id or "the stack's default crawl"
    print(f"seeded {len(bodies) - len(failed)} of {len(bodies)} URLs into {terminal_text(crawl)}")
    for body, reason in failed:
        print(f"crawlstack: not sent: {terminal_text(json.loads(body)['url'] + ': ' + reason)}", file=sys.stderr)
    return 1 if failed else 0


def _create_crawl(stack: Stack, config: CrawlConfig, given: Collection[str]) -> None:
    """Store a new crawl with the settings given, as a local crawl is stored (``Crawls.put_new``).

    Only those: the rest follow the stack's defaults. A crawl's config is
    fixed once stored, so an existing crawl is a user error (status 2).
    """
    from crawlstack.aws.crawls import CrawlStore
    from crawlstack.aws.errors import DeployedError, aws_errors

    table = stack.table("crawls")
    with aws_errors(f"write {table}"):
        stored = CrawlStore(table, connection=stack.connection).put_new(config, only=given)
    if not stored:
        raise DeployedError(
            f"crawl {config.crawl_id!r} already exists and its config is fixed; seed it without settings, "
            "or start a new crawl id",
            status=2,
        )


def _frontier_body(url: str, crawl_id: str | None, record_id: str | None, want: tuple[str, ...]) -> str:
    """A seed's frontier message, as local mode sends it; without ``crawl_id`` it joins the stack's default crawl."""
    from crawlstack.messages import FrontierMessage

    message = FrontierMessage(url=url, depth=0, record_id=record_id, want=want)
    data = json.loads(message.to_json())
    if crawl_id is None:
        data.pop("crawl_id", None)
    else:
        data["crawl_id"] = crawl_id
    return json.dumps(data, separators=(",", ":"))


# --- seeds files (crawl --local reads them too) ------------------------------------

SEED_KEYS = frozenset({"url", "record_id", "want"})


def read_seeds(args: argparse.Namespace, rules: RuleSet | None = None, check_want: bool = True) -> list[Seed]:
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
) -> Seed:
    """One line of a seeds file, checked as strictly as a rules file: a typo must not pass silently.

    ``check_want=False`` (seeding a deployed stack without --rules) leaves
    out the one check that needs the rules: that a mapping extracts each wanted field.
    """
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
