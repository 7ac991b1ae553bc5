"""The page shapes that cost extraction the most memory, at the body cap (10 MiB), and a run of them.

Run as a script (test_fuzz_extract.py does, in a fresh interpreter), it
extracts one page of each shape after another, as one extract process would
(the shipped rules and a mapping that reads them the costly ways), and prints
one JSON line: the process's peak resident memory and, per shape, the
records and failure reasons.  ``small`` gives the same shapes at a size the
in-process fuzz can afford.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

MIB10 = 10 * 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]


def _fill(unit: bytes, size: int, head: bytes = b"<html><body>") -> bytes:
    return (head + unit * ((size - len(head)) // len(unit)))[:size]


def _one_tag_of_unique_attributes(size: int) -> bytes:
    """One tag of distinct attribute names (``a0000`` ... ``zffff``), built without a list of millions."""
    chunk = b"".join(b" a%04x" % i for i in range(1 << 16))
    letters = b"abcdefghijklmnopqrstuvwxyz"[: size // len(chunk) + 1]
    return (b"<html><body><div" + b"".join(chunk.replace(b" a", b" " + bytes([c])) for c in letters))[:size]


# name -> (body of about ``size`` bytes, content type)
SHAPES: dict[str, tuple[Callable[[int], bytes], str]] = {
    # a million nodes in 3 MB: the parse alone took 500 MB
    "tiny-elements": (lambda size: _fill(b"<a>", size), "text/html"),
    # 2 nodes an attribute
    "attributes": (lambda size: _fill(b"<a b=1 c=2 d=3 e=4 f=5>", size), "text/html"),
    # lxml's itertext is quadratic in comments
    "comments": (lambda size: _fill(b"<!---->", size), "text/html"),
    # each li's text is all the text below it
    "nested-lists": (
        lambda size: _fill(b"<li>" + b"t" * 200 + b"<ul class='tags'>", size, b"<html><body><ul class='tags'>"),
        "text/html",
    ),
    # libxml2 compares each attribute's name with every one before it in its tag: hours in C
    "attribute-names": (_one_tag_of_unique_attributes, "text/html"),
    # millions of jsonpath matches
    "json-listing": (lambda size: b'{"posts": [' + b"1," * (size // 2 - 10) + b"1]}", "application/json"),
    # an object in 3 bytes, 60 bytes and more parsed
    "json-objects": (lambda size: b'{"posts": [' + b"{}," * (size // 3 - 10) + b"{}]}", "application/json"),
}


def small() -> list[bytes]:
    """Each shape at 64 KiB."""
    return [body(64 * 1024) for body, _ in SHAPES.values()]


def _mapping() -> object:
    from crawlstack.rules.mapping import compile_mapping

    def step(kind: str, **parameters: str) -> dict[str, object]:
        return {"type": kind, "parameters": parameters}

    return compile_mapping(
        "shapes.json",
        {
            "name": "shapes",
            "url_patterns": [{"type": "regex", "pattern": "^http://shapes[.]example/"}],
            "fields": [
                {"name": "tags", "multiple": True, "processors": [step("css", selector="ul.tags li")]},
                {"name": "joined", "processors": [step("css", selector="ul.tags li"), step("join", separator=", ")]},
                {"name": "texts", "multiple": True, "processors": [step("xpath", expression="//text()")]},
                {"name": "body", "processors": [step("css", selector="body")]},
                {"name": "posts", "multiple": True, "processors": [step("jsonpath", expression="$.posts[*]")]},
            ],
        },
    )


def main() -> None:
    from fakes import FakeBlobs, FakeCrawls, FakeResults

    from crawlstack.config import CrawlConfig
    from crawlstack.extract import Extractor
    from crawlstack.fetch.warc import Exchange, write_warc
    from crawlstack.rules import RuleSet, load_rules

    rules = RuleSet((_mapping(), *load_rules(ROOT / "rules")))  # type: ignore[arg-type]
    config = CrawlConfig(crawl_id="c", max_depth=3, seed_hosts=frozenset({"shapes.example"}))
    found: dict[str, object] = {}
    for name, (body, content_type) in SHAPES.items():
        extractor = Extractor(FakeCrawls(config), FakeResults(), FakeBlobs(), rules)
        url = f"http://shapes.example/{name}"
        headers = [("Content-Type", content_type)]
        page = Exchange(url, "GET", [], 200, "OK", headers, body(MIB10), metadata={"crawl_id": "c"})
        extractor.blobs.put("pages/w.warc.gz", write_warc([page]), "application/warc")  # type: ignore[attr-defined]
        del page
        out = extractor.extract_object(extractor.blobs.bucket, "pages/w.warc.gz")  # type: ignore[attr-defined]
        found[name] = {"records": len(out.records), "failed": [f.reason for f in out.failed]}
    print(json.dumps({"peak_mb": peak_mb(), "shapes": found}))


def peak_mb() -> int:
    """The process's own peak resident memory (Linux's VmHWM: ru_maxrss would carry its parent's over exec)."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) // 1024
    except (OSError, StopIteration):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak // (1 << 20) if sys.platform == "darwin" else peak // 1024


if __name__ == "__main__":
    main()
