"""The pages bucket: one contract on S3 (moto) and on local mode's files (``FileBlobs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBlobs

from crawlstack import aws
from crawlstack.local.sqlite import FileBlobs, LocalBlobs, SqliteQueue, StateDb


@pytest.fixture(params=["moto", "files", "local", "fake"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "files":
        return FileBlobs(tmp_path / "bucket")
    if request.param == "local":  # the bucket as a local crawl's OUT/
        db = StateDb(tmp_path / "state.sqlite")
        return LocalBlobs(tmp_path / "out", db, SqliteQueue(db, "extract"))
    if request.param == "fake":
        return FakeBlobs()
    return aws.BlobStore(request.getfixturevalue("stack_names").bucket)


def test_objects_read_back_and_list_by_prefix_in_key_order(blobs: Any) -> None:
    blobs.put("blobs-test/b/2.warc.gz", b"two", "application/warc")
    blobs.put("blobs-test/a/1.warc.gz", b"one", "application/warc")
    blobs.put("blobs-other/x.jsonl.gz", b"x", "application/x-ndjson")
    assert blobs.get("blobs-test/a/1.warc.gz") == b"one"
    assert list(blobs.keys("blobs-test/")) == ["blobs-test/a/1.warc.gz", "blobs-test/b/2.warc.gz"]
    blobs.put("blobs-test/a/1.warc.gz", b"again", "application/warc")  # a redelivery overwrites its own
    assert blobs.get("blobs-test/a/1.warc.gz") == b"again"
    assert list(blobs.keys("blobs-none/")) == []


def test_a_file_key_never_leaves_its_directory(tmp_path: Path) -> None:
    files = FileBlobs(tmp_path / "bucket")
    for key in ("../escape", "/absolute", "a/../../b", ""):
        with pytest.raises(ValueError):
            files.put(key, b"", "text/plain")
    assert not (tmp_path / "escape").exists()
    files.put("a/b.txt", b"ok", "text/plain")
    assert [p.name for p in (tmp_path / "bucket" / "a").iterdir()] == ["b.txt"]  # no temporary left behind
