"""The local pump's batching window, as an SQS event source mapping's (``EventPump._gather``)."""

from __future__ import annotations

import pytest

from crawlstack.local import pump as pump_module
from crawlstack.local.pump import EventPump, Source
from crawlstack.queueing import Depth, Received


class Arrivals:
    """A queue's receives and depth (``crawlstack.queueing``): each ``arrivals`` step's messages, a step a receive."""

    def __init__(self, *arrivals: int) -> None:
        self.arrivals = list(arrivals)
        self.sent = 0

    def receive(self, most: int, visibility_timeout: int) -> list[Received]:
        if not self.arrivals:
            return []
        n = min(self.arrivals[0], most)
        self.arrivals[0] -= n
        if self.arrivals[0] == 0:
            self.arrivals.pop(0)
        got = [Received(str(self.sent + i), "{}", f"r{self.sent + i}", 1, 0.0) for i in range(n)]
        self.sent += n
        return got

    def depth(self) -> Depth:
        return Depth(sum(self.arrivals), 0, 0)


def source(queue: Arrivals, batch_size: int = 100, window: float = 1.0) -> Source:
    return Source(
        "fetch", "url", "arn", lambda e, c: None, 1, batch_size=batch_size, batching_window=window, queue=queue
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(pump_module.time, "monotonic", lambda: now[0])
    return now


def test_a_batch_waits_out_its_window_for_more_messages_then_goes(clock: list[float]) -> None:
    pump, src = EventPump([]), source(Arrivals(3, 4))
    assert pump._gather(src) == []  # 3 held: the window is open
    clock[0] = 0.5
    assert pump._gather(src) == []  # 3 + 4, still open
    clock[0] = 1.0
    batch = pump._gather(src)
    assert [m.message_id for m in batch] == [str(i) for i in range(7)]
    assert not pump._gathered()


def test_a_full_batch_goes_at_once_and_without_a_window_every_receive_goes(clock: list[float]) -> None:
    pump = EventPump([])
    assert len(pump._gather(source(Arrivals(25), batch_size=20))) == 20
    assert len(pump._gather(source(Arrivals(3), window=0.0))) == 3
