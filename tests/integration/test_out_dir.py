"""OUT/ holds what the user owns: a crawl removes only what it wrote, and a state goes on only with its own outputs.

Each case runs the CLI in this process on a directory laid out as a careless
user leaves one, and is judged from the files in it (byte for byte), the
loopback web's request log and the one line on stderr.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sqlite3
from pathlib import Path

import pytest
from webs import ALLOW_LOOPBACK, UA, page_requests, read_jsonl, star_site, write_rules
from webs import host_pattern as pattern
from webs import mapping as rule

from crawlstack.cli import main
from crawlstack.demo.server import LoopbackWeb, Response

A, B = "127.0.0.2", "127.0.0.3"
PAGES = [rule("page", pattern(A, r"/p\d+\.html"), {"title": "//h1/text()"}),
         rule("page-b", pattern(B, r"/p\d+\.html"), {"title": "//h1/text()"})]  # fmt: skip
# What a crawl keeps beside its outputs, and changes on every open: not the user's.
STATE = {"state.sqlite", "state.sqlite-wal", "state.sqlite-shm", "requests.journal", "state-id.txt"}


def files(out: Path, state: bool = True) -> dict[str, bytes]:
    """Every file under ``out`` and its bytes but the crawl's lock (the state's own left out unless ``state``)."""
    found = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    return {name: data for name, data in found.items() if name != ".crawl.lock" and (state or name not in STATE)}


def lay_out(out: Path, tree: dict[str, str]) -> dict[str, bytes]:
    for name, text in tree.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf-8")
    return files(out)


def crawl_argv(web: LoopbackWeb, out: Path, *extra: str, host: str = A) -> list[str]:
    rules = write_rules(out.parent / "rules", PAGES)
    return ["crawl", "--local", web.url(host, "/"), "--rules", str(rules), "--out", str(out), *ALLOW_LOOPBACK,
            "--delay", "0", "--user-agent", UA, "--no-progress", *extra]  # fmt: skip


def cli(argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` in this process: its exit code and its stderr.

    Not capsys: the handlers' loggers keep the stdout they first find, and
    capsys's is closed with its test.
    """
    with contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(argv)
    return code, err.getvalue()


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "name", ["warc/0a1b.warc.gz", "objects/records/x.jsonl.gz", "records.jsonl", "crawl-log.jsonl", "events.jsonl"]
)
def test_a_new_crawl_refuses_an_out_holding_a_crawls_outputs_but_no_state(
    tmp_path: Path, web: LoopbackWeb, name: str
) -> None:
    web.add_host(A, star_site(1))
    out = tmp_path / "out"
    before = lay_out(out, {name: "the user's\n", "notes.txt": "mine\n"})
    code, err = cli(crawl_argv(web, out))
    assert code == 2, err
    err = one_line(err)
    assert "but no state to resume: --overwrite replaces them" in err and name.split("/")[0] in err
    assert files(out) == before and not web.log


def test_a_new_crawl_writes_beside_files_that_are_not_a_crawls(tmp_path: Path, web: LoopbackWeb) -> None:
    # As wget and Scrapy do: an OUT/ holding none of the names a crawl writes is the user's choice of place.
    web.add_host(A, star_site(2))
    out = tmp_path / "out"
    before = lay_out(out, {"notes.txt": "mine\n", "data/warc/x.warc.gz": "not a crawl's"})
    assert main(crawl_argv(web, out)) == 0
    assert before.items() <= files(out).items()
    assert len(read_jsonl(out / "records.jsonl")) == 2


