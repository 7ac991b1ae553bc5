"""The pages bucket as files under one directory: a key is a relative path.

A write goes to a temporary file in the key's directory and is renamed into
place, so a reader (or a crawl resumed after a kill) sees an object whole
or not at all, as S3 gives it.  ``keys`` lists in key order, as S3 does.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath


class FileBlobs:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        parts = PurePosixPath(key).parts
        if not parts or key.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"not an object key: {key!r}")
        return self.root.joinpath(*parts)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str, bucket: str | None = None) -> bytes:
        return self._path(key).read_bytes()

    def keys(self, prefix: str, since: float | None = None) -> Iterator[str]:
        """Keys under ``prefix``; with ``since`` (epoch seconds), only those written after it."""
        if not self.root.exists():
            return
        found = []
        for path in self.root.rglob("*"):
            if not path.is_file() or path.name.startswith(".put-"):
                continue
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix) and (since is None or path.stat().st_mtime >= since):
                found.append(key)
        yield from sorted(found)
