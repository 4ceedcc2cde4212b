"""Fixtures shared by the agent tests: a clean environment, the fake Slack and the Bedrock stand-in."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fakes.bedrock import BedrockStub
from tests.fakes.slack import FakeSlack, Workspace, sample_workspace

PREFIXES = ("AWS_", "ANTHROPIC_", "HELPBOT_", "SLACK_", "REDMINE_", "GITHUB_", "GROWI_")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials or settings leak in from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith(PREFIXES):
            monkeypatch.delenv(name)


@pytest.fixture
def ws() -> Workspace:
    return sample_workspace()


@pytest.fixture
def fake(ws: Workspace) -> Iterator[FakeSlack]:
    with FakeSlack(ws) as running:
        yield running


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[BedrockStub]:
    """The Bedrock stand-in, with the process environment pointing at it."""
    with BedrockStub() as running:
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "test-bedrock-key")
        monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", running.url)
        yield running
