"""``make demo``: serve the bundled demo site on loopback, crawl it locally, print the records.

python -m crawlstack.demo [--out DIR] [--delay SECONDS]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from crawlstack.cli import main as cli_main
from crawlstack.demo.server import DEMO_HOSTS, RULES_DIR, demo_allow_ports, demo_seeds, demo_web


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crawlstack.demo", description=__doc__)
    parser.add_argument("--out", default="demo-out", help="output directory (default demo-out)")
    parser.add_argument("--delay", default="0.5", help="per-host delay in seconds (default 0.5)")
    args = parser.parse_args(argv)

    with demo_web() as web:
        seeds = demo_seeds(web)
        print("Demo site:", ", ".join(f"{name} at {web.base_url(addr)}/" for addr, name in DEMO_HOSTS.items()))
        command = [
            "crawl", "--local", *seeds,
            "--rules", str(RULES_DIR),
            "--out", args.out,
            # The demo runs again and again: each run starts afresh.
            "--overwrite",
            "--max-depth", "3",
            "--delay", args.delay,
            "--allow-private", "127.0.0.0/8",
            # The journal has no seed: its port needs allowing.
            *demo_allow_ports(web),
        ]  # fmt: skip
        print("Running: crawlstack", " ".join(command), flush=True)
        status = cli_main(command)
        if status:
            return status
        served = len(web.log)

    out = Path(args.out)
    print(f"\nThe demo server answered {served} requests. Records ({out / 'records.jsonl'}):")
    for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        print(f"  [{record['mapping']}] {record['url']}")
        print("     " + json.dumps(record["fields"], ensure_ascii=False))
    print(f"\nAlso in {out}/: crawl-log.jsonl (what became of each URL), warc/ (the pages), summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
