"""The Slack platform against the local fake Slack Web API (a real HTTP server; real slack-sdk WebClient).

Sleeps are recorded, never slept: the retry handlers sleep on the tool call's clock.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from mcp_lib.cli import main as mcp_lib_main
from mcp_lib.config import ConfigError
from mcp_lib.core import Caller, Limits, Result, ToolContext, ToolError
from mcp_lib.platforms.slack import (
    DEFAULT_API_URL,
    PLATFORM,
    SlackClients,
    SlackConfig,
    load_config,
    make_client,
)
from mcp_lib.platforms.slack.reading import MAX_NAME_LOOKUPS, NAME_LOOKUPS_FOR_S, names_ahead, person, plain
from mcp_lib.registry import Registry
from tests.fakes.clock import FakeClock
from tests.fakes.slack import BOT_TOKEN, PERSON_TOKEN, USER_TOKEN, FakeSlack, Workspace, sample_workspace

SECRET_TOKEN = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
SECRET_AWS = "AKIAIOSFODNN7EXAMPLE"


# -- fixtures -----------------------------------------------------------------------------------------------
@pytest.fixture
def ws() -> Workspace:
    """public #ec-support (a thread), private #secret-ops (bot member), a private channel without the bot,
    a DM with the bot, a group DM whose id starts with C (so only is_mpim can tell)."""
    ws = Workspace()
    ws.add_user("U0TANAKA", "tanaka", real_name="田中 太郎", display_name="田中")
    ws.add_user("U0SUZUKI", "suzuki", real_name="鈴木 花子", display_name="鈴木")
    ws.add_channel("C0ECSUP", "ec-support", members={"U0TANAKA", "U0SUZUKI"},
                   purpose="EC連携（Shopify・楽天）の問い合わせ")
    ws.add_channel("C0GENERAL", "general", members={"U0TANAKA"}, purpose="全体連絡")
    ws.add_channel("C0SECRET", "secret-ops", private=True, members={"U0TANAKA"}, purpose="社内限定")
    ws.add_channel("C0HIDDEN", "no-bot-here", private=True, bot_member=False, members={"U0TANAKA"})
    ws.add_channel("C0NOBOT", "bot-not-invited", bot_member=False, members={"U0TANAKA"})
    ws.add_im("D0TANAKA", "U0TANAKA")
    ws.add_mpim("C0MPIM", ["U0TANAKA", "U0SUZUKI", ws.bot_user_id, ws.owner_id])
    ws.post("C0ECSUP", "在庫同期が遅れています。Shopify 側の確認手順は？", user="U0TANAKA",
            ts="1735779660.000001")  # 2025-01-02 10:01 JST
    ws.post("C0ECSUP", "<@U0TANAKA> さん、<https://wiki.example/sync|在庫同期の手順書> を見てください",
            user="U0SUZUKI", thread_ts="1735779660.000001", ts="1735779720.000002")
    ws.post("C0ECSUP", "在庫同期ジョブのログに 429 が出ていました", user="U0TANAKA",
            thread_ts="1735779660.000001", ts="1735779780.000003")
    ws.post("C0ECSUP", "楽天の注文取込は15分ごとです", user="U0SUZUKI", ts="1735783200.000004")  # 11:00 JST
    ws.post("C0SECRET", "在庫同期の障害対応メモ（社内限定）", user="U0TANAKA", ts="1735779900.000005")
    ws.post("C0HIDDEN", "在庫同期 ボットのいないチャンネル", user="U0TANAKA", ts="1735779910.000006")
    ws.post("D0TANAKA", "在庫同期のパスワードを教えて", user="U0TANAKA", ts="1735779960.000007")
    ws.post("C0MPIM", "在庫同期の件、内々に相談です", user="U0SUZUKI", ts="1735780020.000008")
    ws.post("C0NOBOT", "在庫同期 公開だがボット未参加", user="U0TANAKA", ts="1735780080.000009")
    return ws


@pytest.fixture
def fake(ws: Workspace) -> Iterator[FakeSlack]:
    with FakeSlack(ws) as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    return []


def env_for(fake: FakeSlack, *, bot: str | None = BOT_TOKEN, user: str | None = USER_TOKEN) -> dict[str, str]:
    env = {"SLACK_API_URL": fake.url}
    if bot:
        env["SLACK_BOT_TOKEN"] = bot
    if user:
        env["SLACK_USER_TOKEN"] = user
    return env


def context(fake: FakeSlack, sleeps: list[float], *, answer_channel: str | None = None,
            limits: Limits | None = None, **env_options: Any) -> ToolContext:
    config = load_config(env_for(fake, **env_options))
    assert config is not None
    return ToolContext(client=make_client(config), config=config, caller=Caller(answer_channel=answer_channel),
                       limits=limits or Limits(), clock=recording(sleeps))


def recording(sleeps: list[float]) -> FakeClock:
    """A fake clock whose sleeps go into ``sleeps``."""
    clock = FakeClock()
    clock.sleeps = sleeps
    return clock


def run(ctx: ToolContext, tool: str, **arguments: Any) -> Result:
    return PLATFORM.tools[tool].invoke(ctx, arguments)


def texts(result: Result) -> list[str]:
    return [item["text"] for item in result.items]


# -- configuration ------------------------------------------------------------------------------------------
def test_disabled_without_tokens_enabled_with_either() -> None:
    assert load_config({}) is None
    assert load_config({"SLACK_API_URL": "https://slack.example/api"}) is None
    bot_only = load_config({"SLACK_BOT_TOKEN": BOT_TOKEN})
    assert bot_only is not None and bot_only.api_url == DEFAULT_API_URL and bot_only.user_token is None
    user_only = load_config({"SLACK_USER_TOKEN": USER_TOKEN})
    assert user_only is not None and user_only.bot_token is None
    assert BOT_TOKEN not in repr(bot_only)


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SLACK_BOT_TOKEN": "not-a-token"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": f'"{BOT_TOKEN}"'}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": USER_TOKEN}, "SLACK_BOT_TOKEN"),
        ({"SLACK_USER_TOKEN": BOT_TOKEN}, "SLACK_USER_TOKEN"),
        ({"SLACK_BOT_TOKEN": "xoxa-2-123456789012"}, "SLACK_BOT_TOKEN"),
        ({"SLACK_USER_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}, "SLACK_USER_TOKEN"),
        ({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": "slack.com/api"}, "SLACK_API_URL"),
        ({"SLACK_BOT_TOKEN": BOT_TOKEN, "HELPBOT_TIMEZONE": "Mars/Olympus"}, "HELPBOT_TIMEZONE"),
    ],
)
def test_bad_configuration_names_the_variable_and_never_echoes_the_token(env: dict[str, str],
                                                                          variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env)
    assert caught.value.variable == variable
    assert str(caught.value).startswith(variable)
    for secret in (BOT_TOKEN, USER_TOKEN, "ghp_abcdefghijklmnopqrstuvwxyz0123456789"):
        assert secret not in str(caught.value)


@pytest.mark.parametrize(("env", "says"), [
    ({"SLACK_BOT_TOKEN": USER_TOKEN}, "holds a user token (xoxp-); put it in SLACK_USER_TOKEN"),
    ({"SLACK_USER_TOKEN": BOT_TOKEN}, "holds a bot token (xoxb-); search.messages needs a user token"),
    ({"SLACK_BOT_TOKEN": "xoxa-2-123456789012"}, "a Slack token of the wrong kind; expected a bot token (xoxb-"),
    ({"SLACK_USER_TOKEN": f" '{USER_TOKEN}'"}, "does not look like a Slack user token (expected xoxp-"),
])
def test_a_token_in_the_wrong_place_says_where_it_belongs(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(env)
    assert load_config({"SLACK_BOT_TOKEN": f"xoxe.{BOT_TOKEN}", "SLACK_USER_TOKEN": f"xoxe.{USER_TOKEN}"})


def test_cli_bad_token_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "oops")
    assert mcp_lib_main(["slack:getChannels"]) == 2
    err = capsys.readouterr().err.strip()
    assert "SLACK_BOT_TOKEN" in err and "\n" not in err


# -- permalinks ---------------------------------------------------------------------------------------------
def test_a_message_link_in_slacks_own_form_reads_its_thread(ws: Workspace, fake: FakeSlack,
                                                            sleeps: list[float]) -> None:
    url = ws.permalink("C0ECSUP", "1735779780.000003")
    result = run(context(fake, sleeps), "getThreadMessages", url=f" <{url}|見て> ")
    assert result.status == "ok" and len(result.items) == 3


@pytest.mark.parametrize("url", ["https://acme.slack.com/archives/C0123ABCD", "p1700000000123456",
                                 "https://acme.slack.com/archives/C01/p1700000000123456?thread_ts=yesterday"])
def test_what_is_not_a_message_link_is_an_error_naming_it(fake: FakeSlack, sleeps: list[float], url: str) -> None:
    result = run(context(fake, sleeps), "getThreadMessages", url=url)
    assert result.is_error and (result.message or "").startswith(f"url {url!r} ")
    assert fake.calls("conversations.replies") == []


# -- searchMessages -----------------------------------------------------------------------------------------
def test_search_returns_linked_items_with_channel_author_and_tokyo_time(fake: FakeSlack,
                                                                        sleeps: list[float]) -> None:
    result = run(context(fake, sleeps), "searchMessages", query="注文取込")
    assert result.status == "ok", result.message
    (item,) = result.items
    assert item["url"] == "https://helpbot-test.slack.com/archives/C0ECSUP/p1735783200000004"
    assert item["title"] == "#ec-support @鈴木 2025-01-02 11:00: 楽天の注文取込は15分ごとです"
    assert (item["channel"], item["author"], item["time"]) == ("#ec-support", "鈴木", "2025-01-02T11:00:00+09:00")
    assert item["text"] == "楽天の注文取込は15分ごとです"
    assert [c.kind for c in fake.calls("search.messages")] == ["user"]


def test_search_reply_carries_its_thread(fake: FakeSlack, sleeps: list[float]) -> None:
    result = run(context(fake, sleeps), "searchMessages", query="429")
    (item,) = result.items
    assert item["thread_ts"] == "1735779660.000001" and "thread_ts=1735779660.000001" in item["url"]


def test_search_without_a_user_token_says_which_variable_and_sends_nothing(fake: FakeSlack,
                                                                           sleeps: list[float]) -> None:
    result = run(context(fake, sleeps, user=None), "searchMessages", query="在庫")
    assert result.is_error and "SLACK_USER_TOKEN" in (result.message or "")
    assert fake.calls("search.messages") == []


def test_search_with_a_bot_token_is_slacks_not_allowed_token_type(fake: FakeSlack, sleeps: list[float]) -> None:
    config = SlackConfig(api_url=fake.url, bot_token=BOT_TOKEN)
    clients = SlackClients(config=config, bot=None, user=WebClient(token=BOT_TOKEN, base_url=fake.url))
    result = run(ToolContext(client=clients, config=config), "searchMessages", query="在庫")
    assert result.is_error
    assert "not_allowed_token_type" in (result.message or "") and "SLACK_USER_TOKEN" in (result.message or "")
    assert fake.calls("search.messages")[0].error == "not_allowed_token_type"


@pytest.mark.parametrize(("bad", "variable"), [("user", "SLACK_USER_TOKEN"), ("bot", "SLACK_BOT_TOKEN")])
def test_invalid_auth_is_an_error_naming_the_variable(fake: FakeSlack, sleeps: list[float], bad: str,
                                                      variable: str) -> None:
    revoked = f"xox{'b' if bad == 'bot' else 'p'}-0000-revoked-token"
    ctx = context(fake, sleeps, bot=revoked if bad == "bot" else BOT_TOKEN,
                  user=revoked if bad == "user" else USER_TOKEN)
    tool, args = ("searchMessages", {"query": "在庫"}) if bad == "user" else ("getChannels", {})
    result = run(ctx, tool, **args)
    assert result.is_error and "invalid_auth" in (result.message or "") and variable in (result.message or "")
    assert result.kind == "credentials"  # the CLI exits 2 on it, naming the variable


def test_search_never_returns_dms_or_group_dms_even_when_answering_there(fake: FakeSlack,
                                                                         sleeps: list[float]) -> None:
    for answer_channel in (None, "D0TANAKA", "C0MPIM"):
        result = run(context(fake, sleeps, answer_channel=answer_channel), "searchMessages", query="在庫同期")
        channels = {item["channel_id"] for item in result.items}
        assert "D0TANAKA" not in channels and "C0MPIM" not in channels, answer_channel
        assert "パスワード" not in json.dumps(result.items, ensure_ascii=False)
        assert result.notes == [] and result.total == len(result.items)  # no trace of what was left out
    # the fake did return them: the filter, not the fake, keeps them out
    raw = fake.calls("search.messages")
    assert len(raw) == 3


def test_search_private_channel_only_when_the_answer_goes_there(fake: FakeSlack, sleeps: list[float]) -> None:
    elsewhere = run(context(fake, sleeps, answer_channel="C0ECSUP"), "searchMessages", query="障害対応メモ")
    assert elsewhere.status == "ok" and elsewhere.items == []
    there = run(context(fake, sleeps, answer_channel="C0SECRET"), "searchMessages", query="障害対応メモ")
    assert [(i["channel_id"], i.get("private")) for i in there.items] == [("C0SECRET", True)]


def test_search_modifiers_reach_slack_unchanged(fake: FakeSlack, sleeps: list[float]) -> None:
    ctx = context(fake, sleeps)
    from_suzuki = run(ctx, "searchMessages", query="在庫同期 in:#ec-support from:@suzuki")
    assert [(i["author"], i["channel"]) for i in from_suzuki.items] == [("鈴木", "#ec-support")]
    assert len(run(ctx, "searchMessages", query="在庫同期 in:#ec-support").items) == 3
    assert run(ctx, "searchMessages", query="在庫同期 after:2025-01-02").items == []
    assert len(run(ctx, "searchMessages", query="在庫同期 on:2025-01-02 in:#ec-support").items) == 3
    assert fake.calls("search.messages")[0].params["query"] == "在庫同期 in:#ec-support from:@suzuki"


def test_sample_workspace_end_to_end() -> None:
    with FakeSlack(sample_workspace()) as fake:
        ctx = context(fake, [], answer_channel="C0ECSUP")
        found = run(ctx, "searchMessages", query="在庫同期")
        assert {item["channel"] for item in found.items} == {"#ec-support"}
        thread = run(ctx, "getThreadMessages", url=found.items[-1]["url"])
        assert [item["author"] for item in thread.items] == ["田中", "鈴木"]


def test_search_count_is_passed_and_bounded(ws: Workspace, fake: FakeSlack, sleeps: list[float]) -> None:
    for n in range(30):
        ws.post("C0GENERAL", f"バッチ結果 {n}", user="U0TANAKA")
    result = run(context(fake, sleeps), "searchMessages", query="バッチ結果", count=5)
    assert len(result.items) == 5 and result.total == 30
    assert fake.calls("search.messages")[-1].params["count"] == "100"  # a full page: room for hidden matches
    assert any("more than 5 matches" in note for note in result.notes)
    too_many = run(context(fake, sleeps), "searchMessages", query="バッチ結果", count=500)
    assert too_many.is_error and "count" in (too_many.message or "")


def test_secrets_in_messages_are_masked(ws: Workspace, fake: FakeSlack, sleeps: list[float]) -> None:
    ws.post("C0GENERAL", f"設定値メモ token {SECRET_TOKEN} と {SECRET_AWS}", user="U0TANAKA",
            ts="1735790000.000001")
    ctx = context(fake, sleeps)
    for result in (run(ctx, "searchMessages", query="設定値メモ"),
                   run(ctx, "getConversationHistory", channel="C0GENERAL"),
                   run(ctx, "getThreadMessages", channel="C0GENERAL", ts="1735790000.000001")):
        dumped = result.to_json()
        assert result.status == "ok" and "設定値メモ" in dumped
        assert SECRET_TOKEN not in dumped and SECRET_AWS not in dumped and "[REDACTED]" in dumped


# -- getThreadMessages --------------------------------------------------------------------------------------
def test_thread_by_permalink_parent_first_with_names_and_links(ws: Workspace, fake: FakeSlack,
                                                              sleeps: list[float]) -> None:
    url = ws.permalink("C0ECSUP", "1735779660.000001")
    result = run(context(fake, sleeps), "getThreadMessages", url=url)
    assert result.status == "ok", result.message
    assert [i["ts"] for i in result.items] == ["1735779660.000001", "1735779720.000002", "1735779780.000003"]
    assert [i["author"] for i in result.items] == ["田中", "鈴木", "田中"]
    assert result.items[0]["url"] == url
    assert result.items[1]["url"].endswith("?thread_ts=1735779660.000001&cid=C0ECSUP")
    assert result.items[1]["text"] == "@田中 さん、在庫同期の手順書 (https://wiki.example/sync) を見てください"
    assert result.items[0]["reply_count"] == 2 and result.items[0]["time"] == "2025-01-02T10:01:00+09:00"


def test_thread_from_a_reply_link_reads_the_whole_thread(ws: Workspace, fake: FakeSlack,
                                                         sleeps: list[float]) -> None:
    url = ws.permalink("C0ECSUP", "1735779780.000003")
    assert "thread_ts=" in url
    result = run(context(fake, sleeps), "getThreadMessages", url=url)
    assert len(result.items) == 3
    assert fake.calls("conversations.replies")[-1].params["ts"] == "1735779660.000001"


def test_thread_by_channel_name_and_ts(fake: FakeSlack, sleeps: list[float]) -> None:
    result = run(context(fake, sleeps), "getThreadMessages", channel="#ec-support", ts="1735779660.000001")
    assert result.status == "ok" and len(result.items) == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "give a message link"),
        ({"channel": "C0ECSUP"}, "give a message link"),
        ({"channel": "C0ECSUP", "ts": "yesterday"}, "not a Slack timestamp"),
        ({"url": "https://example.com/nope"}, "not a Slack message link"),
        ({"url": "https://helpbot-test.slack.com/archives/C0ECSUP/p1735779660000001", "ts": "1735779720.000002"},
         "different messages"),
        ({"channel": "C0ECSUP", "ts": "1735000000.000000"}, "thread_not_found"),
        ({"channel": "#no-such-channel", "ts": "1735779660.000001"}, "no readable channel '#no-such-channel'"),
    ],
)
def test_thread_bad_input_is_a_clear_error(fake: FakeSlack, sleeps: list[float], arguments: dict[str, str],
                                           message: str) -> None:
    result = run(context(fake, sleeps), "getThreadMessages", **arguments)
    assert result.is_error and message in (result.message or "")


def test_thread_in_a_dm_is_refused_even_when_answering_in_that_dm(ws: Workspace, fake: FakeSlack,
                                                                  sleeps: list[float]) -> None:
    url = ws.permalink("D0TANAKA", "1735779960.000007")
    result = run(context(fake, sleeps, answer_channel="D0TANAKA"), "getThreadMessages", url=url)
    assert result.is_error and result.message == unknown_channel_message("D0TANAKA")
    assert fake.calls("conversations.replies") == []


def test_group_dm_is_refused_by_its_is_mpim_flag_even_when_answering_there(fake: FakeSlack,
                                                                           sleeps: list[float]) -> None:
    ctx = context(fake, sleeps, answer_channel="C0MPIM")
    for result in (run(ctx, "getThreadMessages", channel="C0MPIM", ts="1735780020.000008"),
                   run(ctx, "getConversationHistory", channel="C0MPIM")):
        assert result.is_error and "no readable channel 'C0MPIM'" in (result.message or "")
    assert fake.calls("conversations.replies") == [] and fake.calls("conversations.history") == []


def test_private_thread_only_when_answering_in_that_channel(fake: FakeSlack, sleeps: list[float]) -> None:
    refused = run(context(fake, sleeps, answer_channel="C0ECSUP"), "getThreadMessages",
                  channel="C0SECRET", ts="1735779900.000005")
    assert refused.is_error and refused.message == unknown_channel_message("C0SECRET")
    assert fake.calls("conversations.replies") == []
    allowed = run(context(fake, sleeps, answer_channel="C0SECRET"), "getThreadMessages",
                  channel="C0SECRET", ts="1735779900.000005")
    assert allowed.status == "ok" and texts(allowed) == ["在庫同期の障害対応メモ（社内限定）"]


def test_channel_privacy_is_looked_up_once_per_client(fake: FakeSlack, sleeps: list[float]) -> None:
    ctx = context(fake, sleeps, answer_channel="C0SECRET")
    for _ in range(3):
        assert run(ctx, "getConversationHistory", channel="C0SECRET").status == "ok"
    assert len(fake.calls("conversations.info")) == 1
    assert len(fake.calls("auth.test")) == 1


def test_long_thread_keeps_the_parent_and_the_latest_replies(ws: Workspace, fake: FakeSlack,
                                                             sleeps: list[float]) -> None:
    parent = ws.post("C0GENERAL", "長いスレッドの親", user="U0TANAKA")
    for n in range(30):
        ws.post("C0GENERAL", f"返信 {n}", user="U0SUZUKI", thread_ts=parent.ts)
    result = run(context(fake, sleeps, limits=Limits(max_items=10)), "getThreadMessages",
                 channel="C0GENERAL", ts=parent.ts)
    assert texts(result) == ["長いスレッドの親"] + [f"返信 {n}" for n in range(21, 30)]
    assert result.total == 31 and any("showing the parent and the latest 9" in n for n in result.notes)


# -- getConversationHistory ---------------------------------------------------------------------------------
def test_history_newest_first_with_limit_and_window(fake: FakeSlack, sleeps: list[float]) -> None:
    ctx = context(fake, sleeps)
    result = run(ctx, "getConversationHistory", channel="C0ECSUP")
    assert texts(result) == ["楽天の注文取込は15分ごとです", "在庫同期が遅れています。Shopify 側の確認手順は？"]
    assert result.items[1]["reply_count"] == 2
    limited = run(ctx, "getConversationHistory", channel="#ec-support", limit=1)
    assert len(limited.items) == 1 and any("latest=1735783200.000004" in n for n in limited.notes)
    window = run(ctx, "getConversationHistory", channel="C0ECSUP", oldest="2025-01-02T10:30",
                 latest="2025-01-02 12:00")
    assert texts(window) == ["楽天の注文取込は15分ごとです"]
    params = fake.calls("conversations.history")[-1].params
    assert params["oldest"] == "1735781400.000000" and params["inclusive"] == "1"
    bad = run(ctx, "getConversationHistory", channel="C0ECSUP", oldest="last week")
    assert bad.is_error and "oldest" in (bad.message or "")


@pytest.mark.parametrize(("channel", "error"), [("C0NOBOT", "not_in_channel"), ("C0NOPE", "no readable channel"),
                                                ("C0HIDDEN", "no readable channel")])
def test_history_slack_errors_are_errors_not_empty_successes(fake: FakeSlack, sleeps: list[float],
                                                             channel: str, error: str) -> None:
    result = run(context(fake, sleeps, answer_channel=channel), "getConversationHistory", channel=channel)
    assert result.is_error and error in (result.message or "")


def test_history_private_and_dm_rules(fake: FakeSlack, sleeps: list[float]) -> None:
    refused = run(context(fake, sleeps), "getConversationHistory", channel="#secret-ops")
    assert refused.is_error and refused.message == unknown_channel_message("#secret-ops")
    allowed = run(context(fake, sleeps, answer_channel="C0SECRET"), "getConversationHistory", channel="#secret-ops")
    assert texts(allowed) == ["在庫同期の障害対応メモ（社内限定）"]
    dm = run(context(fake, sleeps, answer_channel="D0TANAKA"), "getConversationHistory", channel="D0TANAKA")
    assert dm.is_error and dm.message == unknown_channel_message("D0TANAKA")
    assert all(call.params.get("channel") != "D0TANAKA" for call in fake.requests)


def unknown_channel_message(channel: str) -> str | None:
    """What a read of a channel that does not exist at all says, written as the caller wrote ``channel``."""
    ws = Workspace()
    ws.add_channel("C0ONLY", "only", members=set())
    with FakeSlack(ws) as empty:
        missing = run(context(empty, []), "getConversationHistory", channel="C0ZZZZ")
    assert missing.is_error
    return (missing.message or "").replace("'C0ZZZZ'", repr(channel))


@pytest.mark.parametrize("channel", ["C0SECRET", "#secret-ops", "C0HIDDEN", "#no-bot-here", "D0TANAKA", "C0MPIM",
                                     "#nope"])
@pytest.mark.parametrize("tool", ["getConversationHistory", "getThreadMessages"])
def test_a_refused_read_says_what_an_unknown_channel_says(fake: FakeSlack, sleeps: list[float], channel: str,
                                                          tool: str) -> None:
    """Nothing tells a private channel (or a DM) from one that does not exist: not its name, not the wording."""
    args = {"channel": channel} if tool == "getConversationHistory" else {"channel": channel,
                                                                         "ts": "1735779900.000005"}
    refused = run(context(fake, sleeps, answer_channel="C0ECSUP"), tool, **args)
    assert refused.is_error and refused.message == unknown_channel_message(channel)
    for hidden in ("secret-ops", "no-bot-here", "mpdm", "社内限定", "C0SECRET"):
        assert hidden not in refused.to_json() or hidden in channel


HIDDEN_PLACES = ["C0SECRET", "C0HIDDEN", "D0TANAKA", "C0MPIM"]


@pytest.mark.parametrize("hits", [1, 3, 25, 150])
@pytest.mark.parametrize("answer_channel", [None, "C0ECSUP", "D0TANAKA", "C0MPIM"])
def test_search_whose_only_hits_are_hidden_is_a_search_without_hits(ws: Workspace, fake: FakeSlack,
                                                                    sleeps: list[float], hits: int,
                                                                    answer_channel: str | None) -> None:
    """The oracle: searching 「暗証番号は 4<d>」 digit by digit must tell the model nothing. Whole results compared."""
    for n in range(hits):
        ws.post(HIDDEN_PLACES[n % len(HIDDEN_PLACES)], f"暗証番号は 4711 です {n}", user="U0TANAKA")
    ctx = context(fake, sleeps, answer_channel=answer_channel)
    for count in (1, 5, 20):
        only_hidden = run(ctx, "searchMessages", query="暗証番号は 4711", count=count)
        nothing = run(ctx, "searchMessages", query="暗証番号は 4712", count=count)
        assert only_hidden.to_dict() == nothing.to_dict() == {"status": "ok", "tool": "slack_searchMessages",
                                                              "total": 0}
    # and Slack did send the hidden matches: the filter, not the fake, keeps them out
    raw = WebClient(token=USER_TOKEN, base_url=fake.url + "/").search_messages(query="暗証番号は 4711", count=100)
    assert raw.data["messages"]["matches"]


def test_hidden_hits_next_to_visible_ones_change_nothing(ws: Workspace, fake: FakeSlack,
                                                         sleeps: list[float]) -> None:
    ctx = context(fake, sleeps, answer_channel="C0ECSUP")
    for n in range(3):
        ws.post("C0GENERAL", f"棚卸し 手順 {n}", user="U0TANAKA", ts=f"17357{n}0000.000001")
    before = run(ctx, "searchMessages", query="棚卸し", count=5).to_dict()
    for n, place in enumerate(HIDDEN_PLACES):
        ws.post(place, f"棚卸し 内緒 {n}", user="U0TANAKA", ts=f"17358{n}0000.000001")
    assert run(ctx, "searchMessages", query="棚卸し", count=5).to_dict() == before


def test_an_answer_in_a_private_channel_still_reads_it(fake: FakeSlack, sleeps: list[float]) -> None:
    ctx = context(fake, sleeps, answer_channel="C0SECRET")
    found = run(ctx, "searchMessages", query="障害対応メモ")
    assert [i["channel_id"] for i in found.items] == ["C0SECRET"] and found.total == 1
    assert texts(run(ctx, "getConversationHistory", channel="#secret-ops")) == ["在庫同期の障害対応メモ（社内限定）"]


# -- getChannels --------------------------------------------------------------------------------------------
def test_channels_public_and_the_answer_channel_never_dms(fake: FakeSlack, sleeps: list[float]) -> None:
    result = run(context(fake, sleeps, answer_channel="C0SECRET"), "getChannels")
    by_id = {item["id"]: item for item in result.items}
    assert set(by_id) == {"C0ECSUP", "C0GENERAL", "C0SECRET", "C0NOBOT"}
    assert by_id["C0SECRET"]["private"] is True
    assert "private" not in by_id["C0ECSUP"]
    assert by_id["C0ECSUP"]["title"] == "#ec-support" and by_id["C0ECSUP"]["purpose"].startswith("EC連携")
    assert by_id["C0ECSUP"]["url"] == "https://helpbot-test.slack.com/archives/C0ECSUP"
    filtered = run(context(fake, sleeps), "getChannels", query="shopify")
    assert [i["id"] for i in filtered.items] == ["C0ECSUP"]


@pytest.mark.parametrize("answer_channel", [None, "C0ECSUP", "D0TANAKA"])
def test_other_private_channels_are_not_even_listed(fake: FakeSlack, sleeps: list[float],
                                                    answer_channel: str | None) -> None:
    """Their names and purposes are private too, wherever the answer goes."""
    ctx = context(fake, sleeps, answer_channel=answer_channel)
    listed = run(ctx, "getChannels")
    assert listed.status == "ok" and "C0ECSUP" in {i["id"] for i in listed.items}
    assert "C0SECRET" not in {i["id"] for i in listed.items}
    dumped = listed.to_json() + run(ctx, "getChannels", query="secret").to_json()
    assert "secret-ops" not in dumped and "社内限定" not in dumped
    assert run(ctx, "getChannels", query="secret").items == []
    assert "private_channel" in fake.calls("conversations.list")[0].params["types"]  # Slack did send it


def test_channel_list_is_paginated(ws: Workspace, fake: FakeSlack, sleeps: list[float]) -> None:
    for n in range(250):
        ws.add_channel(f"C1{n:04d}", f"team-{n:04d}")
    result = run(context(fake, sleeps), "getChannels", query="team-0249")
    assert [i["id"] for i in result.items] == ["C10249"]
    assert len(fake.calls("conversations.list")) == 2


# -- user names are cosmetic: never worth a wait -------------------------------------------------------------
def test_a_rate_limited_users_info_is_asked_once_and_never_waited_for(ws: Workspace, fake: FakeSlack,
                                                                      sleeps: list[float]) -> None:
    for n in range(6):
        user = f"U0MEMBER{n}"
        ws.add_user(user, f"member{n}")
        ws.post("C0GENERAL", f"<@U0TANAKA> 在庫の件 {n}", user=user)
    fake.fail("users.info", status=429, retry_after=25, times=1000)
    ctx = context(fake, sleeps)
    first = run(ctx, "getConversationHistory", channel="C0GENERAL", limit=10)
    again = run(ctx, "getConversationHistory", channel="C0GENERAL", limit=10)
    assert first.status == "ok" and again.status == "ok"
    assert {item["author"] for item in first.items} == {f"U0MEMBER{n}" for n in range(6)}  # the ids stand in
    assert all(item["text"].startswith("@U0TANAKA") for item in first.items)
    assert len(fake.calls("users.info")) == 1 and sleeps == []


def test_a_failed_user_lookup_is_remembered(ws: Workspace, fake: FakeSlack, sleeps: list[float]) -> None:
    for n in range(4):
        ws.post("C0GENERAL", f"退職済みユーザーの投稿 {n}", user="U0GONE")  # users.info -> user_not_found
    ctx = context(fake, sleeps)
    for _ in range(2):
        result = run(ctx, "getConversationHistory", channel="C0GENERAL")
        assert result.status == "ok" and result.items[0]["author"] == "U0GONE"
    assert [c.params["user"] for c in fake.calls("users.info")].count("U0GONE") == 1


def test_a_message_of_500_mentions_looks_up_at_most_max_name_lookups_people(ws: Workspace, fake: FakeSlack,
                                                                            sleeps: list[float]) -> None:
    """Each distinct <@U…> was one users.info: a 40,000-character message holds 3,000, and Slack's Tier 4 answers
    about 100 a minute. Past the bound a mention reads as its id, as after a failed lookup -- ahead or not."""
    people = [f"U0P{n:04d}" for n in range(500)]
    for n, user in enumerate(people):
        ws.add_user(user, f"person{n}")
    message = {"user": people[0], "text": " ".join(f"<@{user}>" for user in people)}
    ws.post("C0GENERAL", message["text"], user=message["user"])
    ctx = context(fake, sleeps, limits=Limits(max_field_chars=100_000, max_result_chars=100_000))
    for _ in range(2):
        text = run(ctx, "getConversationHistory", channel="C0GENERAL", limit=1).items[0]["text"]
        assert text.split(" ")[:2] == ["@person0", "@person1"] and text.endswith(" @U0P0499")
    assert len(fake.calls("users.info")) == MAX_NAME_LOOKUPS and sleeps == []
    ahead = context(fake, sleeps)  # the front's way: the thread's names started at once, authors first
    names_ahead(ahead, [message, {"user": "U0SUZUKI", "text": "返信です"}])
    assert plain(ahead, message["text"]).split(" ")[-1] == "@U0P0499"
    assert person(ahead, "U0SUZUKI")["name"] == "suzuki"  # the reply's author was not crowded out
    assert len(fake.calls("users.info")) == 2 * MAX_NAME_LOOKUPS
    ctx.clock.advance(NAME_LOOKUPS_FOR_S)  # a long-lived MCP server's client: a minute on, names again
    words = run(ctx, "getConversationHistory", channel="C0GENERAL", limit=1).items[0]["text"].split(" ")
    assert words[2 * MAX_NAME_LOOKUPS - 1:2 * MAX_NAME_LOOKUPS + 1] == ["@person99", "@U0P0100"]
    assert len(fake.calls("users.info")) == 3 * MAX_NAME_LOOKUPS


def test_slack_retries_never_wait_past_the_calls_deadline(fake: FakeSlack) -> None:
    """HELPBOT_TOOL_BUDGET_S bounds the whole call: a Retry-After that does not fit ends the retries at once."""
    clock = FakeClock(wall=1_800_000_000.0)
    config = load_config(env_for(fake))
    assert config is not None
    ctx = ToolContext(client=make_client(config), config=config, limits=Limits(budget_s=30), clock=clock)
    fake.fail("search.messages", status=429, retry_after=20, times=10)
    result = run(ctx, "searchMessages", query="在庫")
    assert result.is_error and "rate limit" in (result.message or "")
    assert len(clock.sleeps) == 1 and 20 <= clock.sleeps[0] < 20.5  # the second 20 s wait would pass 30 s
    assert len(fake.calls("search.messages")) == 2


def test_server_error_backoff_is_cut_to_the_time_left(fake: FakeSlack) -> None:
    clock = FakeClock(wall=1_800_000_000.0)
    config = load_config(env_for(fake))
    assert config is not None
    ctx = ToolContext(client=make_client(config), config=config, clock=clock, deadline=clock.monotonic() + 0.25)
    fake.fail("conversations.history", status=503, times=10)
    result = run(ctx, "getConversationHistory", channel="C0ECSUP")
    assert result.is_error and sum(clock.sleeps) <= 0.25 + 1e-9


class _OneSearch:
    """A stand-in for the user WebClient (a seam, not a patch): answers search.messages with ``matches``."""

    def __init__(self, matches: list[dict[str, Any]]):
        self.matches = matches

    def search_messages(self, **params: Any) -> Any:
        data = {"ok": True, "messages": {"total": len(self.matches), "matches": self.matches}}
        return type("Response", (), {"data": data})()


def test_odd_search_matches_are_left_out_or_read_not_fatal() -> None:
    """Matches without a Slack ts are left out by client.call, a channel that is no object is not visible, and
    files that are no objects or a permalink that is no URL are read: each raised past the search (KeyError,
    OverflowError, OSError, TypeError, ValueError) or was counted in a note about Slack's ts."""
    channel = {"id": "C0ECSUP", "name": "ec-support", "is_private": False}
    good = {"channel": channel, "ts": "1735783200.000004", "text": "楽天の注文取込", "username": "suzuki",
            "permalink": "https://helpbot-test.slack.com/archives/C0ECSUP/p1735783200000004"}
    odd = {**good, "files": [5, None], "permalink": "http://[x?thread_ts=1735783200.000001"}
    matches = [{**good, "ts": ""}, {**good, "ts": None}, {k: v for k, v in good.items() if k != "ts"},
               {**good, "ts": "1e20"}, {**good, "ts": "-1e18"}, {**good, "channel": "C0ECSUP"}, odd, good]
    config = SlackConfig(api_url=DEFAULT_API_URL, user_token=USER_TOKEN)
    clients = SlackClients(config=config, bot=None, user=_OneSearch(matches))  # type: ignore[arg-type]
    result = run(ToolContext(client=clients, config=config), "searchMessages", query="注文")
    assert result.status == "ok", result.message
    assert [item["url"] for item in result.items] == [odd["permalink"], good["permalink"]] and not result.notes
    assert result.items[0]["thread_ts"] == "1735783200.000001" and "files" not in result.items[0]


