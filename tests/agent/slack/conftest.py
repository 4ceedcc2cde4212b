"""The environment of a ``helpbot answer`` run against the fake Slack (tests/agent/conftest.py starts it)."""

from __future__ import annotations

import pytest

from tests.agent.slack.test_front import FAQ_URL
from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack


@pytest.fixture
def env(fake: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_USER_TOKEN": USER_TOKEN, "SLACK_API_URL": fake.url,
            "HELPBOT_FAQ_BASE_URL": FAQ_URL.rsplit("/", 1)[0]}  # https links, as in Actions
