"""``crawlstack sources add|list|show|remove``: the sources a watch re-checks, in a stack or in OUT/."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crawlstack.cli import common
from crawlstack.cli.common import UsageError, print_table
from crawlstack.rules import load_rules
from crawlstack.watch import sources as defaults
from crawlstack.watch.sources import KEYS, DuplicateSource, Source, SourceError, duplicate_at, sources_from


def register(sub: Any) -> None:
    sources = sub.add_parser(
        "sources",
        help="the sources a watch re-checks: listings, feeds and APIs read with a mapping that has items",
        description="Add, list, show or remove a watch's sources: in a deployed stack's watch table, whose "
        "schedule function checks them, or with --local OUT in OUT/state.sqlite for crawlstack watch --local.",
    )
    sources_sub = sources.add_subparsers(dest="sources_command", required=True)
    local = argparse.ArgumentParser(add_help=False, parents=[common.stack_options()])
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


def run(args: argparse.Namespace) -> int:
    from crawlstack.local import sources
    from crawlstack.local.backend import StateError

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
    from crawlstack.aws.errors import aws_errors
    from crawlstack.aws.sources import DynamoSources

    stack = common.stack(args)
    entries = _source_entries(args) if args.sources_command == "add" else []
    if args.sources_command == "add":
        if not args.rules:
            raise UsageError("sources add: give --rules DIR, the rules deployed with the stack, to check sources by")
        if not Path(args.rules).exists():
            raise UsageError(f"rules: {args.rules}: no such file or directory")
        checked = sources_from(entries, load_rules(args.rules, check_schema=True))
    table = stack.table("watch")
    store = DynamoSources(table, connection=stack.connection)
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


def _print_added(added: Sequence[Source]) -> None:
    ids = ", ".join(s.id for s in added[:10]) + (f", ... ({len(added) - 10} more)" if len(added) > 10 else "")
    print(f"added {len(added)} source{'' if len(added) == 1 else 's'}: {ids}")


def _print_sources_list(sources: Sequence[Source]) -> None:
    rows = [
        [s.id, s.mapping, s.identity, f"{s.priority_min:g}-{s.priority_max:g}", s.pagination or "", s.url]
        for s in sources
    ]
    print_table(["id", "mapping", "identity", "checks/day", "pagination", "url"], rows)


def _source_entries(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """sources add's sources: the URL with its flags, or each line of --file."""
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