def test_a_token_near_the_title_cut_is_masked_in_the_title_too(ws: Workspace, fake: FakeSlack,
                                                               sleeps: list[float]) -> None:
    prefix = "メモ: 本番環境の設定値は以下のとおりです。必ず確認してください "  # the title keeps 40 characters:
    assert len(prefix) == 33  # 7 of them would be the token's, too few for the pattern once cut
    ws.post("C0GENERAL", prefix + SECRET_TOKEN, user="U0TANAKA", ts="1735790000.000001")
    result = run(context(fake, sleeps), "getConversationHistory", channel="C0GENERAL")
    assert result.status == "ok" and "xoxb" not in result.to_json() and "[REDAC" in result.items[0]["title"]


# -- rate limits, outages, timeouts -------------------------------------------------------------------------
def test_429_then_success_honours_retry_after_through_the_injected_sleep(fake: FakeSlack,
                                                                         sleeps: list[float]) -> None:
    fake.fail("search.messages", status=429, retry_after=3, times=1)
    result = run(context(fake, sleeps), "searchMessages", query="注文取込")
    assert result.status == "ok" and len(result.items) == 1
    assert [c.status for c in fake.calls("search.messages")] == [429, 200]
    assert len(sleeps) == 1 and 3 <= sleeps[0] < 3.5


