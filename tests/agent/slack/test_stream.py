"""``helpbot answer`` with the answer streamed (chat.startStream / appendStream / stopStream) against the fake
Slack: tasks per tool call, the answer's text as the model writes it, the stop carrying sources, footer and marker;
the fallback where Slack refuses streaming; the egress guard across deltas; a kill mid-stream."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.core.settings import Settings
from agent.slack.blocks import PLACEHOLDER
from agent.slack.front import Options, run
from agent.slack.markers import EVENT_TYPES
from tests.fakes.bedrock import BedrockStub, answering_with_the_first_faq_hit
from tests.fakes.clock import FakeClock
from tests.fakes.front import BOT, FAQ_URL, bot_messages, event_file, factory, markdown_of, question_of
from tests.fakes.model import Request, ScriptedModel, calls
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
           clock: FakeClock | None = None, **options: Any) -> int:
    model = ScriptedModel(script, deltas=deltas)
    return run(Options(**options), env, make_agent=factory(env, model), clock=clock or FakeClock(tick=0.05))


def appended_text(fake: FakeSlack) -> str:
    return "".join(c["text"] for r in fake.calls("chat.appendStream") for c in r.params.get("chunks", [])
                   if c["type"] == "markdown_text")


def the_answer(ws: Workspace, q_ts: str) -> Any:
    [message] = bot_messages(ws, "C0ECSUP", q_ts)
    assert message.metadata is not None and message.metadata["event_type"] == EVENT_TYPES["answer"]
    assert not message.streaming and PLACEHOLDER not in message.text
    assert ws.reactions("C0ECSUP", q_ts, by=BOT) == {"white_check_mark": [BOT]}
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


# -- hostile models and a hostile Slack ---------------------------------------------------------------------------
SECRET = "xoxb-123456789012-123456789012-abcdefABCDEF1234"


def slack_bytes(fake: FakeSlack) -> str:
    return json.dumps([r.params for r in fake.requests], ensure_ascii=False)


def test_a_secret_and_a_mention_split_across_deltas_never_reach_slack(streaming: Workspace, fake: FakeSlack,
                                                                      env: dict[str, str]) -> None:
    hostile = (f"設定は {SECRET} です。 皆さん <!channel> と <@U0SUZUKI> さん、カード 4111 1111 1111 1111 も。 "
               + ANSWER)
    q = question_of(streaming)
    assert answer(env, searching_then(hostile), deltas=in_pieces(1), channel="C0ECSUP", ts=q.ts) == 0
    message = the_answer(streaming, q.ts)
    sent = slack_bytes(fake)
    for leaked in (SECRET, SECRET[:20], "<!channel>", "<@U0SUZUKI>", "4111 1111 1111 1111"):
        assert leaked not in sent
    assert appended_text(fake) and markdown_of(message).startswith(appended_text(fake))
    assert "＠channel" in markdown_of(message)


def test_a_tool_call_of_the_models_choosing_is_a_task_that_notifies_nobody(streaming: Workspace, fake: FakeSlack,
                                                                        env: dict[str, str]) -> None:
    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("faq_search", {"query": f"<!channel> <@U0SUZUKI> {SECRET}"}), ("no_such_tool", {}),
                         ("faq_search", {"query": 42}))
        return ANSWER

    q = question_of(streaming)
    assert answer(env, script, deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0
    message = the_answer(streaming, q.ts)
    task, failed = message.tasks.values()  # the call of a tool that does not exist is refused, never run: no task
    assert task["title"].startswith("FAQを検索: ＠channel ＠U0SUZUKI") and task["status"] == "complete"
    assert failed["title"] == "FAQを検索: 42" and failed["status"] == "error" and failed["output"] == "失敗しました"
    sent = slack_bytes(fake)
    assert SECRET not in sent and "<!channel>" not in sent and "no_such_tool" not in sent


def test_a_huge_answer_streams_one_message_then_continues_in_parts(streaming: Workspace, fake: FakeSlack,
                                                                   env: dict[str, str]) -> None:
    huge = "\n\n".join(f"{i}. " + "在庫同期の手順を詳しく説明します。" * 40 for i in range(60))  # ~40,000 chars
    q = question_of(streaming)
    assert answer(env, searching_then(huge), deltas=in_pieces(50), channel="C0ECSUP", ts=q.ts) == 0
    first, *rest = bot_messages(streaming, "C0ECSUP", q.ts)
    assert first.metadata is not None and first.metadata["event_payload"]["parts"] == len(rest) + 1 >= 3
    assert all(not m.streaming for m in (first, *rest)) and len(markdown_of(first)) <= 12_000
    assert all(len(json.dumps(r.params.get("chunks", []), ensure_ascii=False)) < 14_000
               for r in fake.calls("chat.appendStream"))
    assert len(fake.calls("chat.appendStream")) <= 40  # batched, not one call per delta (800 deltas)
    assert FAQ_URL in markdown_of(rest[-1])


def test_a_long_preamble_that_streamed_is_rewritten_into_the_answer(streaming: Workspace, fake: FakeSlack,
                                                                    env: dict[str, str]) -> None:
    preamble = "まず FAQ を検索して、過去の問い合わせと手順書を確認します。 " * 6
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER, preamble=preamble), deltas=in_pieces(5), channel="C0ECSUP",
                  ts=q.ts) == 0
    message = the_answer(streaming, q.ts)
    assert markdown_of(message).startswith(ANSWER) and "まず FAQ" not in markdown_of(message)
    assert fake.calls("chat.update")[-1].params["ts"] == message.ts  # rewritten whole after the stop


def test_a_model_that_calls_tools_past_the_limit_ends_in_the_labelled_sources_not_its_text(
        streaming: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    """It ignores "no more tool calls" twice (prompt-injected): two final requests, then the thread's answer is
    the run's sources labelled as not AI-generated (✅, marked degraded); nothing it streamed stays."""
    q = question_of(streaming)
    model = ScriptedModel(lambda r: calls(("faq_search", {"query": f"在庫 {r.round}"}), thought="INJECTED まだ調べる"),
                          deltas=in_pieces(4))
    assert run(Options(channel="C0ECSUP", ts=q.ts), env, make_agent=factory(env, model, Settings(max_rounds=2)),
               clock=FakeClock(tick=0.05)) == 0
    assert [r.final for r in model.requests] == [False, False, True, True]
    message = the_answer(streaming, q.ts)
    text = markdown_of(message)
    assert text.startswith("⚠️ これは AI が生成した回答ではありません（AI モデルが回答しなかったため")
    assert "INJECTED" not in text and FAQ_URL.rsplit("/", 1)[0] in text  # the sources, linked
    assert message.metadata is not None and message.metadata["event_payload"]["degraded"] is True


