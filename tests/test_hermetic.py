"""The suite runs on a monotonic clock that starts near zero (tests/conftest.py)."""

from __future__ import annotations

import time

import pytest

from tests.conftest import _REAL_MONOTONIC, REAL_MONOTONIC, SUITE_STARTED


@pytest.mark.skipif(REAL_MONOTONIC, reason="HELPBOT_TEST_REAL_MONOTONIC=1: the machine's own clock")
def test_the_monotonic_clock_starts_near_zero() -> None:
    from mcp_lib.clock import SYSTEM_CLOCK

    since_start = _REAL_MONOTONIC() - SUITE_STARTED
    assert time.monotonic() <= 1.0 + since_start + 0.01  # second 1 when the suite started, not the uptime
    assert SYSTEM_CLOCK.monotonic() <= 1.0 + since_start + 0.01  # the agent's default clock reads the same one
