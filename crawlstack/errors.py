"""How an exception raised by a stranger's page is told in a log line or a crawl-log reason.

Its type and the place it was raised, never its message: a message may
quote the page (a URL with a token in it, a field's text), and no page
body reaches a log.
"""

from __future__ import annotations

import traceback
from pathlib import Path


def failure(exc: BaseException) -> str:
    """``ValueError at page.py:120``: the exception's type and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where}"
