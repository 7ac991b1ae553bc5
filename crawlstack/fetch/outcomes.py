"""What a response means for its fetch task, as a host's run (``crawlstack.runs``) works it.

Pure functions of the task, its ``http.FetchResult``, a clock and a jitter
draw: the outcome (``Fetched``: fetched, skipped, failed or retry, with the
exchange to archive), the redirect target to send to the frontier, the next
try of a retryable response (full-jitter backoff, or the ``Retry-After``),
and the WARC key of a set of tasks.

Settings: ``settings.MAX_BODY_BYTES``, ``RETRY_MAX_ATTEMPTS``,
``RETRY_BASE_SECONDS``, ``RETRY_MAX_BACKOFF_SECONDS``,
``RETRY_AFTER_MAX_SECONDS``, ``RETRY_STATUSES``, ``MAX_URL_LENGTH``,
``PAGES_PREFIX``; ``MAX_REDIRECT_HOPS`` (here).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import urljoin

from crawlstack import settings
from crawlstack.errors import failure
from crawlstack.fetch import http
from crawlstack.fetch.headers import parse_location, parse_retry_after
from crawlstack.fetch.warc import Exchange
from crawlstack.messages import FetchTask, FrontierMessage

MAX_REDIRECT_HOPS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# A 3xx whose Location is too long or holds control characters ("redirects": its failure class).
UNUSABLE_LOCATION = "redirects to an unusable Location"

log = logging.getLogger(__name__)


@dataclass
class Fetched:
    task: FetchTask
    outcome: str  # fetched | skipped | failed | retry
    status: int | None = None
    reason: str = ""
    truncated: bool = False
    exchange: Exchange | None = None
    # The outcome is already written (by the conditional write that decided it).
    recorded: bool = False
    # outcome "retry": the next try, admitted once this outcome is written.
    retry: FetchTask | None = None
    # When this try's request began and its response ended (epoch seconds); None when no request was made.
    started_at: float | None = None
    finished_at: float | None = None


# The urls table's state for each outcome that is not its own name.
URL_STATES = {"retry": "retrying"}


class OutcomeUrls(Protocol):
    def set_outcome(self, crawl_id: str, fp: str, outcome: str, **fields: Any) -> None: ...


FAILURE_CLASSES = (
    "timeout",
    "address_refused",
    "dns",
    "connection",
    "redirects",
    "corrupt_body",
    "http_error",
    "other",
)


def failure_class(reason: str) -> str:
    """A failed fetch's class: the ``FetchFailuresByClass`` metric's dimension (a few values, fit for alarms)."""
    text = reason.lower()
    if text[:3].isdigit() and text[3:4] in ("", " ", ":"):
        # An HTTP status still failing after its retries: "503 Service Unavailable after 3 attempts".
        return "http_error"
    if "timeout" in text or "deadline" in text:
        return "timeout"
    if "not public" in text or "refused address" in text:
        return "address_refused"
    if "dns" in text:
        return "dns"
    if "connection" in text:
        return "connection"
    if "redirects" in text:
        return "redirects"
    if "corrupt" in text or "decod" in text:
        return "corrupt_body"
    return "other"


def retry_after_seconds(value: str, now: float) -> float | None:
    """A Retry-After header's wait from ``now``: delta-seconds or an HTTP date (RFC 9110); None if neither."""
    return parse_retry_after(value, now)


def retryable(result: http.FetchResult) -> bool:
    """A response worth another try: RETRY_STATUSES, or no response for a timeout or a failed connection."""
    if result.status is not None:
        return result.status in settings.RETRY_STATUSES
    return failure_class(result.error) in ("timeout", "connection")


def describe(result: http.FetchResult) -> str:
    """The response's status and phrase ("503 Service Unavailable"), or the network error."""
    if result.status is None:
        return result.error or "no response"
    phrase = result.reason
    if not phrase:
        try:
            phrase = HTTPStatus(result.status).phrase
        except ValueError:
            phrase = ""
    return f"{result.status} {phrase}".strip()


