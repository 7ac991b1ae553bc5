#!/usr/bin/env python3
"""Write the crawl settings' tables of docs/reference.md from the settings' declarations (crawlstack/config/).

Each table sits between ``<!-- settings of COMMAND ... -->`` and
``<!-- end of settings -->``: a row per setting COMMAND takes as a flag, in
declaration order, its meaning the setting's ``doc`` (or ``help``); under
``seed`` and ``watch``, a setting ``crawl`` takes too is "as for `crawl`".
tests/unit/test_reference_doc.py fails while a table differs from this.

    python scripts/settings_doc.py     # rewrite docs/reference.md in place
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from crawlstack import config  # noqa: E402,F401  (declares the settings)
from crawlstack.config.schema import of_command  # noqa: E402

REFERENCE = ROOT / "docs" / "reference.md"
BLOCK = re.compile(r"(<!-- settings of (\w+)[^>]*-->\n)(.*?)(<!-- end of settings -->)", re.S)


def rows(command: str) -> list[str]:
    """The table of ``command``'s settings."""
    table = ["| flag | meaning |", "|---|---|"]
    for s in of_command(command):
        meaning = "as for `crawl`" if command != "crawl" and "crawl" in s.commands else s.doc or s.help
        table.append(f"| `{s.flag} {s.metavar}` | {meaning} |")
    return table


def rewrite(text: str) -> str:
    """``text`` with every settings table as the declarations give it."""
    return BLOCK.sub(lambda m: m.group(1) + "\n" + "\n".join(rows(m.group(2))) + "\n\n" + m.group(4), text)


def main() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    new = rewrite(text)
    if new != text:
        REFERENCE.write_text(new, encoding="utf-8")
        print(f"wrote {REFERENCE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
