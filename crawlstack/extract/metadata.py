"""The WARC metadata the fetcher writes beside a page, as extract reads it."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from crawlstack.messages import CheckRef, InvalidMessage


def page_metadata(raw: dict[str, Any]) -> dict[str, Any]:
    """The WARC metadata extract reads, each key kept only with the type the fetcher writes.

    A WARC written by another tool (or by hand) may carry anything there; a
    value of the wrong type is treated as absent rather than failing the file.
    """
    meta = {k: raw[k] for k in ("crawl_id", "fp", "record_id", "referrer") if isinstance(raw.get(k), str)}
    depth = raw.get("depth")
    if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0:
        meta["depth"] = depth
    fetched_at = raw.get("fetched_at")
    if isinstance(fetched_at, int | float) and not isinstance(fetched_at, bool) and math.isfinite(fetched_at):
        meta["fetched_at"] = fetched_at
    want = raw.get("want")
    if isinstance(want, list) and all(isinstance(w, str) for w in want):
        meta["want"] = want
    with contextlib.suppress(InvalidMessage):
        if raw.get("check") is not None:
            meta["check"] = CheckRef.from_dict(raw["check"]).to_dict()
    if raw.get("retried") is True:
        meta["retried"] = True
    return meta
