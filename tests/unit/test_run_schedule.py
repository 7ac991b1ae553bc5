"""When a host's next request may start across lease holders, and sleeping against being woken later."""

from __future__ import annotations

import pytest

from crawlstack import settings
from crawlstack.fetch.pacing import (
    FLUSH_USD,
    RESCHEDULE_USD,
    break_even_wait,
    first_start,
    should_sleep,
    sleep_usd,
)
from crawlstack.prices import PRICES
from crawlstack.runs.ports import HostRun

NOW = 1_000.0


def test_a_host_never_crawled_may_start_now() -> None:
    assert first_start(HostRun("h"), "me", 5.0, NOW) == NOW


def test_the_next_holder_keeps_the_delay_from_the_last_recorded_start() -> None:
    assert first_start(HostRun("h", last_start=NOW - 2.0), "me", 5.0, NOW) == NOW + 3.0
    assert first_start(HostRun("h", last_start=NOW - 9.0), "me", 5.0, NOW) == NOW


def test_a_slowed_host_keeps_its_adaptive_delay_and_a_pause_is_kept() -> None:
    assert first_start(HostRun("h", last_start=NOW, adaptive_delay=8.0), "me", 1.0, NOW) == NOW + 8.0
    assert first_start(HostRun("h", last_start=NOW - 100.0, pause_until=NOW + 30.0), "me", 1.0, NOW) == NOW + 30.0


def test_after_a_dead_holders_lease_the_next_waits_for_its_end_plus_the_delay() -> None:
    """The dead holder may have started a request at any moment of its lease and recorded none."""
    dead = HostRun("h", run_id="r", holder="dead", lease_until=NOW - 1.0, last_start=NOW - 60.0)
    assert first_start(dead, "me", 5.0, NOW) == NOW + 4.0


def test_a_holder_retrying_its_own_lease_after_a_lost_reply_waits_a_delay_not_its_own_lease() -> None:
    """What the first attempt took over is gone; whoever held the lease had ended by then."""
    mine = HostRun("h", run_id="r", holder="me", lease_until=NOW + 60.0, last_start=NOW - 10.0)
    assert first_start(mine, "me", 5.0, NOW) == NOW + 5.0


def test_sleeping_is_shared_by_the_hosts_an_invocation_works() -> None:
    one = sleep_usd(10.0, 1, memory_mb=1024)
    assert one == pytest.approx(10.0 * PRICES["lambda_gb_s"])
    assert sleep_usd(10.0, 50, memory_mb=1024) == pytest.approx(one / 50)


def test_a_short_wait_is_slept_a_long_one_alone_is_rescheduled() -> None:
    alone = break_even_wait(1, memory_mb=512)
    assert 0.1 < alone < 1.0  # at 512 MB, a lone host sleeps only sub-second waits
    assert should_sleep(alone * 0.9, 1, time_left=600.0, memory_mb=512)
    assert not should_sleep(alone * 1.1, 1, time_left=600.0, memory_mb=512)
    # Fifty hosts share the invocation: a 5 s delay is cheaper slept.
    assert should_sleep(5.0, 50, time_left=600.0, memory_mb=512)
    assert sleep_usd(5.0, 50, memory_mb=512) <= RESCHEDULE_USD


def test_unflushed_work_makes_being_woken_dearer_by_a_flush_of_its_own() -> None:
    alone, dirty = break_even_wait(1, memory_mb=512), break_even_wait(1, memory_mb=512, unflushed=True)
    assert dirty == pytest.approx(alone * (RESCHEDULE_USD + FLUSH_USD) / RESCHEDULE_USD)
    # At 512 MB a lone host with pages to flush sleeps a 1 s delay, and is woken for a 5 s one.
    assert should_sleep(1.0, 1, time_left=600.0, memory_mb=512, unflushed=True)
    assert not should_sleep(1.0, 1, time_left=600.0, memory_mb=512)
    assert not should_sleep(5.0, 1, time_left=600.0, memory_mb=512, unflushed=True)


def test_a_wait_past_the_invocation_or_sqs_is_never_slept() -> None:
    assert not should_sleep(30.0, 1000, time_left=20.0)
    assert not should_sleep(settings.MAX_SQS_DELAY_SECONDS + 1, 10_000, time_left=10_000.0)
    assert should_sleep(0.0, 1, time_left=0.0)
