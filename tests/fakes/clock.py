"""The one test clock: time passes only when the code under test sleeps or the test advances it."""

from __future__ import annotations

from datetime import UTC, datetime

EPOCH = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()


class FakeClock:
    """A :class:`mcp_lib.clock.Clock` whose monotonic seconds start at ``start`` and whose wall starts at
    ``wall`` (2026-12-01 09:00 UTC); ``sleep`` records the wait and advances both. ``tick``: seconds every
    ``monotonic()`` read advances first (work that takes time without sleeping)."""

    def __init__(self, start: float = 1000.0, wall: float = EPOCH, tick: float = 0.0):
        self._monotonic = start
        self._wall = wall
        self.tick = tick
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        self.advance(self.tick)
        return self._monotonic

    def wall(self) -> float:
        return self._wall

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self._monotonic += max(0.0, seconds)
        self._wall += max(0.0, seconds)
