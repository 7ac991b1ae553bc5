"""The plan's clock: how the times a day's plan holds map to the watch's time, re-spread after a stall.

A day's checks are written with their planned times and never rewritten;
the scheduler reads them through a linear map (``PlanClock``) that the
store keeps: one small record, whatever the number of checks.  It starts
as the identity.

When a due check is found more than ``late_after`` late (the scheduler was
down, a watch was resumed, its pump stalled), ``respread`` maps the oldest
unsent check to now and the rest of the day onto the time left until the
day's end, so every host's remaining checks keep their order and even
spacing, a little tighter, and the day's budget is still spent by its end.
A day that has too little left is squeezed to ``MIN_RATE`` at most and
ends later.  The next day's plan starts at the real time the last one
ended, at rate 1 (``new_day``).

Settings: ``MIN_RATE`` (here).
"""

from __future__ import annotations

from dataclasses import dataclass

# The tightest re-spread: a host's checks at no less than three quarters of their planned spacing, so
# its busiest hour holds at most a third more than planned.
MIN_RATE = 0.75


@dataclass(frozen=True)
class PlanClock:
    """``real = at + rate * (planned - anchor)``: a planned time ``anchor`` falls due at ``at``.

    Anchored rather than ``offset + rate * planned``: a store that rounds
    numbers (DynamoDB's, to a millionth here) would turn a rate's last digit
    into minutes at today's epoch seconds, and into microseconds within a day.
    """

    anchor: float = 0.0
    at: float = 0.0
    rate: float = 1.0  # watch seconds per planned second

    def real(self, planned: float) -> float:
        """The watch's time of a planned time."""
        return self.at + self.rate * (planned - self.anchor)

    def planned(self, real: float) -> float:
        """The planned time that falls due at the watch's time ``real``."""
        return self.anchor + (real - self.at) / self.rate

    def respread(self, oldest: float, now: float, day_end: float) -> PlanClock:
        """Planned time ``oldest`` at ``now``, and the rest of the day up to its end, or at ``MIN_RATE`` at least."""
        left, planned_left = self.real(day_end) - now, day_end - oldest
        rate = max(MIN_RATE, left / planned_left) if planned_left > 0 else 1.0
        return PlanClock(oldest, now, rate)

    def new_day(self, day_start: float) -> PlanClock:
        """Rate 1 from ``day_start`` (a planned time) on, from the watch's time it maps to now."""
        return PlanClock(day_start, self.real(day_start), 1.0)