def test_overwrite_refuses_a_state_database_that_is_not_a_crawls(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    lay_out(out, {"records.jsonl": "{}\n", "warc/a.warc.gz": "w"})
    conn = sqlite3.connect(out / "state.sqlite")  # another program's database, under the state's name
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('precious')")
    conn.commit()
    conn.close()
    before = files(out)
    code, err = cli(["crawl", "--local", "http://127.0.0.2/", "--out", str(out), "--overwrite", "--no-progress"])
    assert code == 2, err
    assert "is not a crawlstack state database; nothing was changed" in one_line(err)
    assert files(out) == before


def test_overwrite_removes_only_what_the_state_says_its_crawl_wrote(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(2))
    out = tmp_path / "out"
    argv = crawl_argv(web, out)
    assert main(argv) == 0
    written = {p.name for p in (out / "warc").glob("*.warc.gz")}
    assert written and (out / "objects" / "records").is_dir()
    mine = {"notes.txt": "mine\n", "warc/mine.warc.gz": "a WARC of the user's", "objects/records/mine.txt": "x",
            "objects/keep/x.json": "{}"}  # fmt: skip
    lay_out(out, mine)
    assert main([*argv, "--overwrite"]) == 0
    after = files(out)
    assert {name: text.encode() for name, text in mine.items()}.items() <= after.items()
    assert len(read_jsonl(out / "records.jsonl")) == 2  # a fresh crawl's, not appended to the first's
    assert len(page_requests(web, A)) == 6  # crawled again from scratch


def test_overwrite_without_a_state_removes_only_the_documented_names(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(1))
    out = tmp_path / "out"
    ours = {"records.jsonl": '{"url": "old"}\n', "summary.json": "{}", "report.html": "<p>",
            "warc/old.warc.gz": "w", "objects/crawl-log/crawl_id=x/a.jsonl.gz": "l"}  # fmt: skip
    mine = {"notes.txt": "mine\n", "warc/notes.txt": "mine", "objects/mine/y.txt": "mine"}
    lay_out(out, {**ours, **mine})
    assert main([*crawl_argv(web, out), "--overwrite"]) == 0
    after = files(out)
    assert {name: text.encode() for name, text in mine.items()}.items() <= after.items()
    assert "warc/old.warc.gz" not in after and not (out / "objects" / "crawl-log" / "crawl_id=x").exists()
    assert [r["url"] for r in read_jsonl(out / "records.jsonl")] == [web.url(A, "/p1.html")]


def test_an_emulated_crawl_refuses_an_out_holding_a_crawls_outputs_too(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    before = lay_out(out, {"records.jsonl": '{"url": "the user\'s"}\n'})
    code, err = cli(["crawl", "--local", "http://127.0.0.2/", "--emulate-aws", "--out", str(out), "--no-progress"])
    assert code == 2, err
    assert "--overwrite replaces them" in one_line(err)
    assert files(out) == before


def test_a_resume_refuses_another_crawls_state_and_leaves_the_outputs_whole(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(4))
    web.add_host(B, star_site(1))
    ours, other = tmp_path / "ours", tmp_path / "other"
    assert main(crawl_argv(web, ours)) == 0
    assert main(crawl_argv(web, other, host=B)) == 0
    for name in ("state.sqlite", "state.sqlite-wal", "state.sqlite-shm"):
        (ours / name).unlink(missing_ok=True)
        if (other / name).exists():
            shutil.copy(other / name, ours / name)
    before, requests = files(ours, state=False), len(web.log)
    code, err = cli(["crawl", "--local", "--resume", "--out", str(ours), "--no-progress"])
    assert code == 2, err
    assert "is not the state of the outputs in" in one_line(err)
    assert files(ours, state=False) == before and len(web.log) == requests


def test_a_resume_whose_objects_went_missing_is_refused_in_one_line(tmp_path: Path, web: LoopbackWeb) -> None:
    web.add_host(A, star_site(2))
    out = tmp_path / "out"
    assert main(crawl_argv(web, out)) == 0
    shutil.rmtree(out / "objects")
    before, requests = files(out, state=False), len(web.log)
    code, err = cli(["crawl", "--local", "--resume", "--out", str(out), "--no-progress"])
    assert code == 2, err
    err = one_line(err)
    assert f"{out}/objects/crawl-log/" in err and "missing" in err
    assert files(out, state=False) == before and len(web.log) == requests


LISTING = {
    "name": "listing",
    "url_patterns": [{"type": "regex", "pattern": "/list"}],
    "items": {"processors": [{"type": "css", "parameters": {"selector": "li"}}]},
    "fields": [{"name": "url", "processors": [{"type": "xpath", "parameters": {"expression": ".//a/@href"}},
                                              {"type": "absolute_url"}]}],
}  # fmt: skip


def test_a_watch_on_a_fresh_state_leaves_an_events_file_it_did_not_write(tmp_path: Path, web: LoopbackWeb) -> None:
    # The watch's state was removed (or OUT/ copied without it): its events.jsonl is someone's record of events.
    web.add_host(A, {"/list": Response('<ul><li><a href="/1">1</a></li></ul>')})
    out = tmp_path / "watch"
    lay_out(out, {"events.jsonl": '{"event_id": "e1", "identity": "an event published before"}\n'})
    rules = write_rules(tmp_path / "rules", [LISTING])
    added = ["sources", "add", web.url(A, "/list"), "--mapping", "listing", "--rules", str(rules), "--local", str(out)]
    assert main(added) == 0
    before = files(out, state=False)
    watch = ["watch", "--local", str(out), "--simulate-days", "0.001", "--speed", "100", *ALLOW_LOOPBACK]
    code, err = cli([*watch, "--no-progress"])
    assert code == 2, err
    assert "events.jsonl holds 60 bytes this watch's state did not write" in one_line(err)
    assert files(out, state=False) == before and not web.log


def test_a_resume_goes_on_without_the_warcs_already_extracted(tmp_path: Path, web: LoopbackWeb) -> None:
    # A long crawl's WARCs are its bulk: once extracted they are the user's to move away.
    web.add_host(A, star_site(2))
    out = tmp_path / "out"
    assert main(crawl_argv(web, out)) == 0
    for warc in (out / "warc").glob("*.warc.gz"):
        warc.unlink()
    records = (out / "records.jsonl").read_bytes()
    assert main(["crawl", "--local", "--resume", "--out", str(out), "--no-progress"]) == 0
    assert (out / "records.jsonl").read_bytes() == records
