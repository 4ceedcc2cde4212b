"""The benches' yardstick: a fixed CPU loop timed in the same run, so that every timing is also a ratio to it.

This machine's cores vary in speed by up to 1.8x within an hour (and other jobs share them), so a time in
seconds alone does not reproduce; its ratio to a fixed amount of interpreter work measured beside it does, within
about 1.3x. Usage, from a bench script (the bench folder is on ``sys.path`` when a script runs)::

    from yardstick import Yardstick

    ys = Yardstick()            # samples the loop once, notes the load average and the command
    for run in runs:
        ys.sample()             # again between runs: the ratio follows the machine's speed during the bench
        t = measure(run)
    print(ys.line())            # "yardstick Y = 0.105 s (... median of 6 samples, 0.098-0.121 ...) · load ..."
    print(ys.show(t))           # "1.234 s = 11.8 Y"
    ys.ratio(t)                 # 11.8
    ys.at_reference(t)          # the time at REFERENCE_S per Y, to compare with a target in seconds

A sample is the median of three passes of the loop (about 0.1-0.2 s each); the yardstick is the
median of all samples. ``Y`` is the unit: one yardstick.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import time

# Y on the 2-core development container at its faster moments (2026-12-01 21:30 UTC: 0.089-0.117 s; 0.13-0.35 s
# when other jobs load it): a target set in seconds is judged at this speed, ``at_reference(t) = ratio(t) *
# REFERENCE_S``.
REFERENCE_S = 0.10
PASSES = 3


def loop(n: int = 400_000) -> int:
    """The fixed work: dictionary updates, integer arithmetic and small strings, as interpreted Python does."""
    counts: dict[int, int] = {}
    total = 0
    for i in range(n):
        key = i & 1023
        counts[key] = counts.get(key, 0) + i
        total += len(str(i))
    return total + len(counts)


def sample_once(passes: int = PASSES) -> float:
    """Seconds of one sample: the median of ``passes`` timed loops."""
    times = []
    for _ in range(passes):
        began = time.perf_counter()
        loop()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not on every platform
        return float("nan")


class Yardstick:
    """Samples of the loop taken during one bench run, the load average at the first and the latest sample, and
    the command that ran the bench."""

    def __init__(self, command: list[str] | None = None):
        self.command = " ".join(shlex.quote(a) for a in (command if command is not None else _command()))
        self.samples: list[float] = []
        self.load_first = self.load_last = _load()
        self.sample()

    def sample(self) -> float:
        """One more sample (call it between the runs of a bench); returns it."""
        value = sample_once()
        self.samples.append(value)
        self.load_last = _load()
        return value

    @property
    def seconds(self) -> float:
        """One Y: the median of the samples so far."""
        return statistics.median(self.samples)

    def ratio(self, seconds: float) -> float:
        return seconds / self.seconds

    def at_reference(self, seconds: float) -> float:
        """``seconds`` scaled to the reference speed (REFERENCE_S per Y), to compare with a target in seconds."""
        return self.ratio(seconds) * REFERENCE_S

    def show(self, seconds: float, digits: int = 3) -> str:
        """``"1.234 s = 11.8 Y"``; milliseconds below 0.1 s (``"5.9 ms = 0.056 Y"``)."""
        r = self.ratio(seconds)
        if seconds < 0.1:
            return f"{seconds * 1000:.{max(digits - 2, 1)}f} ms = {r:.3f} Y"
        return f"{seconds:.{digits}f} s = {r:.1f} Y"

    def line(self) -> str:
        """The yardstick, the load and the command, for the bench's output."""
        low, high = min(self.samples), max(self.samples)
        return (f"yardstick Y = {self.seconds:.3f} s (fixed CPU loop, median of {len(self.samples)} samples, "
                f"{low:.3f}-{high:.3f}; reference {REFERENCE_S:.3f} s) · load average {self.load_first:.2f} -> "
                f"{self.load_last:.2f} · command: {self.command}")


def _command() -> list[str]:
    script = sys.argv[0]
    rel = os.path.relpath(script) if os.path.isabs(script) else script
    return ["uv", "run", "python", rel, *sys.argv[1:]]


if __name__ == "__main__":  # the yardstick alone: `uv run python bench/yardstick.py`
    ys = Yardstick()
    for _ in range(4):
        ys.sample()
    print(ys.line())
