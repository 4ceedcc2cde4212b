"""Fixtures shared by the agent tests: a clean environment, the fake Slack, the Bedrock stand-in and AWS files
with no credentials."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore reads only these: a profile "empty" with a region and no credentials; no instance metadata."""
    config = tmp_path / "aws-config"
    config.write_text("[profile empty]\nregion = ap-northeast-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
