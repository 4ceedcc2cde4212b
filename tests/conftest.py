"""Fixtures for every test: caches go to a temporary folder, never to the user's home; and the monotonic clock
starts near zero, as on a machine booted a minute ago (a fresh CI runner).

Nothing may depend on uptime: a test clock such as ``FakeClock(start=1000)`` compared with the real
``time.monotonic`` passes on a machine up for hours and fails on a fresh one. The clock is patched when this file
is imported, before the project's modules are, so the defaults they bind (``clock=time.monotonic``) see it too.
``HELPBOT_TEST_REAL_MONOTONIC=1`` runs the suite on the machine's own clock.

Under CI a test marked ``redmine`` that skips, for whatever reason, is reported failed: a platform not tested
in CI is a hole, not a pass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_REAL_MONOTONIC = time.monotonic
SUITE_STARTED = _REAL_MONOTONIC()  # on the machine's clock
_OFFSET = SUITE_STARTED - 1.0  # the suite starts at monotonic second 1
REAL_MONOTONIC = os.environ.get("HELPBOT_TEST_REAL_MONOTONIC") == "1"


def _near_zero_monotonic() -> float:
    return _REAL_MONOTONIC() - _OFFSET


if not REAL_MONOTONIC:
    time.monotonic = _near_zero_monotonic


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    from tests import redmine_server  # not at the top: the clock above is patched before other imports

    report = yield
    if report.skipped and item.get_closest_marker("redmine") and redmine_server.required():
        report.outcome = "failed"
        report.longrepr = f"CI: a real-Redmine test may not skip ({report.longrepr})"
    return report


@pytest.fixture(scope="session")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def private_cache(user_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$XDG_CACHE_HOME`` (where the FAQ index is cached by default) points at a per-run temporary folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
