"""When a host's next request may start, and whether to sleep until then or be woken later.

Pure arithmetic on the ``Runs`` port's state (``crawlstack.runs.ports``).

* **Exact across holders.**  A new holder's first request waits until the
  host's last recorded start plus its delay, and until any ``pause_until``
  (a server's Retry-After).  If the item still shows another holder's lease
  (that holder died without releasing, or lost its lease), the new holder
  also waits until that lease's end plus the delay: the dead holder may
  have sent a request just before it died, and recorded nothing.  A holder
  that reads back its own lease (a retry after a lost reply) cannot see
  what it took over, and waits a delay from now.
* **Sleep or reschedule.**  A fetch invocation works several hosts at once,
  so a sleep's Lambda seconds are shared by them.  Sleeping costs the
  invocation's GB-seconds for the wait, divided among the hosts it works;
  being woken later costs releasing and taking the lease again (two
  conditional writes), a delayed run message (send, receive, delete and an
  invocation's request), and, with work unflushed, a flush of the host's
  own (its S3 objects and an extract invocation) instead of a share of the
  invocation's next.  The cheaper wins, within what the invocation
  has left and SQS's longest delay.  Settings:
  ``settings.FUNCTIONS["fetch"].memory_mb``, ``settings.MAX_SQS_DELAY_SECONDS``;
  prices from ``crawlstack.prices``.
"""

from __future__ import annotations

from crawlstack import settings
from crawlstack.prices import PRICES
from crawlstack.runs.ports import HostRun

# Being woken later: a release and a lease (two conditional writes), and a
# delayed run message sent, received and deleted, in an invocation of its own.
RESCHEDULE_USD = 2 * PRICES["ddb_wru"] + 3 * PRICES["sqs_requests"] + PRICES["lambda_requests"]
# A host that gives its lease back flushes first: with work unflushed, being
# woken also costs a flush of its own rather than a share of the next one's
# objects (crawlstack.fetch.flush_objects): its WARC, crawl-log and records
# objects, extract's GET of the WARC and its invocation.
FLUSH_USD = 3 * PRICES["s3_put"] + PRICES["s3_get"] + PRICES["lambda_requests"]


def effective_delay(run: HostRun, delay: float) -> float:
    """Seconds between two request starts to the host: the crawl's delay, or the host's slowed-down one."""
    return max(delay, run.adaptive_delay or 0.0)


def first_start(before: HostRun, holder: str, delay: float, now: float) -> float:
    """When a holder that just took the lease may send its first request (``before``: the item as it was).

    ``delay``: the crawl's, with robots.txt's Crawl-delay already applied.
    """
    gap = effective_delay(before, delay)
    start = max(now, before.pause_until)
    if before.last_start:
        start = max(start, before.last_start + gap)
    if before.holder is not None and before.holder != holder:
        # A lease taken over, not given back: its holder may have started a
        # request at any moment up to its end, and recorded none of it.
        start = max(start, before.lease_until + gap)
    elif before.holder == holder:
        # Our own lease, read back by a retry after a lost reply: what the
        # first attempt found is gone.  Whoever held it before had ended by
        # then, so a delay from now is safe.
        start = max(start, now + gap)
    return start


def sleep_usd(wait: float, hosts_sharing: int, memory_mb: int | None = None) -> float:
    """What sleeping ``wait`` seconds costs one of the ``hosts_sharing`` hosts an invocation works at once."""
    memory = settings.FUNCTIONS["fetch"].memory_mb if memory_mb is None else memory_mb
    return max(wait, 0.0) * memory / 1024 * PRICES["lambda_gb_s"] / max(hosts_sharing, 1)


def reschedule_usd(unflushed: bool) -> float:
    """What being woken later costs, with or without work to flush first."""
    return RESCHEDULE_USD + (FLUSH_USD if unflushed else 0.0)


def should_sleep(
    wait: float, hosts_sharing: int, time_left: float, memory_mb: int | None = None, unflushed: bool = False
) -> bool:
    """Sleep ``wait`` seconds in the invocation (True), or release the host and be woken by a delayed message.

    ``time_left``: what the invocation may still run.  A wait it cannot
    cover, or one past SQS's longest delay, is never slept; otherwise the
    cheaper of the two wins (a tie sleeps: it keeps the host's spacing exact).
    ``unflushed``: the host has work a release would flush on its own.
    """
    if wait <= 0:
        return True
    if wait >= time_left or wait > settings.MAX_SQS_DELAY_SECONDS:
        return False
    return sleep_usd(wait, hosts_sharing, memory_mb) <= reschedule_usd(unflushed)


def break_even_wait(hosts_sharing: int, memory_mb: int | None = None, unflushed: bool = False) -> float:
    """The longest wait that is cheaper to sleep than to reschedule, for ``hosts_sharing`` hosts at once."""
    per_second = sleep_usd(1.0, hosts_sharing, memory_mb)
    return reschedule_usd(unflushed) / per_second if per_second else float("inf")