def backoff_ceiling(attempt: int) -> float:
    """The longest full-jitter wait after try ``attempt`` fails: min(cap, base * 2**attempt)."""
    return float(min(settings.RETRY_MAX_BACKOFF_SECONDS, settings.RETRY_BASE_SECONDS * 2**attempt))


def pause_after(result: http.FetchResult, finished_at: float) -> float | None:
    """Until when the server asked for time (a retryable status's Retry-After, capped); None if it did not."""
    if result.status not in settings.RETRY_STATUSES:
        return None
    wait = retry_after_seconds(result.header("retry-after"), finished_at)
    if not wait:
        return None
    return finished_at + min(wait, settings.RETRY_AFTER_MAX_SECONDS)


def warc_key(tasks: list[FetchTask], now: float) -> str:
    # Named by a hash of the batch, never by anything from a URL; a
    # redelivered batch overwrites its own file.  The crawl id is in the
    # hash: two crawls' batches of the same URLs are different files; so is
    # a retry's attempt, or a retry's WARC would replace the earlier try's.
    digest = hashlib.sha256("|".join(sorted(t.attempt_key for t in tasks)).encode()).hexdigest()[:24]
    day = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%d")
    return f"{settings.PAGES_PREFIX}dt={day}/{digest}.warc.gz"


def logged_only(item: Fetched) -> bool:
    """Whether the crawl log alone holds this outcome, with no write to the urls table.

    A page fetched, or skipped by robots.txt, on its first try needs
    nothing more from the urls table: its claim is all dedupe reads, and the
    crawl-log object of its flush is the record of what became of it (a
    write unit a page saved).  The table still gets what a later decision
    reads: a retry's state and try (``crawlstack.fetch.tries.next_try``), the end
    of a URL that was retried, and failures.  The crawls table counts the
    outcomes left out (``Crawls.count_logged``), for ``crawlstack status``.
    """
    return not item.recorded and item.task.attempt <= 1 and item.outcome in settings.LOGGED_OUTCOMES


def record_outcome(urls: OutcomeUrls, item: Fetched, key: str | None) -> None:
    """Write one task's outcome to the urls table (``key``: the WARC holding its exchange)."""
    urls.set_outcome(
        item.task.crawl_id,
        item.task.fp,
        URL_STATES.get(item.outcome, item.outcome),
        status=item.status,
        reason=item.reason or None,
        truncated=item.truncated or None,
        warc=key if item.exchange is not None else None,
        retry_at=item.retry.not_before if item.retry is not None else None,
        # Which try this was: the next try's check (``next_try``) reads it.
        attempt=item.task.attempt,
    )