def test_rate_limit_that_persists_is_a_bounded_error(fake: FakeSlack, sleeps: list[float]) -> None:
    fake.fail("conversations.history", status=429, retry_after=2, times=50)
    result = run(context(fake, sleeps), "getConversationHistory", channel="C0ECSUP")
    assert result.is_error and "rate limit" in (result.message or "")
    assert len(sleeps) == 2 and len(fake.calls("conversations.history")) == 3


def test_a_retry_after_longer_than_the_budget_is_not_waited_for(fake: FakeSlack, sleeps: list[float]) -> None:
    fake.fail("search.messages", status=429, retry_after=600, times=1)
    result = run(context(fake, sleeps), "searchMessages", query="在庫")
    assert result.is_error and "600" in (result.message or "")
    assert sleeps == [] and len(fake.calls("search.messages")) == 1


@pytest.mark.parametrize("retry_after", ["Infinity", "1e999", "9" * 400])
def test_a_retry_after_past_every_float_is_a_rate_limit_not_a_crash(fake: FakeSlack, sleeps: list[float],
                                                                     retry_after: str) -> None:
    """Slack's 429 asking to wait forever: the agent reads the thread through ``call`` (it catches ToolError);
    the message's ``math.ceil`` of an infinite wait raised OverflowError past it, a traceback of the run."""
    from mcp_lib.platforms.slack.client import call

    fake.fail("conversations.history", status=429, retry_after=retry_after, times=50)  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="rate limit"):
        call(context(fake, sleeps), "conversations.history", channel="C0ECSUP")


