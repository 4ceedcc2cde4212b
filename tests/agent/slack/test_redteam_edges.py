"""Red team after issue #19: attacks on the doors, the admission policy, the records of a public repository and the
FAQ drafts, against the fakes. A defect not fixed yet is an ``xfail(strict=True)``: it turns red once fixed."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from slack_sdk import WebClient

from agent.faq_draft import run as faq_draft_run
from mcp_lib.config import ConfigError
from mcp_lib.external import server_entries
from tests.agent.slack.test_admission import connect  # noqa: F401  (the Slack Connect channel's fixture)
from tests.fakes.faq_draft import BOT, NOW, SATO, SUZUKI, TANAKA, answer, at, parse, react
from tests.fakes.front import answer_scripted, bot_messages, event_file
from tests.fakes.slack import BOT_TOKEN, FakeSlack, Workspace, named_workspace
from tests.fakes.slack_files import add_file


# -- credentials: an in-house MCP server's env and header ------------------------------------------------------------
@pytest.mark.parametrize("setting", ['command = "python"\nenv = ["AWS_SECRET_ACCESS_KEY"]',
                                     'command = "python"\nenv = ["SLACK_SIGNING_SECRET"]',
                                     'url = "https://mcp.example.test/mcp"\nheader_env = "AWS_SECRET_ACCESS_KEY"'])
def test_the_never_sent_secrets_never_reach_an_in_house_server(tmp_path: Path, setting: str) -> None:
    """The README: "An in-house stdio server's environment holds only the variables its env names, and none of the
    credentials above" -- among them SLACK_SIGNING_SECRET and AWS_SECRET_ACCESS_KEY, "never sent". The check knew
    only the credentials that travel (doors.WHERE): the AWS secret key went into a child's environment, or as a
    header to any URL (fixed: every secret mcp_lib/config.py declares is refused)."""
    (tmp_path / "helpbot.toml").write_text(f'[[mcp_servers]]\nname = "sales"\n{setting}\ntools = ["get_sales"]\n',
                                           encoding="utf-8")
    with pytest.raises(ConfigError, match=r"may not be passed to an MCP server"):
        server_entries({"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")})


# -- admission: a dispatched payload's user ---------------------------------------------------------------------------
def test_a_dispatched_reaction_is_answered_only_when_its_user_reacted(
        ws: Workspace, fake: FakeSlack, env: dict[str, str], tmp_path: Path) -> None:
    """Whoever holds the dispatch token (or writes a zap) names any member as the reactor. The message helpbot
    reads anyway (conversations.replies) carries ``reactions: [{name, users, count}]``
    (https://api.slack.com/methods/conversations.replies): the named user must be among the reaction's users
    (``reactions.get`` with ``full=true`` when ``count`` exceeds the users listed)."""
    q = ws.history("C0ECSUP")[0]
    assert not q.reactions  # nobody reacted
    path = event_file(tmp_path, {"channel": "C0ECSUP", "ts": q.ts, "user": "U0TANAKA", "reaction": "help"})
    code, model = answer_scripted(env, lambda request: "回答です。", event=path)
    assert code == 0 and model.requests == [] and bot_messages(ws, "C0ECSUP", q.ts) == []
    ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0SUZUKI", "reaction": "help"})  # someone else did
    assert answer_scripted(env, lambda request: "回答です。", event=path)[1].requests == []
    ws.reacted({"channel": "C0ECSUP", "ts": q.ts, "user": "U0TANAKA", "reaction": "help::skin-tone-2"})
    assert answer_scripted(env, lambda request: "回答です。", event=path)[0] == 0
    assert len(bot_messages(ws, "C0ECSUP", q.ts)) == 1  # the named user's own reaction, any skin tone


# -- names in FAQ drafts: the answer's text ---------------------------------------------------------------------------
@pytest.fixture
def named_answer() -> Iterator[FakeSlack]:
    ws = named_workspace(TANAKA, SUZUKI, SATO)
    with FakeSlack(ws) as running:
        bot = WebClient(token=BOT_TOKEN, base_url=running.url)
        q = ws.post("C0ECSUP", "ギフト包装の指定はどこでできますか？", user=SATO, ts=at(15)).ts
        ws.post("C0ECSUP", "鈴木さんが前に設定していました", user=TANAKA, thread_ts=q, ts=at(15, 11))
        text = "佐藤さん、注文備考の「のし」欄で指定します。鈴木花子さんが設定した手順は田中部長が確認済みです。"
        react(ws, "C0ECSUP", answer(bot, "C0ECSUP", q, text), "+1", SUZUKI, TANAKA)
        yield running


def test_a_drafts_answer_keeps_no_participants_name(named_answer: FakeSlack) -> None:
    """The README: "FAQ drafts drop the names the workspace knows ... for the asker and the thread's repliers".
    helpbot's answer addresses the asker and names who did what in the thread: the draft printed them."""
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": named_answer.url, "HELPBOT_CHANNELS": "C0ECSUP",
           "HELPBOT_BOT_USER_ID": BOT}
    out, sleeps = io.StringIO(), list[float]()
    assert faq_draft_run(parse(), env, now=NOW, sleep=sleeps.append, out=out) == 0
    printed = out.getvalue()
    assert "1 drafts" in printed and "「のし」欄で指定します" in printed
    for name in ("佐藤", "鈴木", "田中", "花子"):
        assert name not in printed, name


# -- files in a channel shared with another organization -------------------------------------------------------------
def test_a_shared_channel_reads_only_files_shared_in_it(connect: Workspace, fake: FakeSlack,  # noqa: F811
                                                        env: dict[str, str],
                                                        tmp_path: Path) -> None:
    """In a channel of HELPBOT_SHARED_CHANNELS only the FAQ (and HELPBOT_SHARED_SOURCES) are offered: Slack's
    internal channels are not a source there, so neither are their files. The file rule still lets a file through
    when files.info lists any public channel of the home workspace, as for an internal answer -- the reliance
    on Slack never producing such a message that #19 removed for private files (fixed: where Slack is not a
    source, only the answer's channel counts; a file shared in it is read as before)."""
    ws = connect
    internal = add_file(ws, "pricing.log", b"INTERNAL-PRICE-2025\n", channel="C0GENERAL", user="U0TANAKA")
    asked = ws.post("C0PARTNER", "このログの意味は？", user="U0PARTNER", files=[internal])
    reacted = ws.reacted({"channel": "C0PARTNER", "ts": asked.ts, "user": "U0PARTNER", "reaction": "help"})
    path = event_file(tmp_path, reacted)
    code, model = answer_scripted({**env, "HELPBOT_SHARED_CHANNELS": "C0PARTNER"}, lambda r: "確認しました。",
                                  event=path)
    assert code == 0 and model.requests
    assert "INTERNAL-PRICE-2025" not in json.dumps([r.messages for r in model.requests], ensure_ascii=False)
    assert fake.calls("files.download") == []
    own = add_file(ws, "partner.log", b"PARTNER-LINE-3\n", channel="C0PARTNER", user="U0PARTNER")
    asked = ws.post("C0PARTNER", "こちらのログは？", user="U0PARTNER", files=[own])
    reacted = ws.reacted({"channel": "C0PARTNER", "ts": asked.ts, "user": "U0PARTNER", "reaction": "help"})
    path = event_file(tmp_path, reacted, name="own.json")
    code, model = answer_scripted({**env, "HELPBOT_SHARED_CHANNELS": "C0PARTNER"}, lambda r: "確認しました。",
                                  event=path)
    assert code == 0 and "PARTNER-LINE-3" in json.dumps(model.requests[0].messages, ensure_ascii=False)
