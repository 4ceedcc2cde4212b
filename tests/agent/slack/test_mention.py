"""@helpbot: an ``app_mention`` answers its thread with the mention's text as the asker's instruction -- through the
relay (signed event in, dispatch out, that dispatch answered) and ``helpbot answer --event`` (the envelope)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent.errors import BadInput
from agent.slack.admission import TriggerSettings, check_ignore
from agent.slack.markers import EVENT_TYPES
from agent.slack.relay import Relay, RelayConfig
from agent.slack.trigger import parse_event_data
from tests.fakes.clock import FakeClock
from tests.fakes.front import BOT, WRITES, answer_scripted, bot_messages, envelope_file, event_file, markdown_of
from tests.fakes.model import Request
from tests.fakes.relay import ENV as RELAY_ENV
from tests.fakes.relay import NOW, mention_envelope, signed
from tests.fakes.slack import FakeSlack, Workspace


def question(request: Request) -> str:
    return "\n".join(b["text"] for b in request.messages[-1]["content"] if b.get("type") == "text")


def english_when_asked(request: Request) -> str:
    text = question(request).split("<context>")[0]
    return "Check the sync job's log for HTTP 429." if "英語で" in text else "同期ジョブのログを確認してください。"


def test_a_mention_under_a_colleagues_question_answers_it_with_the_instruction(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    root = ws.history("C0ECSUP")[0]  # Shopify の在庫同期が30分以上遅れています…, with one human reply
    mention = ws.post("C0ECSUP", f"<@{BOT}> 英語で", user="U0SUZUKI", thread_ts=root.ts)
    path = envelope_file(tmp_path, mention_envelope("C0ECSUP", mention.ts, mention.text, user="U0SUZUKI",
                                                    thread_ts=root.ts))
    code, model = answer_scripted(env, english_when_asked, event=path)
    assert code == 0
    asked = question(model.requests[0]).split("<context>")[0]
    assert asked.startswith("Shopify の在庫同期が30分以上遅れています") and "（@helpbot への依頼: 英語で）" in asked
    assert "@helpbot" not in asked.replace("（@helpbot への依頼", "")  # the mention itself is left out
    [answer] = bot_messages(ws, "C0ECSUP", root.ts)
    assert "HTTP 429" in markdown_of(answer)
    assert answer.metadata and answer.metadata["event_type"] in EVENT_TYPES.values()
    assert answer.metadata["event_payload"]["question_ts"] == mention.ts  # the mention is what was answered

    # the same mention again (a Slack retry, a second dispatch): already answered, nothing written
    before = len([r for r in fake.requests if r.method in WRITES])
    assert answer_scripted(env, english_when_asked, event=path)[0] == 0
    assert len([r for r in fake.requests if r.method in WRITES]) == before


def test_a_mention_starting_a_thread_is_the_question_itself(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    mention = ws.post("C0ECSUP", f"<@{BOT}> 在庫同期のログはどこで見られますか？", user="U0TANAKA")
    path = envelope_file(tmp_path, mention_envelope("C0ECSUP", mention.ts, mention.text))
    code, model = answer_scripted(env, lambda r: "管理画面の連携ログです。", event=path)
    assert code == 0
    assert question(model.requests[0]).split("\n\n<context>")[0] == "在庫同期のログはどこで見られますか？"
    assert len(bot_messages(ws, "C0ECSUP", mention.ts)) == 1


def test_a_mention_after_an_answer_is_a_follow_up_with_the_instruction_alone(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    root = ws.history("C0ECSUP")[0]
    assert answer_scripted(env, lambda r: "同期ジョブのログを確認してください。", channel="C0ECSUP", ts=root.ts)[0] == 0
    mention = ws.post("C0ECSUP", f"<@{BOT}|helpbot> 要点だけ", user="U0TANAKA", thread_ts=root.ts)
    path = envelope_file(tmp_path, mention_envelope("C0ECSUP", mention.ts, mention.text, thread_ts=root.ts))
    code, model = answer_scripted(env, lambda r: "ログを見る。", event=path)
    assert code == 0
    request = model.requests[0]
    assert question(request).split("\n\n<context>")[0] == "要点だけ"
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]  # the earlier answer as history
    assert len(bot_messages(ws, "C0ECSUP", root.ts)) == 2


@pytest.mark.parametrize("case", ["by helpbot itself", "helpbot's own answer", "not a mention", "mention only",
                                  "outside the allowlist"])
def test_mentions_that_must_not_be_answered_write_nothing(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path, case: str) -> None:
    root = ws.history("C0ECSUP")[0]
    user = "U0TANAKA"
    if case == "by helpbot itself":  # known from HELPBOT_BOT_USER_ID before any Slack call
        env["HELPBOT_BOT_USER_ID"] = BOT
        message = ws.post("C0ECSUP", f"<@{BOT}> 英語で", user=BOT, thread_ts=root.ts)
        user = BOT
    elif case == "helpbot's own answer":  # an answer quoting a mention; the event names no user (a bot post)
        message = ws.post("C0ECSUP", f"<@{BOT}> への質問の回答です", user=BOT, bot_id=ws.bot_id, app_id=ws.app_id,
                          thread_ts=root.ts)
    elif case == "not a mention":
        message = ws.post("C0ECSUP", "helpbot って何？", user=user, thread_ts=root.ts)
    elif case == "mention only":
        message = ws.post("C0ECSUP", f"<@{BOT}>", user=user)
    else:
        env["HELPBOT_CHANNELS"] = "C0GENERAL"
        message = ws.post("C0ECSUP", f"<@{BOT}> 英語で", user=user, thread_ts=root.ts)
    data = mention_envelope("C0ECSUP", message.ts, message.text, user=user,
                            thread_ts=message.thread_ts if message.is_reply else None)
    if case == "helpbot's own answer":
        del data["event"]["user"]
        data["event"]["bot_id"] = ws.bot_id
    code, model = answer_scripted(env, lambda r: "answer", event=envelope_file(tmp_path, data))
    assert code == 0
    assert model.requests == []
    assert [r for r in fake.requests if r.method in WRITES] == []
    if case in ("by helpbot itself", "outside the allowlist"):
        assert fake.requests == []  # decided from the event alone


# -- the relay ------------------------------------------------------------------------------------------------------
def relay(data: dict[str, Any], settings: TriggerSettings | None = None) -> tuple[int, bytes, list[dict[str, str]]]:
    sent: list[dict[str, str]] = []
    body = json.dumps(data).encode()
    config = replace(RelayConfig.from_env(RELAY_ENV), settings=settings or TriggerSettings())
    status, _, out = Relay(config, sent.append, clock=FakeClock(wall=NOW))(signed(body), body)
    return status, out, sent


def test_the_relay_forwards_a_mention_and_that_dispatch_is_answered(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    root = ws.history("C0ECSUP")[0]
    mention = ws.post("C0ECSUP", f"<@{BOT}> 英語で", user="U0SUZUKI", thread_ts=root.ts)
    status, _, sent = relay(mention_envelope("C0ECSUP", mention.ts, mention.text, user="U0SUZUKI",
                                             thread_ts=root.ts))
    assert status == 200
    assert sent == [{"channel": "C0ECSUP", "ts": mention.ts, "thread_ts": root.ts, "user": "U0SUZUKI",
                     "item_user": "U0SUZUKI", "event_id": "Ev0MENTION1", "mention": "true"}]
    code, _ = answer_scripted(env, english_when_asked, event=event_file(tmp_path, sent[0]))  # repository_dispatch
    assert code == 0
    assert "HTTP 429" in markdown_of(bot_messages(ws, "C0ECSUP", root.ts)[-1])


def test_the_relay_ignores_helpbots_own_mentions_and_other_channels() -> None:
    settings = TriggerSettings(channels=frozenset({"C0ECSUP"}), bot_user_id=BOT)
    own = mention_envelope("C0ECSUP", "1735779700.000100", f"<@{BOT}> hi", user=BOT)
    elsewhere = mention_envelope("C0GENERAL", "1735779700.000100", f"<@{BOT}> hi")
    for data, why in [(own, b"written by helpbot itself"), (elsewhere, b"not in HELPBOT_CHANNELS")]:
        status, out, sent = relay(data, settings)
        assert status == 200 and why in out and sent == []


def test_the_one_parser_reads_mentions_strictly() -> None:
    trigger = parse_event_data(mention_envelope("C0ECSUP", "1735779700.000100", "<@U0HELPBOT> x",
                                                thread_ts="1735779600.000001"))
    assert (trigger.mention, trigger.reaction, trigger.thread_ts, trigger.user) == (
        True, None, "1735779600.000001", "U0TANAKA")
    assert check_ignore(trigger, TriggerSettings()) is None
    with pytest.raises(BadInput, match="both a reaction and mention"):
        parse_event_data({"client_payload": {"channel": "C0ECSUP", "ts": "1735779700.000100", "reaction": "help",
                                             "mention": "true"}})
    with pytest.raises(BadInput, match="mention must be true or false"):
        parse_event_data({"client_payload": {"channel": "C0ECSUP", "ts": "1735779700.000100", "mention": "yes"}})
    with pytest.raises(BadInput, match="app_mention"):
        parse_event_data({"type": "app_mention", "channel": "C0ECSUP"})
