"""``helpbot answer`` end to end against the fake Slack Web API, with a scripted model or the Bedrock stub.

What a user sees in the thread is asserted on the fake's workspace state (messages, blocks, metadata,
reactions); "nothing posted" on the fake's request log (no write call at all, often no call at all).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.errors import sigterm_raises
from agent.slack import front
from agent.slack.blocks import PLACEHOLDER
from agent.slack.front import Options, run
from agent.slack.markers import EVENT_TYPES
from agent.slack.post import SlackOut
from agent.slack.reply import ProgressThrottle
from mcp_lib import Caller
from tests.agent.conftest import PREFIXES
from tests.fakes import bedrock as stub_lib
from tests.fakes.bedrock import BedrockStub, answering_with_the_first_faq_hit
from tests.fakes.clock import FakeClock
from tests.fakes.front import (
    BOT,
    FAQ_URL,
    REPO,
    answer_scripted,
    bot_messages,
    cites_first_faq_hit,
    event_file,
    factory,
    markdown_of,
    one_line,
    question_of,
    writes,
)
from tests.fakes.model import Request, ScriptedModel, calls
from tests.fakes.slack import FakeSlack, Message, Workspace

# -- fixtures and helpers ---------------------------------------------------------------------------------------


# -- the happy path, through the real CLI entry and the Bedrock stub ----------------------------------------------
def test_repository_dispatch_event_produces_exactly_one_threaded_answer_with_sources(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = answering_with_the_first_faq_hit
    q = question_of(ws)
    path = event_file(tmp_path, ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0SUZUKI", "reaction": "help"}))

    assert main(["answer", "--event", path]) == 0

    answers = bot_messages(ws, "C0ECSUP", q.ts)
    assert len(answers) == 1
    answer = answers[0]
    assert answer.thread_ts == q.ts
    assert answer.metadata is not None and answer.metadata["event_type"] == EVENT_TYPES["answer"]
    assert answer.metadata["event_payload"]["question_ts"] == q.ts
    text = markdown_of(answer)
    assert "連携ログを確認してください" in text and "**参照元**" in text and FAQ_URL in text
    assert PLACEHOLDER not in answer.text
    # the placeholder was posted first and then replaced by the answer (the same message)
    posted = fake.calls("chat.postMessage")
    assert len(posted) == 1 and PLACEHOLDER in posted[0].params["text"]
    assert fake.calls("chat.update")[-1].params["ts"] == answer.ts
    # 👀 while working, then ✅ instead
    assert [(r.method, r.params["name"]) for r in fake.calls() if r.method.startswith("reactions.")] == [
        ("reactions.add", "eyes"), ("reactions.remove", "eyes"), ("reactions.add", "white_check_mark")]
    assert ws.reactions("C0ECSUP", q.ts, by=BOT) == {"white_check_mark": [BOT]}
    assert "answered: https://helpbot-test.slack.com/archives/C0ECSUP/p" in capsys.readouterr().err
    # the model got the message itself and the thread around it
    first = stub.requests[0].body["messages"][0]["content"][0]["text"]
    assert first.startswith(q.text) and "在庫同期ジョブのログを見て" in first


def test_a_second_run_for_the_same_message_posts_nothing(stub: BedrockStub, ws: Workspace, fake: FakeSlack,
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stub.responder = answering_with_the_first_faq_hit
    q = question_of(ws)
    path = event_file(tmp_path, ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0TANAKA", "reaction": "help"}))
    assert main(["answer", "--event", path]) == 0
    before, model_calls = len(writes(fake)), len(stub.requests)
    capsys.readouterr()

    assert main(["answer", "--event", path]) == 0

    assert len(writes(fake)) == before and len(stub.requests) == model_calls
    assert "already answered" in one_line(capsys.readouterr().err)
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1


def test_force_answers_again(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    q = question_of(ws)
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)[0] == 0
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)[0] == 0
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts, force=True)[0] == 0
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 2


@pytest.mark.scenario
def test_the_installed_helpbot_command_answers_against_the_fakes(ws: Workspace, fake: FakeSlack,
                                                                 env: dict[str, str], tmp_path: Path) -> None:
    """The console script in a separate process, configured only by environment variables."""
    q = question_of(ws)
    reacted = ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0TANAKA", "reaction": ":help:"})
    path = event_file(tmp_path, reacted)
    with BedrockStub() as stub:
        stub.responder = answering_with_the_first_faq_hit
        process_env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES)}
        process_env.update(env, AWS_BEARER_TOKEN_BEDROCK="test-bedrock-key", ANTHROPIC_BEDROCK_BASE_URL=stub.url)
        helpbot = Path(sys.executable).with_name("helpbot")  # the console script uv installed
        assert helpbot.exists()
        done = subprocess.run([str(helpbot), "answer", "--event", path], cwd=REPO,
                              env=process_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = bot_messages(ws, "C0ECSUP", q.ts)
    assert len(answers) == 1 and FAQ_URL in markdown_of(answers[0])
    assert ws.reactions("C0ECSUP", q.ts, by=BOT) == {"white_check_mark": [BOT]}


# -- malformed triggers and deliberate ignores: nothing posted ----------------------------------------------------
MALFORMED = [
    ("", "event is empty"),
    ("   \n", "event is empty"),
    ("{not json", "event is not JSON"),
    ('[{"channel": "C0ECSUP"}]', "got a list"),
    ('{"client_payload": {"ts": "1735779660.000001"}}', "missing channel"),
    ('{"client_payload": {"channel": "C0ECSUP"}}', "missing ts"),
    ('{"client_payload": {"channel": "C0ECSUP", "ts": "1735779660.1"}}', "not a Slack timestamp"),
    ('{"client_payload": {"channel": "C0ECSUP", "ts": 1735779660.000001}}', "must be a string"),
    ('{"client_payload": {"channel": "general", "ts": "1735779660.000001"}}', "not a Slack channel ID"),
    ('{"client_payload": {"chanel": "C0ECSUP", "ts": "1735779660.000001"}}', "unknown key(s) ignored: chanel"),
    ('{"type": "url_verification", "challenge": "abc", "token": "x"}', "url_verification"),
]


@pytest.mark.parametrize(("raw", "words"), MALFORMED)
def test_each_malformed_event_exits_2_with_one_line_and_no_slack_call(
        raw: str, words: str, stub: BedrockStub, fake: FakeSlack, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = event_file(tmp_path, raw)
    assert main(["answer", "--event", path]) == 2
    assert words in one_line(capsys.readouterr().err)
    assert fake.requests == [] and stub.requests == []


@pytest.mark.parametrize("argv", [
    ["answer"],
    ["answer", "--channel", "C0ECSUP"],
    ["answer", "--ts", "1735779660.000001"],
    ["answer", "--url", "https://evil.example.com/archives/C0ECSUP/p1735779660000001"],
    ["answer", "--event", "/nonexistent/event.json"],
])
def test_bad_options_exit_2_without_any_slack_call(argv: list[str], stub: BedrockStub, fake: FakeSlack,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    one_line(capsys.readouterr().err)
    assert fake.requests == []


def test_another_reaction_is_ignored_without_any_slack_call(stub: BedrockStub, ws: Workspace, fake: FakeSlack,
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = event_file(tmp_path, {"channel": "C0ECSUP", "ts": question_of(ws).ts, "reaction": "thumbsup"})
    assert main(["answer", "--event", path]) == 0
    assert "ignored: reaction :+1: is not :help:" in one_line(capsys.readouterr().err)
    assert fake.requests == []


def test_a_message_helpbot_wrote_is_ignored(stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    own = ws.post("C0ECSUP", "前の回答です", user=BOT, bot_id=ws.bot_id, app_id=ws.app_id)
    reacted = ws.reacted({"channel": "C0ECSUP", "ts": own.ts, "user": "U0TANAKA", "reaction": "help"})
    path = event_file(tmp_path, reacted)
    assert main(["answer", "--event", path]) == 0
    assert "written by helpbot itself" in one_line(capsys.readouterr().err)
    assert writes(fake) == [] and stub.requests == []


def test_the_bots_own_message_named_in_the_payload_is_ignored_before_any_call(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELPBOT_BOT_USER_ID", BOT)
    path = event_file(tmp_path, {"channel": "C0ECSUP", "ts": question_of(ws).ts, "item_user": BOT})
    assert main(["answer", "--event", path]) == 0
    assert "written by helpbot itself" in one_line(capsys.readouterr().err)
    assert fake.requests == []


def test_a_channel_outside_the_allowlist_is_ignored(stub: BedrockStub, ws: Workspace, fake: FakeSlack,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELPBOT_CHANNELS", "C0GENERAL")
    path = event_file(tmp_path, {"channel": "C0ECSUP", "ts": question_of(ws).ts, "user": "U0TANAKA"})
    assert main(["answer", "--event", path]) == 0
    assert fake.requests == []


def test_a_message_that_does_not_exist_fails_in_one_line_and_posts_nothing(
        stub: BedrockStub, fake: FakeSlack, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = event_file(tmp_path, {"channel": "C0ECSUP", "ts": "1700000000.000001", "user": "U0TANAKA"})
    assert main(["answer", "--event", path]) == 1
    assert "thread_not_found (no message with that ts" in one_line(capsys.readouterr().err)
    assert writes(fake) == [] and stub.requests == []


def test_a_rejected_slack_token_is_a_configuration_error(stub: BedrockStub, ws: Workspace, fake: FakeSlack,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-0000000000-0000000000-revoked")
    assert main(["answer", "--channel", "C0ECSUP", "--ts", question_of(ws).ts]) == 2
    error = one_line(capsys.readouterr().err)
    assert error.startswith("helpbot: configuration error: SLACK_BOT_TOKEN") and "xoxb-" not in error
    assert writes(fake) == []


def test_without_a_bot_token_nothing_can_be_answered(stub: BedrockStub, ws: Workspace, fake: FakeSlack,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SLACK_BOT_TOKEN")
    assert main(["answer", "--channel", "C0ECSUP", "--ts", question_of(ws).ts]) == 2
    assert "SLACK_BOT_TOKEN" in one_line(capsys.readouterr().err)
    assert fake.requests == []


# -- failures after the thread is known: a notice, never silence ----------------------------------------------------
def test_a_model_that_rejects_the_request_leaves_a_failure_notice(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/helpbot")
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    stub.script(stub_lib.error(400, "ValidationException", "messages: tool_use ids were found without results"))
    q = question_of(ws)
    path = event_file(tmp_path, ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0TANAKA", "reaction": "help"}))

    assert main(["answer", "--event", path]) == 1

    notices = bot_messages(ws, "C0ECSUP", q.ts)
    assert len(notices) == 1  # the placeholder became the notice
    notice = notices[0]
    assert notice.metadata is not None and notice.metadata["event_type"] == EVENT_TYPES["failure"]
    assert "回答を作成できませんでした" in notice.text and "HTTP 400" in notice.text
    assert "https://github.com/acme/helpbot/actions/runs/4242" in notice.text
    assert ws.reactions("C0ECSUP", q.ts, by=BOT) == {"x": [BOT]}
    err = capsys.readouterr().err
    assert "helpbot answer: failed: AI モデルがリクエストを受け付けませんでした" in err and "Traceback" not in err


def test_a_model_down_for_good_degrades_to_a_labelled_search_answer(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Bedrock answering 503 on every attempt: by design the run degrades, and says so, in the thread."""
    monkeypatch.setenv("HELPBOT_MODEL_MAX_ATTEMPTS", "2")
    stub.script(stub_lib.error(503, "ServiceUnavailableException", "Bedrock is unavailable",
                               {"retry-after": "0"}))  # no real wait between the two attempts
    q = question_of(ws)
    path = event_file(tmp_path, {"channel": "C0ECSUP", "ts": q.ts, "user": "U0TANAKA"})

    assert main(["answer", "--event", path]) == 0

    answers = bot_messages(ws, "C0ECSUP", q.ts)
    assert len(answers) == 1 and len(stub.requests) == 2
    text = markdown_of(answers[0])
    assert text.startswith("⚠️") and text.count("⚠️") == 1 and FAQ_URL in text
    assert answers[0].metadata is not None and answers[0].metadata["event_payload"]["degraded"] is True
    # the searches ran on the message itself, not on the thread context the model would have seen
    assert [r.params["query"] for r in fake.calls("search.messages")] == [q.text]


