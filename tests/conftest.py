"""Fixtures for every test: caches go to a temporary folder, never to the user's home."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def private_cache(user_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``$XDG_CACHE_HOME`` (where the FAQ index is cached by default) points at a per-run temporary folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
