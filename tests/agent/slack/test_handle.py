"""The front's handle on Slack: what it reads ahead is taken once, and a thread it may not read stays unread."""

from __future__ import annotations

import pytest

from agent.errors import RunFailed
from agent.slack.handle import Slack
from tests.fakes.clock import FakeClock
from tests.fakes.slack import FakeSlack, Workspace


def test_a_thread_read_ahead_refused_is_never_read_even_when_asked_for(ws: Workspace, fake: FakeSlack,
                                                                       env: dict[str, str]) -> None:
    """Fails closed: a caller that skips the front's check gets an error, not the thread."""
    asked = ws.history("C0MPIM")[0]
    slack = Slack(env, answer_channel="C0MPIM", need_bot=True, clock=FakeClock())
    slack.read_ahead("C0MPIM", asked.ts, thread_if=lambda info: False)
    assert slack.channel("C0MPIM")["id"] == "C0MPIM"
    with pytest.raises(RunFailed, match="may not be read"):
        slack.thread("C0MPIM", asked.ts)
    assert not fake.calls("conversations.replies")


def test_what_was_read_ahead_is_taken_once(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """The claim re-reads the thread: the second read asks Slack anew."""
    asked = ws.history("C0ECSUP")[0]
    slack = Slack(env, answer_channel="C0ECSUP", need_bot=True, clock=FakeClock())
    slack.read_ahead("C0ECSUP", asked.ts, thread_if=lambda info: True)
    assert slack.me.user_id and slack.thread("C0ECSUP", asked.ts).target["ts"] == asked.ts
    slack.thread("C0ECSUP", asked.ts)
    assert len(fake.calls("conversations.replies")) == 2 and len(fake.calls("auth.test")) == 1
