"""Fixtures for every test: caches go to a temporary folder, never to the user's home. Time is not patched: the
code reads it only through mcp_lib/clock.py (tests/test_hermetic.py), and tests hand in tests/fakes/clock.FakeClock.

Under CI a test marked ``redmine`` that skips, for whatever reason, is reported failed: a platform not tested
in CI is a hole, not a pass.

A test that starts a process (helpbot or mcp-lib as a command, an MCP server over stdio, a real Redmine) is a
slow *scenario*: it must say so with ``@pytest.mark.scenario`` (or ``redmine``), or it fails. The default
``uv run pytest`` leaves scenarios out (``addopts`` in pyproject.toml); ``.ci/run`` runs them all (``-m ""``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    from tests import redmine_server

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
