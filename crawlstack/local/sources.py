"""``crawlstack sources add|list|show|remove --local OUT``: a watch's sources in ``OUT/state.sqlite``.

The sources live in the same state database a watch of ``OUT`` runs on,
opened beside it without its lock (every change is one transaction).  The
rules a source is checked against are stored there too: ``--rules DIR``
replaces them, and without it the stored ones are used, so that ``watch``
reads each source with the mapping it was added with.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from crawlstack.local.backend import STATE_FILE, LocalState, has_state, read_meta, write_meta
from crawlstack.local.sqlite.db import StateDb
from crawlstack.local.sqlite.sources import SqliteSources
from crawlstack.rules import RuleSet, load_rules, rule_files
from crawlstack.watch.sources import DuplicateSource, Source, SourceError, duplicate_at, source_from, sources_from

RULES_KEY = "watch_rules"


def open_state(out: Path) -> StateDb:
    """OUT's state for a command beside a watch: opened, or made, without the watch's lock."""
    out.mkdir(parents=True, exist_ok=True)
    return LocalState.open_db(out / STATE_FILE, fresh=not has_state(out))


def stored_rules(db: StateDb) -> dict[str, str]:
    """The rule files' texts the sources were checked against (file name -> text)."""
    return read_meta(db, RULES_KEY) or {}


def rules_of(texts: dict[str, str]) -> RuleSet:
    """Compile stored rule texts as ``load_rules`` compiles a directory."""
    if not texts:
        return RuleSet()
    with tempfile.TemporaryDirectory(prefix="crawlstack-rules-") as directory:
        for name, text in texts.items():
            (Path(directory) / name).write_text(text, encoding="utf-8")
        return load_rules(directory, check_schema=True)


def add_sources(out: Path, entries: list[tuple[str, dict[str, Any]]], rules_dir: str | None) -> list[Source]:
    """Check every entry (``where`` it came from, its fields), then add them all or none.

    ``SourceError`` says what is wrong with the first bad one, where it is.
    """
    db = open_state(out)
    try:
        texts = stored_rules(db)
        if rules_dir is not None:
            load_rules(rules_dir, check_schema=True)  # RulesInvalid: the caller's lines
            # Merged with the stored files by name: the sources added before keep their mappings.
            texts = {**texts, **{f.name: f.read_text(encoding="utf-8-sig") for f in rule_files(Path(rules_dir))}}
        rules = rules_of(texts)
        for before in SqliteSources(db).list():
            try:
                source_from({k: v for k, v in before.to_item().items() if v is not None}, rules)
            except SourceError as exc:
                raise SourceError(f"--rules: source {before.id!r} would no longer load: {exc}") from None
        sources = sources_from(entries, rules)
        try:
            SqliteSources(db).add_all(sources)
        except DuplicateSource as exc:
            raise duplicate_at(entries, sources, exc) from None
        if rules_dir is not None:
            write_meta(db, RULES_KEY, texts)
        return sources
    finally:
        db.close()


def list_sources(out: Path) -> list[Source]:
    db = _existing(out)
    try:
        return SqliteSources(db).list()
    finally:
        db.close()


def get_source(out: Path, source_id: str) -> Source:
    db = _existing(out)
    try:
        source = SqliteSources(db).get(source_id)
    finally:
        db.close()
    if source is None:
        raise SourceError(f"no source with id {source_id!r} in {out}")
    return source


def remove_source(out: Path, source_id: str) -> None:
    db = _existing(out)
    try:
        removed = SqliteSources(db).remove(source_id)
        with db.transaction() as conn:
            # A source added again under this id starts afresh: no old tokens, history or ETag.
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'source_state'").fetchone():
                conn.execute("DELETE FROM source_state WHERE id = ?", (source_id,))
    finally:
        db.close()
    if not removed:
        raise SourceError(f"no source with id {source_id!r} in {out}")


def _existing(out: Path) -> StateDb:
    if not has_state(out):
        raise SourceError(f"{out} holds no sources ({STATE_FILE}): add some with crawlstack sources add")
    return open_state(out)