def test_a_stop_that_slack_refuses_still_ends_in_the_answer(streaming: Workspace, fake: FakeSlack,
                                                            env: dict[str, str]) -> None:
    fake.fail("chat.stopStream", error="message_not_in_streaming_state", times=10)
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0
    assert markdown_of(the_answer(streaming, q.ts)).startswith(ANSWER)


def test_rate_limited_appends_wait_for_slack_and_the_answer_is_whole(streaming: Workspace, fake: FakeSlack,
                                                                     env: dict[str, str]) -> None:
    fake.fail("chat.appendStream", status=429, retry_after=30, times=3)
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(2), channel="C0ECSUP", ts=q.ts) == 0
    assert markdown_of(the_answer(streaming, q.ts)).startswith(ANSWER)
    failed = [r for r in fake.calls("chat.appendStream") if r.status == 429]
    assert len(failed) == 1  # one try, then no append until the Retry-After has passed


def test_a_kill_mid_stream_leaves_the_notice_and_no_streaming_message(streaming: Workspace, fake: FakeSlack,
                                                                      env: dict[str, str]) -> None:
    def killed_while_writing(text: str) -> Iterator[str]:
        yield from in_pieces(10)(text[:len(text) * 3 // 4])
        if text.startswith(ANSWER[:10]):
            os.kill(os.getpid(), signal.SIGTERM)  # the Actions job is cancelled while the answer streams
        yield text[len(text) * 3 // 4:]

    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER * 4), deltas=killed_while_writing, channel="C0ECSUP", ts=q.ts) == 130
    [notice] = bot_messages(streaming, "C0ECSUP", q.ts)
    assert "実行が中断されました" in notice.text and not notice.streaming
    assert appended_text(fake)  # the answer had begun to show
    assert streaming.reactions("C0ECSUP", q.ts) == {"x": [BOT]}


def test_through_the_cli_and_the_bedrock_stub_the_answer_streams_as_bedrock_sends_it(
        streaming: Workspace, fake: FakeSlack, stub: BedrockStub, tmp_path: Path) -> None:
    """The real model client reading invoke-with-response-stream's event-stream frames, five characters a delta."""
    stub.responder = answering_with_the_first_faq_hit
    stub.delta_chars = 5
    q = question_of(streaming)
    reacted = streaming.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0SUZUKI", "reaction": "help"})
    path = event_file(tmp_path, reacted)
    assert main(["answer", "--event", path]) == 0
    message = the_answer(streaming, q.ts)
    assert {r.path.rsplit("/", 1)[-1] for r in stub.requests} == {"invoke-with-response-stream"}
    assert fake.calls("chat.startStream")[0].params["recipient_user_id"] == "U0SUZUKI"  # who reacted
    assert "連携ログを確認してください" in markdown_of(message) and FAQ_URL in markdown_of(message)
    assert [t["status"] for t in message.tasks.values()] == ["complete"]


def test_a_streamed_answer_is_an_answer_to_every_reader_of_markers(streaming: Workspace, fake: FakeSlack,
                                                                   env: dict[str, str]) -> None:
    """The stop's metadata is the one marker protocol: a second run finds the question answered."""
    fake.fail("chat.stopStream", status=503, lost=True)  # Slack stopped it, its answer was lost: not twice
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0
    message = the_answer(streaming, q.ts)
    assert markdown_of(message).startswith(ANSWER) and FAQ_URL in markdown_of(message)
    before = len(fake.requests)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0
    assert not [r for r in fake.requests[before:] if r.method.startswith(("chat.", "reactions."))
                and r.method != "chat.getPermalink"]
    assert len(bot_messages(streaming, "C0ECSUP", q.ts)) == 1


def test_a_stream_that_slack_ended_is_not_appended_to_again(streaming: Workspace, fake: FakeSlack,
                                                            env: dict[str, str]) -> None:
    fake.fail("chat.appendStream", error="message_not_in_streaming_state")  # Slack ends a stream after ~5 min
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER * 3), deltas=in_pieces(3), channel="C0ECSUP", ts=q.ts) == 0
    assert len(fake.calls("chat.appendStream")) == 1
    assert markdown_of(the_answer(streaming, q.ts)).startswith(ANSWER * 3)


