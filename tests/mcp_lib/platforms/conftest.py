"""Fixtures for the platform tests: a real Redmine, started once per session by tests/redmine_server.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import redmine_server as server_helper


@pytest.fixture(scope="session")
def redmine_server() -> Iterator[server_helper.RedmineServer]:
    """A seeded Redmine 5 on loopback. Skips when none can be started here; fails in CI, where it must."""
    try:
        server = server_helper.start(foreign_data=True)  # the tests must see only their own data
    except server_helper.RedmineUnavailable as exc:
        if server_helper.required():
            pytest.fail(f"CI but no Redmine could be started (run .ci/redmine.sh): {exc}", pytrace=False)
        pytest.skip(f"no real Redmine here ({exc})")
    try:
        yield server
    finally:
        server.stop()
