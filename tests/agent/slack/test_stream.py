"""``helpbot answer`` with the answer streamed (chat.startStream / appendStream / stopStream) against the fake
Slack: tasks per tool call, the answer's text as the model writes it, the stop carrying sources, footer and marker;
the fallback where Slack refuses streaming; the egress guard across deltas; a kill mid-stream."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from agent.core.scripted import Request, ScriptedModel, calls
from agent.slack.blocks import PLACEHOLDER
from agent.slack.front import Options, run
from agent.slack.markers import EVENT_TYPES
from tests.agent.slack.test_front import BOT, FAQ_URL, Clock, bot_messages, factory, markdown_of, question_of
from tests.fakes.slack import FakeSlack, Workspace

ANSWER = ("在庫同期が遅れるときは、まず連携ログを確認してください。ジョブは15分ごとに走り、失敗すると次の回で"
          "再試行されます。それでも直らなければ、管理画面から手動で同期を実行できます。")


@pytest.fixture
def streaming(ws: Workspace) -> Workspace:
    ws.refuse_streaming = None
    return ws


def in_pieces(size: int) -> Callable[[str], Iterable[str]]:
    return lambda text: [text[i:i + size] for i in range(0, len(text), size)]


def searching_then(answer: str | Callable[[Request], str], preamble: str = "FAQを調べます。") -> Callable[
        [Request], Any]:
    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("faq_search", {"query": "在庫同期 遅延"}), thought=preamble)
        first = json.loads(request.tool_results()[0]["content"])["items"][0]
        text = answer(request) if callable(answer) else answer
        return f"{text}\n\n[{first['title']}]({first['url']})"

    return script


def answer(env: dict[str, str], script: Callable[[Request], Any], *, deltas: Callable[[str], Iterable[str]],
           clock: Clock | None = None, **options: Any) -> int:
    model = ScriptedModel(script, deltas=deltas)
    return run(Options(**options), env, make_agent=factory(env, model), sleep=lambda s: None,
               clock=clock or Clock(step=0.05))


def appended_text(fake: FakeSlack) -> str:
    return "".join(c["text"] for r in fake.calls("chat.appendStream") for c in r.params.get("chunks", [])
                   if c["type"] == "markdown_text")


def the_answer(ws: Workspace, q_ts: str) -> Any:
    [message] = bot_messages(ws, "C0ECSUP", q_ts)
    assert message.metadata is not None and message.metadata["event_type"] == EVENT_TYPES["answer"]
    assert not message.streaming and PLACEHOLDER not in message.text
    assert ws.reactions("C0ECSUP", q_ts) == {"white_check_mark": [BOT]}
    return message


# -- the streamed path ------------------------------------------------------------------------------------------
def test_the_answer_streams_into_the_thread_with_a_task_per_search(streaming: Workspace, fake: FakeSlack,
                                                                  env: dict[str, str]) -> None:
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0

    message = the_answer(streaming, q.ts)
    [start] = fake.calls("chat.startStream")
    assert start.params["thread_ts"] == q.ts and start.params["recipient_team_id"] == streaming.team_id
    assert start.params["recipient_user_id"] == q.user  # who asked (no reaction's user given: the author)
    assert message.ts == fake.calls("chat.stopStream")[0].params["ts"]
    text = markdown_of(message)
    assert text.startswith(ANSWER) and "**参照元**" in text and FAQ_URL in text and "FAQを調べます" not in text
    assert message.blocks is not None and message.blocks[-1]["type"] == "context"  # the footer, under the answer
    streamed = appended_text(fake)
    assert len(streamed) > len(ANSWER) // 2 and text.startswith(streamed)  # written as it came, the preamble not
    assert message.metadata is not None and message.metadata["event_payload"]["question_ts"] == q.ts
    [task] = message.tasks.values()
    assert task["title"] == "FAQを検索: 在庫同期 遅延" and task["status"] == "complete"
    assert task["sources"] and task["sources"][0]["url"] == FAQ_URL.rsplit("/", 1)[0] + "/stock-sync-delay.md"
    assert not fake.calls("chat.update")  # the streamed text was the answer: nothing rewritten
    assert len(fake.calls("chat.delete")) == 1  # the placeholder, the lock while the answer streamed


@pytest.mark.parametrize("code", ["unknown_method", "not_allowed_token_type", "feature_not_enabled",
                                  "channel_type_not_supported", "missing_recipient_user_id"])
def test_where_slack_refuses_streaming_the_run_looks_as_it_does_today(ws: Workspace, fake: FakeSlack,
                                                                     env: dict[str, str], code: str) -> None:
    ws.refuse_streaming = code
    q = question_of(ws)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0
    message = the_answer(ws, q.ts)
    assert markdown_of(message).startswith(ANSWER)
    [placeholder] = fake.calls("chat.postMessage")
    assert PLACEHOLDER in placeholder.params["text"] and fake.calls("chat.update")[-1].params["ts"] == message.ts
    assert len(fake.calls("chat.startStream")) == 1  # decided once
    assert not fake.calls("chat.appendStream") and not fake.calls("chat.stopStream")
