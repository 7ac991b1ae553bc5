"""``crawlstack rules validate|test``: check rules files, and run a mapping on one page."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from crawlstack import settings
from crawlstack.cli.common import UsageError
from crawlstack.cli.safe_text import terminal_text
from crawlstack.config.schema import SETTINGS
from crawlstack.limits import cidr_flag, port_flag, user_agent_flag
from crawlstack.rules import load_rules
from crawlstack.urls import InvalidURL, canonicalize


def register(sub: Any) -> None:
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
        type=SETTINGS["delay"].flag_type(),
        default=1.0,
        metavar="SECONDS",
        help="seconds between robots.txt and the page (robots.txt Crawl-delay wins if longer; default 1)",
    )
    test.add_argument(
        "--allow-private", type=cidr_flag, action="append", default=[], metavar="CIDR", help="as for crawl"
    )
    test.add_argument(
        "--allow-port",
        type=port_flag,
        action="append",
        default=[],
        metavar="PORT",
        help="also follow a redirect to this port (repeatable); otherwise only 80, 443 and --url's own port, "
        "on its own host",
    )


def run(args: argparse.Namespace) -> int:
    return _validate(args) if args.rules_command == "validate" else _test(args)


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
    # The tester's fetcher and the extractor (lxml): only for this command.
    from crawlstack.extract.rules_tester import PoliteFetcher, TesterError, guess_content_type, run_rules

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