def test_server_errors_are_retried_with_backoff_then_succeed(fake: FakeSlack, sleeps: list[float]) -> None:
    fake.fail("conversations.replies", status=500, times=1)
    fake.fail("conversations.replies", status=503, times=1)
    result = run(context(fake, sleeps), "getThreadMessages", channel="C0ECSUP", ts="1735779660.000001")
    assert result.status == "ok" and len(result.items) == 3
    assert len(sleeps) == 2 and all(0 < s < 5 for s in sleeps)


def test_an_outage_is_an_error_result_not_a_crash(fake: FakeSlack, sleeps: list[float]) -> None:
    fake.fail("*", status=500, times=100)
    result = run(context(fake, sleeps), "getChannels")
    assert result.is_error and "unavailable" in (result.message or "") and "500" in (result.message or "")
    assert len(sleeps) == 2


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_over_the_bound_is_an_error_result(fake: FakeSlack, sleeps: list[float], status: int) -> None:
    """SLACK_API_URL on a file server, a broken edge's error page: at most 8 MB is read, then the call says so
    (slack-sdk reads an answer whole, and its caller an error's)."""
    fake.flood("conversations.history", status=status)
    result = run(context(fake, sleeps), "getConversationHistory", channel="C0ECSUP")
    assert result.is_error and "Slack sent an answer of more than 8 MB" in (result.message or "")
    assert sleeps == [] and len(fake.calls("conversations.history")) == 1


