"""The environment of a ``helpbot answer`` run against the fake Slack (tests/agent/conftest.py starts it), and the
Bedrock stub with the process environment pointing at both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.bedrock import BedrockStub
from tests.fakes.front import FAQ_URL
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack


@pytest.fixture
def env(fake: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": fake.url,
            "HELPBOT_FAQ_BASE_URL": FAQ_URL.rsplit("/", 1)[0]}  # https links, as in Actions


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Iterator[BedrockStub]:
    """The Bedrock stub, and the process environment pointing at it and at the fake Slack (for ``main``)."""
    with BedrockStub() as running:
        for name, value in {**env, "AWS_BEARER_TOKEN_BEDROCK": "test-bedrock-key",
                            "ANTHROPIC_BEDROCK_BASE_URL": running.url}.items():
            monkeypatch.setenv(name, value)
        yield running
