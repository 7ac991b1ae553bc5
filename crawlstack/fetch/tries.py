"""A URL's tries: which one a fetch task is, against what the urls table says.

Pure, and light to import.  ``UrlState``, what the urls table says, is the urls port's (``crawlstack.ports``).
"""

from __future__ import annotations

from dataclasses import replace

from crawlstack.messages import FetchTask
from crawlstack.ports import UrlState


def next_try(task: FetchTask, known: UrlState | None) -> tuple[bool, FetchTask | None]:
    """Whether ``task`` is the URL's next try (fetch it); if not, the next try its holder never added, or None.

    Try 1 needs the URL ``queued``; try n needs ``retrying`` after try n - 1
    (``fetching``, left by a design that marked each start, counts as its
    own try not done).  A URL ``retrying`` after this very try had its
    outcome written by a holder that died before adding the next try: that
    try is returned, to be added now.  A URL with no item read is fetched:
    a refetch is allowed, a lost URL is not.
    """
    if known is None:
        return True, None
    if known.state == "fetching" and known.attempt == task.attempt:
        return True, None
    if task.attempt <= 1 and known.state == "queued":
        return True, None
    if task.attempt > 1 and known.state == "retrying" and known.attempt == task.attempt - 1:
        return True, None
    if known.state == "retrying" and known.attempt == task.attempt:
        return False, replace(task, attempt=task.attempt + 1, not_before=known.retry_at)
    return False, None