@pytest.mark.parametrize("ts", ["abc", None, ["1700000000.000100"]])
def test_a_start_whose_answer_names_no_message_is_not_streamed_into(streaming: Workspace, fake: FakeSlack,
                                                                    env: dict[str, str], ts: Any) -> None:
    """A proxy's chat.startStream answer whose ts is no Slack ts: appending to it would fail every time, and its
    str() reached the trace as if it named a message. The run does not stream, as where Slack refuses streaming.
    (The message Slack may have started stays: no answer says which one it is.)"""
    real = fake.api.methods["chat.startStream"]

    def started(params: dict[str, Any], token: Any) -> dict[str, Any]:
        answer = {key: value for key, value in real(params, token).items() if key != "ts"}
        return answer if ts is None else {**answer, "ts": ts}

    fake.api.methods["chat.startStream"] = started
    q = question_of(streaming)
    assert answer(env, searching_then(ANSWER), deltas=in_pieces(4), channel="C0ECSUP", ts=q.ts) == 0
    [answered] = [m for m in bot_messages(streaming, "C0ECSUP", q.ts) if not m.streaming]
    assert answered.metadata is not None and answered.metadata["event_type"] == EVENT_TYPES["answer"]
    assert markdown_of(answered).startswith(ANSWER)
    assert not fake.calls("chat.appendStream") and not fake.calls("chat.stopStream")
