"""The robots.txt cache's contract, on DynamoDB (moto), on local mode's SQLite and on the tests' ``FakeHosts``.

It keeps a 500 KiB robots.txt, which DynamoDB's 400 KB item limit would
refuse, and forgets a record once it expires.
"""

from __future__ import annotations

import random
import string
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeHosts

from crawlstack import aws, settings
from crawlstack.fetch.robots_txt import RobotsPolicy
from crawlstack.local.sqlite import SqliteHosts, StateDb
from crawlstack.ports import PARSED, RobotsRecord

ORIGIN = "http://big.example"
UA = "crawlstack/1.0"


@pytest.fixture(params=["moto", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SqliteHosts(StateDb(tmp_path / "state.sqlite"))
    return aws.HostStore(request.getfixturevalue("stack_names").hosts)


@pytest.mark.parametrize("kind", ["store", "fake"])
def test_a_record_reads_back_as_it_was_stored_until_it_expires(kind: str, store: Any) -> None:
    cache = FakeHosts() if kind == "fake" else store
    assert cache.get_robots(ORIGIN) is None
    now = time.time()
    record = RobotsRecord(ORIGIN, PARSED, "User-agent: *\nDisallow: /a\n", 200, now, now + 100, "")
    cache.put_robots(record)
    got = cache.get_robots(ORIGIN)
    assert got is not None
    assert (got.kind, got.body, got.status, got.reason) == (PARSED, record.body, 200, "")
    assert got.fetched_at == pytest.approx(now, abs=1e-3) and got.expires_at == pytest.approx(now + 100, abs=1)
    failed = RobotsRecord(ORIGIN, PARSED, "", None, now, now - 1, "robots.txt timeout")  # already expired
    cache.put_robots(failed)
    assert cache.get_robots(ORIGIN) is None


def test_a_robots_txt_at_the_size_cap_is_stored_whole_and_read_back(store: Any) -> None:
    rules = "User-agent: *\nDisallow: /private\n"
    pad = "".join(f"Disallow: /archive/{i:07d}/\n" for i in range(30_000))[: settings.ROBOTS_MAX_BYTES - len(rules)]
    body = (rules + pad).encode()
    assert len(body) > 400_000
    store.put_robots(RobotsRecord.from_fetch(ORIGIN, 200, body))
    got = store.get_robots(ORIGIN)
    assert got is not None and got.body == body[: body.rfind(b"\n") + 1].decode()
    assert not RobotsPolicy(got).allows(f"{ORIGIN}/private/x", UA)


def test_a_robots_txt_that_will_not_compress_keeps_the_lines_that_fit(store: Any) -> None:
    noise = random.Random(7)
    lines = ["User-agent: *", "Disallow: /private"]
    while sum(len(line) + 1 for line in lines) < settings.ROBOTS_MAX_BYTES:
        lines.append("# " + "".join(noise.choices(string.ascii_letters + string.digits, k=78)))
    store.put_robots(RobotsRecord.from_fetch(ORIGIN, 200, "\n".join(lines).encode()))
    got = store.get_robots(ORIGIN)
    assert got is not None and got.body.startswith("User-agent: *\nDisallow: /private\n")
    assert got.body.endswith("\n") and len(got.body) < settings.ROBOTS_MAX_BYTES
    assert not RobotsPolicy(got).allows(f"{ORIGIN}/private/x", UA)