def classify(
    task: FetchTask,
    result: http.FetchResult,
    frontier: list[tuple[str, int]],
    clock: Callable[[], float],
    jitter: Callable[[], float],
) -> Fetched:
    """The task's outcome for ``result``; a redirect's target is appended to ``frontier`` (body, delay)."""
    if result.status is None:
        if retryable(result):
            return retry_or_fail(task, result, None, clock, jitter)
        return Fetched(task, "failed", reason=result.error or "no response")
    metadata = {**task.metadata(), "truncated": result.truncated, "fetched_at": result.finished_at}
    if task.attempt > 1:
        metadata["attempt"] = task.attempt
    exchange = Exchange(
        url=task.url,
        method="GET",
        request_headers=result.request_headers,
        status=result.status,
        reason=result.reason,
        response_headers=result.headers,
        body=result.body,
        ip_address=result.ip_address,
        metadata=metadata,
    )
    if retryable(result):
        # Every try's exchange is archived, the failed ones too.
        return retry_or_fail(task, result, exchange, clock, jitter)
    sent_location = result.header("location").strip(" \t")
    if result.status in REDIRECT_STATUSES and sent_location:
        location = parse_location(sent_location)
        if location is None:
            # Over MAX_URL_LENGTH or with control characters: no URL to go on to.
            return Fetched(task, "failed", result.status, UNUSABLE_LOCATION, False, exchange)
        if task.hops >= MAX_REDIRECT_HOPS:
            return Fetched(task, "failed", result.status, f"more than {MAX_REDIRECT_HOPS} redirects", False, exchange)
        target = redirect_target(task.url, location)
        nxt = FrontierMessage(
            url=target,
            depth=task.depth,
            crawl_id=task.crawl_id,
            referrer=task.url,
            record_id=task.record_id,
            want=task.want,
            hops=task.hops + 1,
            # A watch's check goes on at the target: the same check, asked afresh.
            check=task.check_ref,
        )
        frontier.append((nxt.to_json(), 0))
        return Fetched(task, "fetched", result.status, f"redirect to {target}", False, exchange)
    ctype = result.content_type
    if ctype and not http.is_text_type(ctype):
        return Fetched(task, "skipped", result.status, f"content-type {ctype} is not text")
    if result.binary:
        return Fetched(task, "skipped", result.status, f"binary body claiming to be {ctype or 'text'}")
    if result.corrupt:
        return Fetched(task, "failed", result.status, result.error)
    reason = result.error  # e.g. deadline exceeded part-way: keep what arrived (truncated)
    if result.truncated and not reason:
        reason = f"body truncated at {settings.MAX_BODY_BYTES} bytes"
    return Fetched(task, "fetched", result.status, reason, result.truncated, exchange)


def retry_or_fail(
    task: FetchTask,
    result: http.FetchResult,
    exchange: Exchange | None,
    clock: Callable[[], float],
    jitter: Callable[[], float],
) -> Fetched:
    """Outcome "retry" with the next try (not before its backoff, or Retry-After), or "failed" when out of tries."""
    what = describe(result)
    finished_at = result.finished_at or clock()
    asked = None
    if result.status is not None:
        asked = retry_after_seconds(result.header("retry-after"), finished_at)
    if asked is not None and asked > settings.RETRY_AFTER_MAX_SECONDS:
        reason = f"{what}: Retry-After of {asked:.0f}s is beyond the {settings.RETRY_AFTER_MAX_SECONDS:.0f}s cap"
        return Fetched(task, "failed", result.status, reason, exchange=exchange)
    if task.attempt >= settings.RETRY_MAX_ATTEMPTS:
        tries = f"{task.attempt} attempt" + ("s" if task.attempt != 1 else "")
        return Fetched(task, "failed", result.status, f"{what} after {tries}", exchange=exchange)
    wait = max(asked or 0.0, jitter() * backoff_ceiling(task.attempt))
    nxt = replace(task, attempt=task.attempt + 1, not_before=finished_at + wait)
    reason = f"{what} on attempt {task.attempt} of {settings.RETRY_MAX_ATTEMPTS}; retry in {wait:.1f}s"
    if exchange is not None:
        # Archived, but not the page's answer: extract leaves it (a watch's check waits for the last try).
        exchange.metadata["retried"] = True
    return Fetched(task, "retry", result.status, reason, exchange=exchange, retry=nxt)


def guarded_fetch(
    url: str, user_agent: str, guard: http.AddressGuard, headers: Sequence[tuple[str, str]] = ()
) -> http.FetchResult:
    """``http.fetch``, an unexpected exception from the response becoming the task's error, not the batch's."""
    try:
        return http.fetch(url, user_agent, guard, extra_headers=headers)
    except Exception as exc:
        log.warning("%s: response not read: %s", url, failure(exc))
        return http.FetchResult(url, error=f"response could not be read: {failure(exc)}")


def redirect_target(url: str, location: str) -> str:
    """Where a redirect points, bounded; a Location no URL can be made of goes on as it is, for dispatch to refuse."""
    try:
        target = urljoin(url, location)
    except ValueError:  # e.g. a broken IPv6 literal
        target = location
    # Joined to a long URL it may pass the cap, and is refused anyway; bounded, it fits an SQS message.
    return target[: settings.MAX_URL_LENGTH + 1]
