"""Fixtures for every test: caches go to a temporary folder, never to the user's home; and the monotonic clock
starts near zero, as on a machine booted a minute ago (a fresh CI runner).

Nothing may depend on uptime: a test clock such as ``FakeClock(start=1000)`` compared with the real
``time.monotonic`` passes on a machine up for hours and fails on a fresh one. The clock is patched when this file
is imported, before the project's modules are, so the defaults they bind (``clock=time.monotonic``) see it too.
``HELPBOT_TEST_REAL_MONOTONIC=1`` runs the suite on the machine's own clock.

Under CI a test marked ``redmine`` that skips, for whatever reason, is reported failed: a platform not tested
in CI is a hole, not a pass.

A test that starts a process (helpbot or mcp-lib as a command, an MCP server over stdio, a real Redmine) is a
slow *scenario*: it must say so with ``@pytest.mark.scenario`` (or ``redmine``), or it fails. The default
``uv run pytest`` leaves scenarios out (``addopts`` in pyproject.toml); ``.ci/run`` runs them all (``-m ""``).
"""

from __future__ import annotations

import os
import sys
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


_SPAWNS = ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec")
_spawned = [0]


def _count_spawns(event: str, args: tuple[Any, ...]) -> None:
    if event in _SPAWNS:
        _spawned[0] += 1


sys.addaudithook(_count_spawns)  # Python's audit events: every way a process is started passes one


@pytest.fixture(autouse=True)
def scenarios_say_so(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    """A test that starts a process (in its fixtures too) is marked ``scenario`` (or ``redmine``)."""
    before = _spawned[0]
    yield
    node = request.node
    if _spawned[0] > before and not (node.get_closest_marker("scenario") or node.get_closest_marker("redmine")):
        listing = os.environ.get("HELPBOT_TEST_LIST_SCENARIOS")
        if listing:
            with open(listing, "a", encoding="utf-8") as out:
                out.write(node.nodeid + "\n")
        else:
            pytest.fail("this test starts a process: mark it @pytest.mark.scenario (the default run leaves "
                        "scenarios to .ci/run)", pytrace=False)


@pytest.fixture(scope="session")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def private_cache(user_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$XDG_CACHE_HOME`` (where the FAQ index is cached by default) points at a per-run temporary folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
