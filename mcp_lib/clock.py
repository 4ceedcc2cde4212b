"""The one clock: every module that reads or waits on time takes a :class:`Clock` (:data:`SYSTEM_CLOCK` by
default), so tests inject ``tests.fakes.clock.FakeClock`` and none waits for real or depends on the uptime."""

from __future__ import annotations

import time
from datetime import datetime, tzinfo
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines, budgets, durations)."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (dates, HTTP-date ``Retry-After``, cache ages)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's clocks and ``time.sleep``."""

    monotonic = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


SYSTEM_CLOCK: Clock = SystemClock()


def now(clock: Clock, tz: tzinfo) -> datetime:
    """The clock's wall time as an aware datetime in ``tz``."""
    return datetime.fromtimestamp(clock.wall(), tz)
