"""The robots.txt cache keeps a 500 KiB robots.txt, which DynamoDB's 400 KB item limit would refuse."""

from __future__ import annotations

import random
import string

from crawlstack import aws, settings
from crawlstack.robots import RobotsPolicy, RobotsRecord

ORIGIN = "http://big.example"
UA = "crawlstack/1.0"


def test_a_robots_txt_at_the_size_cap_is_stored_whole_and_read_back(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    rules = "User-agent: *\nDisallow: /private\n"
    pad = "".join(f"Disallow: /archive/{i:07d}/\n" for i in range(30_000))[: settings.ROBOTS_MAX_BYTES - len(rules)]
    body = (rules + pad).encode()
    assert len(body) > 400_000
    store = aws.HostStore(stack_names.hosts)
    store.put_robots(RobotsRecord.from_fetch(ORIGIN, 200, body))
    got = store.get_robots(ORIGIN)
    assert got is not None and got.body == body[: body.rfind(b"\n") + 1].decode()
    assert not RobotsPolicy(got).allows(f"{ORIGIN}/private/x", UA)


def test_a_robots_txt_that_will_not_compress_keeps_the_lines_that_fit(
    stack: dict[str, str], stack_names: aws.StackNames
) -> None:
    noise = random.Random(7)
    lines = ["User-agent: *", "Disallow: /private"]
    while sum(len(line) + 1 for line in lines) < settings.ROBOTS_MAX_BYTES:
        lines.append("# " + "".join(noise.choices(string.ascii_letters + string.digits, k=78)))
    store = aws.HostStore(stack_names.hosts)
    store.put_robots(RobotsRecord.from_fetch(ORIGIN, 200, "\n".join(lines).encode()))
    got = store.get_robots(ORIGIN)
    assert got is not None and got.body.startswith("User-agent: *\nDisallow: /private\n")
    assert got.body.endswith("\n") and len(got.body) < settings.ROBOTS_MAX_BYTES
    assert not RobotsPolicy(got).allows(f"{ORIGIN}/private/x", UA)