@pytest.mark.parametrize("chunked", [False, True])
def test_an_answer_cut_short_is_a_failed_call_and_a_name_lookup_cut_short_shows_the_id(
        fake: FakeSlack, sleeps: list[float], chunked: bool) -> None:
    """A body that stops short (a dropped connection, a proxy's): slack-sdk's retry handlers parse a body that
    begins with "{" (JSONDecodeError) and http.client raises IncompleteRead in a chunk, neither an OSError: they went
    past request()'s errors, so one name lookup cut short failed the whole read (in the front's question, the run)
    where the person is shown by id, and a read gave no line that says what to do."""
    fake.cut("users.info", chunked=chunked)
    ctx = context(fake, sleeps)
    result = run(ctx, "getConversationHistory", channel="C0ECSUP", limit=1)
    assert result.status == "ok", result.message
    assert result.items[0]["author"] == fake.workspace.history("C0ECSUP")[-1].user
    fake.cut("conversations.history", chunked=chunked)
    result = run(ctx, "getConversationHistory", channel="C0ECSUP")
    said = "cannot reach Slack at" if chunked else "Slack answered conversations.history with broken JSON"
    assert result.is_error and said in (result.message or ""), result.message


def test_a_gzip_bomb_is_never_inflated(fake: FakeSlack, sleeps: list[float]) -> None:
    """urllib asks for no compression and inflates none: a gzip bomb is read as its 33 KB, an answer not JSON."""
    fake.flood("conversations.history", gzipped=True)
    result = run(context(fake, sleeps), "getConversationHistory", channel="C0ECSUP")
    assert result.is_error and "non-JSON" in (result.message or ""), result.message


def test_unreachable_slack_is_retried_once_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = load_config({"SLACK_API_URL": f"http://127.0.0.1:{port}/api", "SLACK_BOT_TOKEN": BOT_TOKEN})
    assert config is not None
    ctx = ToolContext(client=make_client(config), config=config, clock=recording(sleeps))
    result = run(ctx, "getChannels")
    assert result.is_error and "cannot reach Slack" in (result.message or "")
    assert len(sleeps) == 1


def test_a_slow_answer_times_out_as_an_error(fake: FakeSlack, sleeps: list[float]) -> None:
    fake.slow("conversations.list", seconds=5)
    config = SlackConfig(api_url=fake.url, bot_token=BOT_TOKEN, timeout_s=1)
    result = run(ToolContext(client=make_client(config), config=config, clock=recording(sleeps)), "getChannels")
    assert result.is_error and "did not answer" in (result.message or "")


def test_ok_false_from_any_method_is_an_error(fake: FakeSlack, sleeps: list[float]) -> None:
    fake.fail("conversations.replies", error="fatal_error")
    result = run(context(fake, sleeps), "getThreadMessages", channel="C0ECSUP", ts="1735779660.000001")
    assert result.is_error and "fatal_error" in (result.message or "")


# -- read-only, wiring --------------------------------------------------------------------------------------
def test_the_platform_is_read_only_and_never_writes(fake: FakeSlack, sleeps: list[float]) -> None:
    assert set(PLATFORM.tools) == {"searchMessages", "getThreadMessages", "getConversationHistory", "getChannels"}
    assert all(tool.read_only for tool in PLATFORM.tools.values())
    ctx = context(fake, sleeps, answer_channel="C0SECRET")
    run(ctx, "searchMessages", query="在庫")
    run(ctx, "getThreadMessages", channel="C0ECSUP", ts="1735779660.000001")
    run(ctx, "getConversationHistory", channel="C0SECRET")
    run(ctx, "getChannels")
    writes = {"chat.postMessage", "chat.update", "chat.delete", "reactions.add", "reactions.remove"}
    assert {c.method for c in fake.requests}.isdisjoint(writes)


def test_through_the_registry_and_get_mcp(fake: FakeSlack) -> None:
    registry = Registry(env=env_for(fake))  # the real make_client, built from the environment
    assert registry.is_enabled("slack")
    result = registry.get_mcp("slack").functions["searchMessages"]("注文取込", count=3)
    assert result.status == "ok" and result.tool == "slack_searchMessages" and result.items[0]["url"]
    assert [t.wire_name for t in registry.tools(only=["slack"])] == [
        "slack_searchMessages", "slack_getThreadMessages", "slack_getConversationHistory", "slack_getChannels"]


def test_cli_search_prints_items_with_url_and_title(fake: FakeSlack, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in env_for(fake).items():
        monkeypatch.setenv(key, value)
    assert mcp_lib_main(["slack:searchMessages", "query=在庫"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["items"] and all(item["url"] and item["title"] for item in result["items"])


# -- the fake itself: the write methods the front relies on ------------------------------------------------
@pytest.fixture
def bot(fake: FakeSlack) -> WebClient:
    return WebClient(token=BOT_TOKEN, base_url=fake.url, retry_handlers=[])


def slack_error(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        call()
    return str(caught.value.response["error"])


def test_fake_post_in_thread_with_metadata_update_and_delete(ws: Workspace, bot: WebClient) -> None:
    posted = bot.chat_postMessage(channel="C0ECSUP", thread_ts="1735779720.000002", text="調べています…",
                                  metadata={"event_type": "helpbot_answer", "event_payload": {"q": "1"}})
    assert posted["ok"] and posted["channel"] == "C0ECSUP"
    message = posted["message"]
    assert message["thread_ts"] == "1735779660.000001"  # a reply's ts threads under its parent
    assert message["bot_id"] == ws.bot_id and message["user"] == ws.bot_user_id
    assert message["metadata"]["event_type"] == "helpbot_answer"
    replies = bot.conversations_replies(channel="C0ECSUP", ts="1735779660.000001")["messages"]
    assert replies[-1]["ts"] == posted["ts"] and "metadata" not in replies[-1]
    with_meta = bot.conversations_replies(channel="C0ECSUP", ts="1735779660.000001", include_all_metadata=True)
    assert with_meta["messages"][-1]["metadata"] == {"event_type": "helpbot_answer", "event_payload": {"q": "1"}}

    blocks = [{"type": "markdown", "text": "**答え**"}]
    updated = bot.chat_update(channel="C0ECSUP", ts=posted["ts"], text="答え", blocks=blocks)
    assert updated["message"]["blocks"] == blocks and updated["message"]["edited"]["user"] == ws.bot_user_id
    stored = ws.message("C0ECSUP", posted["ts"])
    assert stored is not None and stored.text == "答え" and stored.metadata is not None
    assert slack_error(lambda: bot.chat_update(channel="C0ECSUP", ts="1735779660.000001", text="x")) \
        == "cant_update_message"
    assert bot.chat_delete(channel="C0ECSUP", ts=posted["ts"])["ok"]
    assert ws.message("C0ECSUP", posted["ts"]) is None
    assert slack_error(lambda: bot.chat_delete(channel="C0ECSUP", ts=posted["ts"])) == "message_not_found"


def test_fake_reactions(ws: Workspace, bot: WebClient) -> None:
    ts = "1735779660.000001"
    assert bot.reactions_add(channel="C0ECSUP", name="eyes", timestamp=ts)["ok"]
    assert slack_error(lambda: bot.reactions_add(channel="C0ECSUP", name="eyes", timestamp=ts)) == "already_reacted"
    got = bot.reactions_get(channel="C0ECSUP", timestamp=ts)
    assert got["type"] == "message"
    assert got["message"]["reactions"] == [{"name": "eyes", "users": [ws.bot_user_id], "count": 1}]
    assert bot.reactions_remove(channel="C0ECSUP", name="eyes", timestamp=ts)["ok"]
    assert ws.reactions("C0ECSUP", ts) == {}
    assert slack_error(lambda: bot.reactions_remove(channel="C0ECSUP", name="eyes", timestamp=ts)) == "no_reaction"
    assert slack_error(lambda: bot.reactions_add(channel="C0ECSUP", name=":eyes:", timestamp=ts)) == "invalid_name"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"channel": "C0ECSUP"}, "no_text"),
        ({"channel": "C0ECSUP", "text": "x", "thread_ts": "1000000000.000000"}, "thread_not_found"),
        ({"channel": "C0NOBOT", "text": "x"}, "not_in_channel"),
        ({"channel": "C0HIDDEN", "text": "x"}, "channel_not_found"),
        ({"channel": "C0ECSUP", "blocks": [{"type": "markdown", "text": "あ" * 12001}]}, "invalid_blocks"),
        ({"channel": "C0ECSUP", "text": "x" * 40001}, "msg_too_long"),
        ({"channel": "C0ECSUP", "text": "x", "metadata": {"event_payload": {}}}, "invalid_metadata_format"),
    ],
)
@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing")
def test_fake_post_errors(bot: WebClient, arguments: dict[str, Any], error: str) -> None:
    assert slack_error(lambda: bot.chat_postMessage(**arguments)) == error


def test_fake_tokens_and_identity(ws: Workspace, fake: FakeSlack) -> None:
    user = WebClient(token=USER_TOKEN, base_url=fake.url)
    assert user.auth_test()["user_id"] == ws.owner_id and "bot_id" not in user.auth_test().data
    assert WebClient(token=BOT_TOKEN, base_url=fake.url).auth_test()["bot_id"] == ws.bot_id
    assert slack_error(lambda: WebClient(token="xoxb-nope", base_url=fake.url).auth_test()) == "invalid_auth"
    assert slack_error(lambda: WebClient(base_url=fake.url).auth_test()) == "not_authed"
    assert slack_error(lambda: user.chat_postMessage(channel="C0GENERAL", text="x")) == "missing_scope"
    user = WebClient(token=PERSON_TOKEN, base_url=fake.url)  # a person with every scope, not helpbot's token
    posted = user.chat_postMessage(channel="C0GENERAL", text="人として投稿")
    assert posted["message"]["user"] == ws.owner_id and "bot_id" not in posted["message"]
    permalink = user.chat_getPermalink(channel="C0ECSUP", message_ts="1735779720.000002")["permalink"]
    assert permalink == ("https://helpbot-test.slack.com/archives/C0ECSUP/p1735779720000002"
                         "?thread_ts=1735779660.000001&cid=C0ECSUP")


def crowded(visible: int, hidden: int) -> Workspace:
    """``visible`` matches in a public channel; ``hidden`` ones (DM, group DM, a private channel) ranked among
    and above them (same score, later or interleaved ts)."""
    ws = Workspace()
    ws.add_user("U0TANAKA", "tanaka")
    ws.add_channel("C0PUB", "public", members={"U0TANAKA"})
    ws.add_channel("C0PRIV", "private-ops", private=True, members={"U0TANAKA"})
    ws.add_im("D0OWNER", "U0TANAKA", with_user=ws.owner_id)
    ws.add_mpim("C0MPIM", ["U0TANAKA", ws.owner_id])
    for n in range(visible):
        ws.post("C0PUB", f"バッチ結果 {n}", user="U0TANAKA", ts=f"{1735700000 + 10 * n}.000000")
    places = ["D0OWNER", "C0PRIV", "C0MPIM"]
    for n in range(hidden):
        later = n % 2 == 0  # half above every visible match, half among them
        ts = f"{1735900000 + n}.000000" if later else f"{1735700005 + 10 * (n % max(visible, 1))}.000000"
        ws.post(places[n % 3], f"バッチ結果 秘密 {n}", user="U0TANAKA", ts=ts)
    return ws


@pytest.mark.parametrize(("visible", "hidden", "count"), [(150, 5, 20), (150, 30, 100), (130, 40, 100),
                                                          (99, 3, 100), (100, 1, 100), (260, 250, 50),
                                                          (0, 40, 20), (3, 120, 5)])
def test_hidden_matches_take_no_place_beside_visible_ones(visible: int, hidden: int, count: int) -> None:
    """hits-only-private ≡ no hits also with visible hits on the same page: the result (items, total, notes)
    is the one a workspace without the hidden matches gives -- they crowd no visible match out."""
    results = []
    for ws in (crowded(visible, hidden), crowded(visible, 0)):
        with FakeSlack(ws) as fake:
            result = run(context(fake, []), "searchMessages", query="バッチ結果", count=count)
            assert result.status == "ok", result.message
            results.append((result.items, result.total, result.notes))
    with_hidden, without = results
    assert with_hidden == without
    assert without[1] == min(visible, 100) and bool(without[0]) == bool(visible)
    assert "秘密" not in json.dumps(with_hidden, ensure_ascii=False)


def test_search_pages_are_bounded() -> None:
    """Past SEARCH_PAGES pages of hidden matches the paging stops: fewer show, nothing is said about why."""
    from mcp_lib.platforms.slack.reading import SEARCH_PAGES

    with FakeSlack(crowded(5, 2 * 100 * SEARCH_PAGES)) as fake:
        result = run(context(fake, []), "searchMessages", query="バッチ結果", count=5)
        assert len(fake.calls("search.messages")) == SEARCH_PAGES and result.notes == []
        assert "秘密" not in json.dumps(result.items, ensure_ascii=False)


# -- Slack's answers in shapes it does not document: the front reads through these, catching ToolError ------
class _Answering:
    """A WebClient stand-in whose every method answers ``{"ok": true, **answers[method]}``."""

    def __init__(self, answers: dict[str, dict[str, Any]]):
        self.answers = answers

    def __getattr__(self, name: str) -> Any:
        from types import SimpleNamespace

        return lambda **_: SimpleNamespace(data={"ok": True, **self.answers.get(name, {})})


def answering(answers: dict[str, dict[str, Any]]) -> ToolContext:
    from mcp_lib.platforms.slack.client import SlackClients, SlackConfig

    bot: Any = _Answering(answers)
    return ToolContext(client=SlackClients(config=SlackConfig(api_url="http://slack.invalid/"), bot=bot, user=None),
                       config=None)


@pytest.mark.parametrize("channel", [None, "C0ECSUP", ["C0ECSUP"]])
def test_conversations_info_without_a_channel_object_is_a_tool_error(channel: Any) -> None:
    """No ``channel``, or one that is no object: KeyError (or a string handed on as the info) went past the
    ToolError the front catches when it reads the reacted message's channel."""
    from mcp_lib.platforms.slack import channel_info

    answer = {} if channel is None else {"channel": channel}
    with pytest.raises(ToolError, match="no channel"):
        channel_info(answering({"conversations_info": answer}), "C0ECSUP")


@pytest.mark.parametrize("user", ["U0TANAKA", ["x"], {"profile": "x"}, {"profile": [1], "name": "tanaka"}])
def test_a_users_info_user_or_profile_that_is_no_object_names_by_id(user: Any) -> None:
    """users.info answering a string or a list where the user or its profile go: the mention is shown by what
    is readable (the name, else the id), not AttributeError in the front's ``plain``."""
    from mcp_lib.platforms.slack import plain, user_info

    ctx = answering({"users_info": {"user": user}})
    shown = plain(ctx, "<@U0ABCDEF1> さん")
    assert shown in ("@U0ABCDEF1 さん", "@tanaka さん") and isinstance(user_info(ctx, "U0ABCDEF1"), dict)


@pytest.mark.parametrize("odd", [{"ts": "1e20"}, {"ts": "-1e18"}, {"ts": "inf"}, {"ts": "9" * 400}, {"ts": ["1"]},
                                 {}, "x", None, 3, {"ts": "1735779660.000002", "thread_ts": "abc"},
                                 {"ts": "1735779660.000002", "latest_reply": 1735779660.5}])
def test_messages_without_a_slack_ts_are_left_out_of_every_read(odd: Any) -> None:
    """Slack's API documents a message as an object whose ts (thread_ts, latest_reply) is a string like
    1735779660.000001: float() of any other raised ValueError, OverflowError or OSError (errno 75) in the tools, the
    claim, the thread's context and the ratings, a list made vote's set of ts unhashable, a string named no one."""
    from mcp_lib.platforms.slack.client import call

    good = {"ts": "1735779660.000001", "thread_ts": "1735779660.000001", "text": "x"}
    ctx = answering({"conversations_replies": {"messages": [odd, good]}, "reactions_get": {"message": odd},
                     "conversations_history": {"messages": odd}})
    assert call(ctx, "conversations.replies", channel="C0ECSUP", ts=good["ts"])["messages"] == [good]
    assert "message" not in call(ctx, "reactions.get", channel="C0ECSUP", timestamp=good["ts"])
    assert call(ctx, "conversations.history", channel="C0ECSUP")["messages"] == []


@pytest.mark.parametrize("odd", [{"subtype": ["x"]}, {"subtype": {}}, {"files": 5}, {"files": "a.png"},
                                 {"reactions": 5}, {"reactions": ["help"]},
                                 {"reactions": [{"name": "help", "users": 5}]}, {"reply_users": 5}])
def test_messages_whose_other_fields_are_not_slacks_are_left_out_of_every_read(odd: dict[str, Any]) -> None:
    """A subtype that is no string (unhashable: answerable's and the context's ``in`` raised TypeError), files,
    reactions or their users, reply_users that are no lists (iterated: TypeError in the attachments, the front's
    reactor check, the ratings, the FAQ draft): what Slack never sends is left out, as a ts that is none."""
    from mcp_lib.platforms.slack.client import call

    good = {"ts": "1735779660.000001", "subtype": "thread_broadcast", "files": [], "reply_users": ["U0TANAKA"],
            "reactions": [{"name": "help", "users": ["U0TANAKA"], "count": 1}]}
    bad = {**good, "ts": "1735779660.000002", **odd}
    ctx = answering({"conversations_replies": {"messages": [bad, good]}, "reactions_get": {"message": bad}})
    assert call(ctx, "conversations.replies", channel="C0ECSUP", ts=good["ts"])["messages"] == [good]
    assert "message" not in call(ctx, "reactions.get", channel="C0ECSUP", timestamp=bad["ts"])


@pytest.mark.parametrize("odd", [[], "x", 5, {"next_cursor": ["c"]}, {"next_cursor": 5}])
def test_paging_that_is_not_slacks_is_the_last_page(odd: Any) -> None:
    """A ``response_metadata`` or search ``paging`` that is no object, a cursor that is no string, channels that
    are no objects (a proxy's; Slack sends none): ``.get`` of them raised AttributeError out of the tools, the
    thread's read and the ratings' scan. They read as the last page; such channels are left out."""
    from mcp_lib.platforms.slack.client import call

    good = {"ts": "1735779660.000001", "text": "x"}
    ctx = answering({"conversations_replies": {"messages": [good], "response_metadata": odd},
                     "search_messages": {"messages": {"matches": [], "paging": odd}},
                     "conversations_list": {"channels": [odd, {"id": "C0ECSUP"}], "response_metadata": odd}})
    replies = call(ctx, "conversations.replies", channel="C0ECSUP", ts=good["ts"])
    assert replies["messages"] == [good] and not replies["response_metadata"].get("next_cursor")
    assert call(ctx, "search.messages", query="x")["messages"]["paging"] == (
        odd if isinstance(odd, dict) else {})
    assert call(ctx, "conversations.list")["channels"] == [*([odd] if isinstance(odd, dict) else []),
                                                           {"id": "C0ECSUP"}]


def test_a_bot_profile_that_is_no_object_is_no_name() -> None:
    from mcp_lib.platforms.slack import message_item

    item = message_item(answering({}), {"id": "C0ECSUP"}, {"ts": "1735779660.000001", "bot_profile": "x",
                                                            "bot_id": "B0BOT"})
    assert item["author"] == "B0BOT"


def test_a_match_of_the_fake_with_an_unplaceable_ts_is_left_out_not_the_search(fake: FakeSlack,
                                                                              sleeps: list[float]) -> None:
    real = fake.api.methods["search.messages"]

    def with_a_bad_one(params: dict[str, Any], token: Any) -> dict[str, Any]:
        answer = real(params, token)
        matches = answer["messages"]["matches"]
        return {**answer, "messages": {**answer["messages"], "matches": [{**matches[0], "ts": "-1e18"}, *matches]}}

    fake.api.methods["search.messages"] = with_a_bad_one
    result = run(context(fake, sleeps), "searchMessages", query="注文取込")
    assert result.status == "ok" and len(result.items) == 1 and not result.notes


@pytest.mark.parametrize("unit", ["<http:", "<@U0ABCDEF1|", "<#C0ABCDEF1|", "<!here|", "<mailto:a|"])
def test_markup_never_closed_is_read_in_time_linear_in_the_message(unit: str) -> None:
    """A 40,000-character message of ``<http:`` without ``>``: each was scanned to the end for its ``>`` (4.5 s
    per message in ``plain``, for every message of a search or a thread); markup holds no ``<``."""
    from mcp_lib.platforms.slack import plain

    text = unit * (40_000 // len(unit))
    ctx = answering({})
    ctx.client.user_lookups_paused_until = float("inf")  # no lookups: only the reading is timed
    assert plain(ctx, text) == text
    shown = plain(ctx, "<https://example.com/a|手順> と <#C0ABCDEF1|ec-support>")
    assert shown == "手順 (https://example.com/a) と #ec-support"