def test_a_crash_inside_the_run_leaves_a_failure_notice(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def script(request: Request) -> Any:
        raise RuntimeError("the model client blew up")

    q = question_of(ws)
    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 1
    [notice] = bot_messages(ws, "C0ECSUP", q.ts)
    assert "RuntimeError: the model client blew up" in notice.text
    assert ws.reactions("C0ECSUP", q.ts, by=BOT) == {"x": [BOT]}
    assert "helpbot answer: failed: RuntimeError" in capsys.readouterr().err


def test_sigterm_mid_run_still_leaves_a_notice(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    def script(request: Request) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # the Actions job is cancelled while the model is thinking
        return "never seen"

    before = signal.getsignal(signal.SIGTERM)
    q = question_of(ws)
    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 130
    [notice] = bot_messages(ws, "C0ECSUP", q.ts)
    assert "実行が中断されました" in notice.text
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_stale_placeholder_from_a_killed_run_is_cleaned_up(ws: Workspace, fake: FakeSlack,
                                                             env: dict[str, str]) -> None:
    q = question_of(ws)
    stale = ws.post("C0ECSUP", PLACEHOLDER, user=BOT, bot_id=ws.bot_id, thread_ts=q.ts, metadata={
        "event_type": EVENT_TYPES["progress"], "event_payload": {"question_ts": q.ts}})
    for _ in range(16):  # the killed run is more than 15 minutes (the job's timeout) older than this one
        ws.next_ts()
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)[0] == 0
    [answer] = bot_messages(ws, "C0ECSUP", q.ts)
    assert answer.ts != stale.ts and FAQ_URL in markdown_of(answer)
    assert [c.params["ts"] for c in fake.calls("chat.delete")] == [stale.ts]


def test_slack_rate_limits_are_retried_by_slack_sdks_handlers_without_real_waiting(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    fake.fail("chat.postMessage", status=429, retry_after=7, times=1)
    sleeps: list[float] = []
    q = question_of(ws)
    assert answer_scripted(env, cites_first_faq_hit(), sleeps=sleeps, channel="C0ECSUP", ts=q.ts)[0] == 0
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1
    assert len(sleeps) == 1 and 7 <= sleeps[0] <= 7.5


# -- what is posted -----------------------------------------------------------------------------------------------
def test_a_long_answer_is_split_into_thread_replies(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    paragraphs = [f"段落{i}：" + "在庫同期の確認手順について詳しく説明します。" * 30 for i in range(40)]
    long_answer = "\n\n".join(paragraphs) + f"\n\n[FAQ]({FAQ_URL})"

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("faq_search", {"query": "在庫同期"}))
        return long_answer

    q = question_of(ws)
    assert answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)[0] == 0
    answers = bot_messages(ws, "C0ECSUP", q.ts)
    assert len(answers) >= 3
    assert all(len(markdown_of(m)) <= 12_000 for m in answers)
    assert answers[0].metadata is not None and answers[0].metadata["event_payload"]["parts"] == len(answers)
    assert all(m.metadata is None for m in answers[1:])
    posted = "".join(markdown_of(m) for m in answers)
    assert all(p[:20] in posted for p in paragraphs)
    assert "**参照元**" in markdown_of(answers[-1]) and FAQ_URL in markdown_of(answers[-1])
    assert [r.error for r in writes(fake)] == [None] * len(writes(fake))


def test_personal_data_and_secrets_never_reach_slack(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    leaky = ("担当は taro.yamada@example.co.jp（090-1234-5678）です。トークン xoxb-123456789012-abcdefghijklmnop "
             "と AKIAABCDEFGHIJKLMNOP を使ってください。@channel に告知済み。")
    q = question_of(ws)
    assert answer_scripted(env, lambda r: leaky, channel="C0ECSUP", ts=q.ts)[0] == 0
    sent = json.dumps([r.params for r in writes(fake)], ensure_ascii=False)
    for secret in ("taro.yamada@example.co.jp", "090-1234-5678", "xoxb-123456789012", "AKIAABCDEFGHIJKLMNOP",
                   "@channel", "<!channel>"):
        assert secret not in sent
    [answer] = bot_messages(ws, "C0ECSUP", q.ts)
    assert "[email]" in markdown_of(answer) and "[phone]" in markdown_of(answer)
    assert "[REDACTED]" in markdown_of(answer)


def test_personal_data_masking_can_be_turned_off_but_secrets_stay_masked(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    env["HELPBOT_MASK_PERSONAL"] = "false"
    q = question_of(ws)
    leaky = "連絡先は support@example.com、鍵は xoxb-123456789012-abcdefghijklmnop です。"
    assert answer_scripted(env, lambda r: leaky, channel="C0ECSUP", ts=q.ts)[0] == 0
    [answer] = bot_messages(ws, "C0ECSUP", q.ts)
    assert "support@example.com" in markdown_of(answer) and "xoxb-123456789012" not in markdown_of(answer)


def test_a_secret_in_the_question_is_masked_before_the_model_sees_it(ws: Workspace, fake: FakeSlack,
                                                                     env: dict[str, str]) -> None:
    asked = ws.post("C0GENERAL", "このトークン xoxp-111111111111-222222222222-abcdefabcdef で API が 401 になります",
                    user="U0TANAKA")
    code, model = answer_scripted(env, lambda r: "トークンを再発行してください。", channel="C0GENERAL", ts=asked.ts)
    assert code == 0
    assert "xoxp-111111111111" not in model.requests[0].all_text()
    assert "[REDACTED]" in model.requests[0].all_text()


def test_dry_run_prints_and_posts_nothing(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    q = question_of(ws)
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts, dry_run=True)[0] == 0
    out = capsys.readouterr()
    assert "連携ログを確認してください" in out.out and FAQ_URL in out.out
    assert "dry run: nothing was posted" in out.err
    assert writes(fake) == []


def test_json_output_has_the_ask_shape_plus_the_permalink(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    q = question_of(ws)
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts, json=True)[0] == 0
    data = json.loads(capsys.readouterr().out)
    assert {"answer", "sources", "rounds", "tool_calls", "usage", "degraded"} <= set(data)
    assert data["sources"][0]["url"] == FAQ_URL and data["rounds"] == 1
    assert data["permalink"].startswith("https://helpbot-test.slack.com/archives/C0ECSUP/p")


def test_progress_updates_the_placeholder_but_throttled(ws: Workspace, fake: FakeSlack,
                                                        env: dict[str, str]) -> None:
    def three_rounds(request: Request) -> Any:
        if request.round <= 3:
            return calls(("faq_search", {"query": f"在庫 {request.round}"}))
        return "在庫同期の手順です。"

    q = question_of(ws)
    # a clock that moves 10 s per look: every new state is shown
    assert answer_scripted(env, three_rounds, clock=FakeClock(tick=10), channel="C0ECSUP", ts=q.ts)[0] == 0
    shown = [r.params["text"] for r in fake.calls("chat.update")][:-1]  # the last update is the answer
    assert "調べています…（ラウンド 2/10：FAQ を検索中）" in shown
    assert len(shown) == len(set(shown))  # never the same text twice in a row

    # a clock that stands still: no progress update at all, only the answer replaces the placeholder
    fresh = ws.post("C0ECSUP", "楽天の注文取込が止まっています", user="U0TANAKA")
    before = len(fake.calls("chat.update"))
    assert answer_scripted(env, three_rounds, clock=FakeClock(tick=0), channel="C0ECSUP", ts=fresh.ts)[0] == 0
    assert len(fake.calls("chat.update")) == before + 1


# -- the question -------------------------------------------------------------------------------------------------
def test_a_thread_reply_stays_the_question_and_the_answer_goes_to_its_thread(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    q = question_of(ws)
    reply = ws.post("C0ECSUP", "ログに 429 は出ていませんでした。他に見る場所は？", user="U0TANAKA", thread_ts=q.ts)
    seen: list[Caller] = []
    code, model = answer_scripted(env, cites_first_faq_hit(), seen=seen, channel="C0ECSUP", ts=reply.ts)
    assert code == 0
    asked = model.requests[0].messages[-1]["content"][0]["text"]
    assert asked.startswith("ログに 429 は出ていませんでした。")
    assert "（スレッドの返信）" in asked and q.text in asked  # the parent is context, not the question
    [answer] = bot_messages(ws, "C0ECSUP", q.ts)
    assert answer.thread_ts == q.ts and answer.metadata is not None
    assert answer.metadata["event_payload"]["question_ts"] == reply.ts
    assert ws.reactions("C0ECSUP", reply.ts) == {"white_check_mark": [BOT]}
    assert seen == [Caller(answer_channel="C0ECSUP")]


def test_files_and_linked_messages_join_the_question_under_the_platform_rules(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    public = ws.history("C0ECSUP")[1]  # 楽天の注文取込は15分ごと…
    secret = ws.history("C0SECRET")[0]
    dm = ws.history("D0TANAKA")[0]
    text = (f"これと同じ件ですか？ <{ws.permalink('C0ECSUP', public.ts)}|前の話> "
            f"{ws.permalink('C0SECRET', secret.ts)} <{ws.permalink('D0TANAKA', dm.ts)}>")
    asked = ws.post("C0GENERAL", text, user="U0TANAKA",
                    files=[{"id": "F1", "name": "order-import.log", "title": "order-import.log"}])
    code, model = answer_scripted(env, lambda r: "はい、同じ件です。", channel="C0GENERAL", ts=asked.ts)
    assert code == 0
    question = model.requests[0].messages[-1]["content"][0]["text"]
    # a file Slack no longer knows is named, with the reason (tests/agent/slack/test_attachments.py reads them)
    assert "添付ファイル:\n- order-import.log: 読めませんでした（files.info: " in question
    assert "楽天の注文取込は15分ごとに実行されます。" in question
    assert "障害対応メモ" not in question and "パスワード" not in question
    assert question.count("（読めません: ") == 2


def test_a_question_in_a_private_channel_may_read_it_but_stays_out_of_the_job_summary(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    asked = ws.post("C0SECRET", "社内限定の障害手順はどこ？", user="U0TANAKA")
    seen: list[Caller] = []
    assert answer_scripted(env, lambda r: "障害対応メモを見てください。", seen=seen, channel="C0SECRET",
                           ts=asked.ts)[0] == 0
    assert seen[0].answer_channel == "C0SECRET"
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "## helpbot: answered" in summary and "社内限定の障害手順" not in summary


# -- free questions (workflow_dispatch) ------------------------------------------------------------------------------
def workflow_event(tmp_path: Path, **inputs: Any) -> str:
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps({"inputs": inputs, "ref": "refs/heads/main", "workflow": ".github/workflows/help.yml"}))
    return str(path)


def test_a_free_question_without_a_channel_is_printed_and_summarized(
        fake: FakeSlack, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    code, _ = answer_scripted(env, cites_first_faq_hit(), event=workflow_event(tmp_path, question="在庫同期が遅い"))
    assert code == 0
    assert FAQ_URL in capsys.readouterr().out
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "在庫同期が遅い" in summary and "### Answer" in summary and FAQ_URL in summary
    assert writes(fake) == []


def test_a_free_question_is_answered_in_the_question_channel(ws: Workspace, fake: FakeSlack,
                                                             env: dict[str, str], tmp_path: Path) -> None:
    env.update(HELPBOT_QUESTION_CHANNEL="C0GENERAL", GITHUB_ACTOR="octocat")
    code, _ = answer_scripted(env, cites_first_faq_hit(), event=workflow_event(tmp_path, question="在庫同期が遅い"))
    assert code == 0
    [asked] = [m for m in ws.history("C0GENERAL") if m.user == BOT]
    assert "在庫同期が遅い" in asked.text and "octocat" in asked.text
    [answer] = [m for m in ws.thread("C0GENERAL", asked.ts) if m.ts != asked.ts]
    assert FAQ_URL in markdown_of(answer)


def test_the_posted_free_question_is_guarded_too(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                 tmp_path: Path) -> None:
    """Not only the answer: every payload helpbot posts passes the guard (here the question it reposts)."""
    env["HELPBOT_QUESTION_CHANNEL"] = "C0GENERAL"
    question = "hanako@example.com の鈴木さん（03-1234-5678）から @here 在庫の問い合わせ"
    code, _ = answer_scripted(env, lambda r: "確認します。", event=workflow_event(tmp_path, question=question))
    assert code == 0
    [asked] = [m for m in ws.history("C0GENERAL") if m.user == BOT]
    assert "hanako@example.com" not in asked.text and "03-1234-5678" not in asked.text
    assert "@here" not in asked.text and "[email]" in asked.text


def test_a_workflow_dispatch_url_answers_that_message(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                      tmp_path: Path) -> None:
    q = question_of(ws)
    url = ws.permalink("C0ECSUP", q.ts)
    code, _ = answer_scripted(env, cites_first_faq_hit(), event=workflow_event(tmp_path, url=url, dry_run=False))
    assert code == 0
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1


def test_a_workflow_dispatch_dry_run_posts_nothing(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                   tmp_path: Path) -> None:
    url = ws.permalink("C0ECSUP", question_of(ws).ts)
    code, _ = answer_scripted(env, cites_first_faq_hit(), event=workflow_event(tmp_path, url=url, dry_run=True))
    assert code == 0 and writes(fake) == []


# -- job summary and trace -------------------------------------------------------------------------------------------
def test_job_summary_and_trace_are_written_and_redacted(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                        tmp_path: Path) -> None:
    summary, trace = tmp_path / "summary.md", tmp_path / "trace.jsonl"
    env.update(GITHUB_STEP_SUMMARY=str(summary), HELPBOT_TRACE_FILE=str(trace))
    token = "xoxp-111111111111-222222222222-abcdefabcdef"
    asked = ws.post("C0ECSUP", f"在庫同期の件。トークン {token} は有効？ 連絡は taro@example.com まで",
                    user="U0TANAKA")

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("faq_search", {"query": f"在庫同期 {token}"}))
        return f"確認手順です。[FAQ]({FAQ_URL})"

    assert answer_scripted(env, script, channel="C0ECSUP", ts=asked.ts)[0] == 0

    text = summary.read_text(encoding="utf-8")
    assert "## helpbot: answered" in text and "在庫同期の件" in text
    assert "**Rounds:** 1" in text and "faq_search" in text and "**Tokens:** in " in text
    assert "**Est. cost:** $" in text
    assert "**Answer:** [https://helpbot-test.slack.com/archives/C0ECSUP/p" in text
    assert token not in text and "taro@example.com" not in text
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[0] == "front.trigger" and "front.done" in kinds
    assert {"run_start", "model_request", "tool_call", "tool_result", "answer", "front.post", "front.update"} <= set(
        kinds)
    assert token not in trace.read_text(encoding="utf-8")


def test_an_ignored_or_rejected_trigger_is_summarized_too(fake: FakeSlack, env: dict[str, str],
                                                          tmp_path: Path) -> None:
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    assert run(Options(event=event_file(tmp_path, "[]")), env) == 2
    assert "rejected the trigger" in (tmp_path / "summary.md").read_text(encoding="utf-8")


# -- wiring ---------------------------------------------------------------------------------------------------------
def test_the_relay_subcommand_without_configuration_exits_2(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    assert main(["relay", "--port", "0"]) == 2  # no SLACK_SIGNING_SECRET: one line, exit 2
    assert "SLACK_SIGNING_SECRET" in one_line(capsys.readouterr().err)


@pytest.mark.scenario
def test_help_for_answer_does_not_import_the_slack_sdk() -> None:
    code = ("import sys; from agent.cli import main\n"
            "try:\n    main(['answer', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('slack_sdk' in sys.modules, 'anthropic' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "False False"


@pytest.mark.scenario
def test_the_answer_command_imports_nothing_of_files_or_the_agent_loop_before_it_runs() -> None:
    # the path to 👀 is these imports, then the configuration check and the Slack reads: the attachments (images,
    # PDFs), the agent's loop and the model client are imported when the question is built and asked
    later = ("agent.slack.attachments", "agent.slack.files", "PIL", "agent.core.run", "agent.core.loop",
             "agent.core.claude", "httpx2")
    code = f"import sys, agent.cli, agent.slack.front\nprint([m for m in {later!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr


# -- private channels: nothing of theirs in the summary, the log or the trace ----------------------------------------
SECRET_QUESTION = "社内限定の障害手順はどこ？"
SECRET_ANSWER = "障害対応メモ（社内限定）を見てください。"


def answer_in_secret(env: dict[str, str], ws: Workspace, **options: Any) -> tuple[int, Message]:
    asked = ws.post("C0SECRET", SECRET_QUESTION, user="U0TANAKA")

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("slack_getConversationHistory", {"channel": "C0SECRET"}))
        return SECRET_ANSWER

    code, _ = answer_scripted(env, script, channel="C0SECRET", ts=asked.ts, **options)
    return code, asked


def test_a_dry_run_on_a_private_channel_in_actions_withholds_the_answer_everywhere(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    summary, trace = tmp_path / "summary.md", tmp_path / "trace.jsonl"
    env.update(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary), HELPBOT_TRACE_FILE=str(trace))
    code, _ = answer_in_secret(env, ws, dry_run=True)
    assert code == 0 and writes(fake) == []
    out = capsys.readouterr()
    assert "dry run: answer withheld (private channel)" in out.err
    everything = out.out + out.err + summary.read_text(encoding="utf-8") + trace.read_text(encoding="utf-8")
    for private in (SECRET_QUESTION, SECRET_ANSWER, "secret-ops", "障害対応メモ"):
        assert private not in everything, private
    assert "## helpbot: answered (not posted)" in summary.read_text(encoding="utf-8")
    assert "private channel C0SECRET" in summary.read_text(encoding="utf-8")


def test_a_dry_run_on_a_private_channel_run_locally_prints_the_answer(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = answer_in_secret(env, ws, dry_run=True)  # no GITHUB_ACTIONS: the person has the tokens anyway
    assert code == 0 and SECRET_ANSWER in capsys.readouterr().out


def test_the_trace_of_a_private_channel_keeps_only_how_the_run_ended(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    """No text, and no numbers or names the model chose either (tests/agent/test_guard_no_leaks.py tries them)."""
    trace = tmp_path / "trace.jsonl"
    env.update(HELPBOT_TRACE_FILE=str(trace), GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    code, asked = answer_in_secret(env, ws)
    assert code == 0 and len(bot_messages(ws, "C0SECRET", asked.ts)) == 1  # answered in the channel itself
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    text = trace.read_text(encoding="utf-8")
    assert SECRET_QUESTION not in text and "在庫同期の障害対応メモ" not in text  # the question, a tool's preview
    withheld = [e["event"] for e in events].index("withheld")
    assert events[withheld] == {"event": "withheld", "detail": "private run: details withheld"}
    assert [{k: v for k, v in e.items() if k != "t"} for e in events[withheld + 1:]] == [
        {"event": "front.done", "degraded": False}]
    assert not any(e["event"].startswith(("front.question", "tool_", "model_", "run_")) for e in events)
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "secret-ops" not in summary and SECRET_QUESTION not in summary and "**Rounds:**" not in summary
    assert "- **Details:** private run: details withheld" in summary and "## helpbot: answered" in summary


def test_a_public_channels_trace_keeps_its_text(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                tmp_path: Path) -> None:
    env["HELPBOT_TRACE_FILE"] = str(tmp_path / "trace.jsonl")
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=question_of(ws).ts)[0] == 0
    text = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    assert question_of(ws).text[:20] in text and '"withheld"' not in text


@pytest.mark.parametrize("public_records", ["", "true"])
def test_a_public_repository_keeps_questions_and_answers_out_of_its_records(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path, public_records: str) -> None:
    """Anyone can read a public repository's job summaries, logs and traces: by default they keep only how each
    run ended, as for a private channel; HELPBOT_PUBLIC_RECORDS=true keeps them as they were."""
    summary, trace = tmp_path / "summary.md", tmp_path / "trace.jsonl"
    env.update(HELPBOT_TRACE_FILE=str(trace), GITHUB_STEP_SUMMARY=str(summary),
               HELPBOT_REPOSITORY_VISIBILITY="public", HELPBOT_PUBLIC_RECORDS=public_records)
    asked = question_of(ws)
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=asked.ts)[0] == 0
    assert len(bot_messages(ws, "C0ECSUP", asked.ts)) == 1  # the thread is answered as ever
    records = summary.read_text(encoding="utf-8") + trace.read_text(encoding="utf-8")
    kept = asked.text[:20] in records
    assert kept is bool(public_records) and ("private run: details withheld" in records) is not kept
    assert "## helpbot: answered" in records


def test_who_helpbot_is_the_channel_and_the_thread_are_read_at_once(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path) -> None:
    """Before 👀 each round trip to Slack is a wait: the three reads that need nothing from each other are in
    flight together (auth.test answers only once the other two have arrived), and each is asked once."""
    stub.responder = answering_with_the_first_faq_hit
    q = question_of(ws)
    released = fake.hold("auth.test", until=lambda: fake.calls("conversations.info")
                         and fake.calls("conversations.replies"))
    path = event_file(tmp_path, ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0SUZUKI", "reaction": "help"}))
    assert main(["answer", "--event", path]) == 0
    assert released == [True]
    assert len(fake.calls("auth.test")) == 1  # the tools' permalinks take the front's answer
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1


def test_the_names_in_the_question_are_looked_up_while_helpbot_posts(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path) -> None:
    """users.info one person after another would delay the first model request: the thread's people are looked up
    while the placeholder and 👀 are posted (👀 answers only once both lookups have arrived), each once."""
    stub.responder = answering_with_the_first_faq_hit
    q = question_of(ws)
    people = {m.user for m in ws.thread("C0ECSUP", q.ts) if m.user}
    assert len(people) >= 2
    released = fake.hold("reactions.add", until=lambda: {r.params.get("user") for r in fake.calls("users.info")}
                         >= people)
    path = event_file(tmp_path, ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0SUZUKI", "reaction": "help"}))
    assert main(["answer", "--event", path]) == 0
    assert released == [True]
    looked_up = [r.params.get("user") for r in fake.calls("users.info")]
    assert sorted(looked_up) == sorted(set(looked_up))  # who asked (admission) and the names: one lookup each
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1


def test_a_message_link_to_a_private_channel_from_workflow_dispatch_is_refused(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Anyone who may run the workflow could otherwise have helpbot read a private channel into Actions."""
    asked = ws.post("C0SECRET", SECRET_QUESTION, user="U0TANAKA")
    path = workflow_event(tmp_path, url=ws.permalink("C0SECRET", asked.ts), dry_run=True)
    code, model = answer_scripted(env, lambda r: SECRET_ANSWER, event=path)
    assert code == 2 and model.requests == [] and writes(fake) == []
    assert "private channel" in one_line(capsys.readouterr().err)
    assert not fake.calls("conversations.replies")  # refused before the message was read


def test_an_allowlisted_private_channel_may_be_named_by_hand(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                             tmp_path: Path) -> None:
    env["HELPBOT_CHANNELS"] = "C0SECRET C0ECSUP"
    asked = ws.post("C0SECRET", SECRET_QUESTION, user="U0TANAKA")
    path = workflow_event(tmp_path, url=ws.permalink("C0SECRET", asked.ts))
    assert answer_scripted(env, lambda r: SECRET_ANSWER, event=path)[0] == 0
    assert len(bot_messages(ws, "C0SECRET", asked.ts)) == 1


@pytest.mark.parametrize("channel", ["D0TANAKA", "C0MPIM"], ids=["dm", "group dm"])
def test_direct_messages_are_ignored(channel: str, ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The app has no im:history / mpim:history: helpbot answers in channels only."""
    code, model = answer_scripted(env, lambda r: "答え", channel=channel, ts=ws.history(channel)[0].ts)
    assert code == 0 and model.requests == [] and writes(fake) == []
    err = one_line(capsys.readouterr().err)
    assert "ignored:" in err and "DM" in err.replace("direct message", "DM")
    assert not fake.calls("conversations.replies")  # ignored before the message was read


def test_a_reaction_in_a_group_dm_is_ignored_before_its_thread_is_read(
        stub: BedrockStub, ws: Workspace, fake: FakeSlack, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The thread is read ahead only once the channel's info allows it: even a token granted mpim:history by
    mistake reads no group DM (the info's answer waits 2 s for a thread read that must not come)."""
    asked = ws.history("C0MPIM")[0]
    released = fake.hold("conversations.info", until=lambda: fake.calls("conversations.replies"), at_most_s=2.0)
    path = event_file(tmp_path, ws.reacted({"channel": "C0MPIM", "ts": asked.ts, "user": "U0SUZUKI",
                                            "reaction": "help"}))
    assert main(["answer", "--event", path]) == 0
    assert "group DM" in capsys.readouterr().err
    assert released == [False] and not fake.calls("conversations.replies") and writes(fake) == []


# -- helpbot's own messages are recognised by their author, not by metadata alone -----------------------------------
def forged(ws: Workspace, channel: str, thread_ts: str, event_type: str, question_ts: str) -> Message:
    """Another app's message carrying helpbot's metadata (any app may set any event_type)."""
    return ws.post(channel, "偽の回答", user="U0OTHERBOT", bot_id="B0OTHERAPP", app_id="A0OTHER", thread_ts=thread_ts,
                   metadata={"event_type": event_type, "event_payload": {"question_ts": question_ts, "parts": 1}})


def test_another_apps_fake_answer_does_not_silence_helpbot(ws: Workspace, fake: FakeSlack,
                                                           env: dict[str, str]) -> None:
    q = question_of(ws)
    forged(ws, "C0ECSUP", q.ts, EVENT_TYPES["answer"], q.ts)
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)[0] == 0
    [answer] = bot_messages(ws, "C0ECSUP", q.ts)
    assert FAQ_URL in markdown_of(answer)


def test_another_apps_fake_placeholder_is_not_reused(ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    q = question_of(ws)
    fake_placeholder = forged(ws, "C0ECSUP", q.ts, EVENT_TYPES["progress"], q.ts)
    assert answer_scripted(env, cites_first_faq_hit(), channel="C0ECSUP", ts=q.ts)[0] == 0
    assert [c.params["ts"] for c in fake.calls("chat.update")].count(fake_placeholder.ts) == 0
    assert ws.message("C0ECSUP", fake_placeholder.ts).text == "偽の回答"  # type: ignore[union-attr]
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1


def test_a_message_with_helpbot_metadata_from_another_app_is_a_question_like_any_other(
        ws: Workspace, fake: FakeSlack, env: dict[str, str]) -> None:
    other = forged(ws, "C0ECSUP", None, EVENT_TYPES["failure"], "1735779000.000001")  # type: ignore[arg-type]
    assert answer_scripted(env, lambda r: "答えです。", channel="C0ECSUP", ts=other.ts)[0] == 0
    assert len(bot_messages(ws, "C0ECSUP", other.ts)) == 1


# -- failures once the answer is (partly) in the thread ---------------------------------------------------------------
def test_a_failure_after_the_first_part_never_overwrites_the_answer(ws: Workspace, fake: FakeSlack,
                                                                    env: dict[str, str]) -> None:
    paragraphs = [f"段落{i}：" + "在庫同期の確認手順について詳しく説明します。" * 30 for i in range(40)]

    def script(request: Request) -> Any:
        fake.fail("chat.postMessage", error="channel_not_found", times=1)  # the second part will fail
        return "\n\n".join(paragraphs)

    q = question_of(ws)
    code, _ = answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)
    assert code == 1
    first, notice = bot_messages(ws, "C0ECSUP", q.ts)
    assert first.metadata is not None and first.metadata["event_type"] == EVENT_TYPES["answer"]
    assert markdown_of(first).startswith("段落0：")  # the delivered part is still the answer
    assert notice.metadata is not None and notice.metadata["event_type"] == EVENT_TYPES["failure"]
    assert "channel_not_found" in notice.text
    assert ws.reactions("C0ECSUP", q.ts, by=BOT) == {"x": [BOT]}


def test_a_slack_error_notice_is_one_line_without_the_api_url(ws: Workspace, fake: FakeSlack,
                                                              env: dict[str, str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    def script(request: Request) -> Any:
        fake.fail("chat.update", error="msg_too_long", times=1)  # replacing the placeholder fails,
        fake.fail("chat.postMessage", error="msg_too_long", times=1)  # and so does posting the answer anew
        return "答えです。"

    q = question_of(ws)
    assert answer_scripted(env, script, channel="C0ECSUP", ts=q.ts)[0] == 1
    [notice] = bot_messages(ws, "C0ECSUP", q.ts)
    assert "Slack API エラー（msg_too_long）" in notice.text
    assert "\n" not in notice.text and "127.0.0.1" not in notice.text and "url:" not in notice.text
    assert "helpbot answer: failed: Slack API エラー（msg_too_long）" in capsys.readouterr().err


def test_sigterm_before_the_thread_is_known_is_exit_130_without_a_traceback(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    fake.fail("conversations.replies", status=429, retry_after=1, times=1)

    class CancelledWhileWaiting(FakeClock):
        def sleep(self, seconds: float) -> None:  # the job is cancelled during a rate-limit wait
            os.kill(os.getpid(), signal.SIGTERM)

    model = ScriptedModel(lambda r: "never")
    code = run(Options(channel="C0ECSUP", ts=question_of(ws).ts), env, make_agent=factory(env, model),
               clock=CancelledWhileWaiting())
    assert code == 130 and model.requests == [] and writes(fake) == []
    assert one_line(capsys.readouterr().err) == "helpbot answer: interrupted"


def test_a_reaction_that_blows_up_never_hides_the_outcome(tmp_path: Path) -> None:
    class Broken:
        def reactions_add(self, **params: Any) -> None:
            raise RuntimeError("client bug")

        def reactions_remove(self, **params: Any) -> None:
            raise ValueError("another bug")

    from agent.report import Trace

    out = SlackOut(Broken(), trace=Trace(None, FakeClock()), clock=FakeClock())  # type: ignore[arg-type]
    out.react("C0ECSUP", "1735779660.000001", "eyes")
    out.react("C0ECSUP", "1735779660.000001", "eyes", remove=True)


# -- free questions ---------------------------------------------------------------------------------------------------
def test_a_free_question_of_4000_characters_with_a_disguised_link_is_posted(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    env["HELPBOT_QUESTION_CHANNEL"] = "C0GENERAL"
    question = "<https://evil.example.com|社内ポータル> を見ましたが " + "在庫同期が遅れています。" * 330
    question = question[:4000]
    code, _ = answer_scripted(env, lambda r: "確認します。", event=workflow_event(tmp_path, question=question))
    assert code == 0
    [asked] = [m for m in ws.history("C0GENERAL") if m.user == BOT]
    sections = [b["text"]["text"] for b in asked.blocks or []]
    assert all(len(t) <= 3000 for t in sections) and len(sections) >= 2
    assert "<https://evil.example.com|" not in json.dumps(asked.blocks, ensure_ascii=False)
    assert len(ws.thread("C0GENERAL", asked.ts)) == 2  # and answered in its thread


# -- the progress throttle --------------------------------------------------------------------------------------------
def test_progress_throttle_shows_new_texts_at_most_every_interval() -> None:
    clock = FakeClock(tick=0)
    throttle = ProgressThrottle(clock, 5.0)
    assert not throttle.due("ラウンド 1")  # too soon after the placeholder
    clock.advance(5)
    assert throttle.due("ラウンド 1") and not throttle.due("ラウンド 2")
    clock.advance(6)
    assert not throttle.due("ラウンド 1") and throttle.due("ラウンド 2")


# -- the workflow files' own tests: tests/workflows/test_help_workflow.py ---------------------------------------
def test_a_second_sigterm_while_the_notice_is_posted_is_ignored() -> None:
    with sigterm_raises():
        with pytest.raises(front.Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. the runner's follow-up signal: the notice still goes out


def test_ci_cancels_superseded_runs_of_pull_requests_only() -> None:
    import yaml

    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    assert ci["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    assert "github.sha" in ci["concurrency"]["group"]  # each push to main has its own group: never cancelled


# -- a configuration mistake reaches the asker ---------------------------------------------------------------------
def test_a_configuration_error_once_the_thread_is_known_tells_the_asker_only(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    env.update(REDMINE_URL="redmine.example.test", GITHUB_SERVER_URL="https://github.com",
               GITHUB_REPOSITORY="acme/helpdesk", GITHUB_RUN_ID="42")  # a URL without its scheme: exit 2
    asked = question_of(ws)
    payload = {"channel": "C0ECSUP", "ts": asked.ts, "reaction": "help", "user": "U0TANAKA"}
    assert run(Options(event=event_file(tmp_path, payload)), env) == 2
    assert [(e.channel, e.user, e.thread_ts) for e in ws.ephemerals] == [("C0ECSUP", "U0TANAKA", asked.ts)]
    notice = ws.ephemerals[0].text
    assert "REDMINE_URL" in notice and "https://github.com/acme/helpdesk/actions/runs/42" in notice
    assert "redmine.example.test" not in notice  # the variable, never its value
    assert writes(fake) == [] and len(fake.calls("chat.postEphemeral")) == 1  # no 👀, no placeholder


def test_bad_trigger_input_and_a_missing_bot_token_tell_nobody(ws: Workspace, fake: FakeSlack, env: dict[str, str],
                                                               tmp_path: Path) -> None:
    asked = question_of(ws)
    assert run(Options(event=event_file(tmp_path, {"channel": "C0ECSUP", "ts": asked.ts, "reaction": "help",
                                                   "user": "not-a-user"})), env) == 2
    broken = {k: v for k, v in env.items() if k != "SLACK_BOT_TOKEN"}
    payload = {"channel": "C0ECSUP", "ts": asked.ts, "reaction": "help", "user": "U0TANAKA"}
    assert run(Options(event=event_file(tmp_path, payload)), broken) == 2
    assert ws.ephemerals == [] and writes(fake) == [] and fake.calls("chat.postEphemeral") == []
