"""What a local crawl's output directory holds, and which state wrote it.

A crawl or a watch writes the names in ``FILES`` and ``DIRS`` into ``OUT/``
(docs/reference.md, "What a local crawl writes to OUT/"); anything else
there is the user's and is never touched.

* ``refuse_outputs``: a new crawl, without ``--overwrite``, in an ``OUT/``
  that holds any of those names but no state is refused: they are another
  crawl's, and nothing says which of them it wrote.
* ``remove_outputs`` (``--overwrite``): the fixed names, and the objects the
  state's table lists; with no state, the bucket's own files instead
  (``warc/*.warc.gz``, ``objects/records/``, ``objects/crawl-log/``).  A
  directory goes only once nothing is left in it.
* A state and the outputs it writes carry one id, made with the state: in
  its ``crawl_meta`` (``STATE_ID_KEY``) and in ``OUT/state-id.txt``.
  ``check_owner`` refuses a state that is not the outputs' own (another
  crawl's state copied in would cut their files back to its lengths).
* ``refuse_missing``: a resume whose files went missing (a deleted
  ``objects/``) is refused before anything reads them.
* ``take_lock``: ``OUT/.crawl.lock`` (``flock``), held by the one crawl or
  watch on ``OUT/``; ``crawl_running`` asks whether one holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO

STATE_FILE = "state.sqlite"
# Each page try's request, appended before it goes out (``SqliteJournal``).
JOURNAL_FILE = "requests.journal"
LOCK_FILE = ".crawl.lock"
STATE_ID_FILE = "state-id.txt"
# The key of the state's id in its crawl_meta table.
STATE_ID_KEY = "state_id"
STATE_FILES = (STATE_FILE, f"{STATE_FILE}-wal", f"{STATE_FILE}-shm", JOURNAL_FILE, STATE_ID_FILE)
# What the state's outputs are: files written whole (``outputs.replacing``: a kill may leave NAME.part) or appended.
OUTPUT_FILES = (
    "records.jsonl",
    "crawl-log.jsonl",
    "resolved.jsonl",
    "metrics.jsonl",
    "summary.json",
    "report.html",
    "events.jsonl",
    "clock.json",
)
FILES = STATE_FILES + OUTPUT_FILES + tuple(f"{name}.part" for name in OUTPUT_FILES)
# The bucket laid out as OUT/ (``LocalBlobs``): WARCs in warc/, every other object under objects/.
DIRS = ("warc", "objects")
# What the bucket writes where when no state lists its objects.
BUCKET_FILES = (("warc", "*.warc.gz"), ("objects/records", "**/*"), ("objects/crawl-log", "**/*"))
# A write in progress (``blobs._write_whole``, a WARC copied by ``outputs._copy_warcs``) that a kill left.
TEMPORARY = (("warc", ".put-*"), ("warc", "*.warc.gz.part"), ("objects", "**/.put-*"))


class StateError(Exception):
    """The output directory's state cannot be used as asked; its message is the one line a user sees."""


def present(out: Path, names: Iterable[str]) -> list[str]:
    return [name for name in names if os.path.lexists(out / name)]


def refuse_outputs(out: Path) -> None:
    """Refuse a new crawl where ``out`` holds a crawl's outputs but no state (``StateError``)."""
    found = present(out, FILES + DIRS)
    if found:
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        raise StateError(
            f"{out} holds a crawl's outputs ({shown}) but no state to resume: --overwrite replaces them, "
            "or choose another --out; nothing was changed"
        )


def remove_outputs(out: Path, written: Iterable[str] | None) -> None:
    """Remove what a crawl wrote to ``out``, and nothing else.

    ``written``: the objects' paths (relative to ``out``) that its state
    lists; None when there is no state, and the bucket's own files go.
    """
    for name in FILES:
        _unlink(out / name)
    if written is None:
        files = [path for directory, pattern in BUCKET_FILES for path in (out / directory).glob(pattern)]
    else:
        files = [out / path for path in written if _in_bucket(path)]
    files += [path for directory, pattern in TEMPORARY for path in (out / directory).glob(pattern)]
    for path in files:
        _unlink(path)
    for directory in DIRS:
        _remove_empty(out / directory)


def _in_bucket(relative: str) -> bool:
    """Whether a path the state lists lies under warc/ or objects/ (a state is a file anyone can edit)."""
    parts = PurePosixPath(relative).parts
    return len(parts) > 1 and parts[0] in DIRS and not any(p in ("..", ".", "") for p in parts)


def _unlink(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)


def _remove_empty(directory: Path) -> None:
    """Remove ``directory`` and the directories under it that are left empty; a symlink is not followed."""
    if directory.is_symlink() or not directory.is_dir():
        return
    for root, _, _ in os.walk(directory, topdown=False):
        with contextlib.suppress(OSError):  # not empty: something of the user's is in it
            os.rmdir(root)


def new_state_id() -> str:
    return secrets.token_hex(8)


def write_state_id(out: Path, state_id: str) -> None:
    part = out / f"{STATE_ID_FILE}.part"
    part.write_text(state_id + "\n", encoding="utf-8")
    os.replace(part, out / STATE_ID_FILE)


def read_state_id(out: Path) -> str | None:
    try:
        with (out / STATE_ID_FILE).open("rb") as fh:
            return fh.read(200).decode("utf-8", "replace").strip() or None
    except (FileNotFoundError, IsADirectoryError):
        return None


def check_owner(out: Path, state_id: str | None) -> None:
    """Refuse (``StateError``) a state whose id is not the one ``out``'s outputs carry.

    ``state_id`` is None for a state made before states had ids: it is
    taken as the outputs' own unless they carry another's id.  A state
    with no id file beside it is its outputs' own only if there are none
    yet (a kill between the state's making and its id file's).
    """
    found = read_state_id(out)
    if found is not None and found == state_id:
        return
    if found is None and (state_id is None or not present(out, OUTPUT_FILES + DIRS)):
        return
    why = f"{STATE_ID_FILE} names another" if found is not None else f"they have no {STATE_ID_FILE}"
    raise StateError(
        f"{out / STATE_FILE} is not the state of the outputs in {out} ({why}): going on would cut them back "
        "to its own; nothing was changed"
    )


def refuse_missing(out: Path, missing: list[str]) -> None:
    """Refuse a resume that would read files that are gone (``StateError``)."""
    if missing:
        more = f" and {len(missing) - 1} more of the crawl's files are" if len(missing) > 1 else " is"
        raise StateError(
            f"{out / missing[0]}{more} missing: the crawl cannot go on without them "
            "(--overwrite starts it again); nothing was changed"
        )


@contextmanager
def holding(out: Path) -> Iterator[None]:
    """``out``'s lock for a crawl that keeps no state there (``--emulate-aws``)."""
    out.mkdir(parents=True, exist_ok=True)
    handle = take_lock(out)
    try:
        yield
    finally:
        handle.close()


def crawl_running(out: Path) -> bool:
    """Whether a crawl holds ``out``'s lock now: a shared lock is tried without waiting, and let go at once."""
    try:
        handle = (out / LOCK_FILE).open("rb")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def take_lock(out: Path, tries: int = 20) -> IO[str]:
    """The crawl's lock on ``out``; a reader's brief probe (``crawl_running``) is waited out, another crawl is not."""
    handle = (out / LOCK_FILE).open("a+", encoding="utf-8")
    for attempt in range(tries):
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt + 1 < tries:
                time.sleep(0.05)
    else:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        message = f"{out} is in use by another crawl (pid {holder}); wait for it or choose another --out"
        raise StateError(message) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle
