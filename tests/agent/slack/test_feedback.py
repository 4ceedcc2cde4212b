"""``helpbot feedback`` against the fake Slack Web API (a real HTTP server; the real slack-sdk client).

The answers are posted the way helpbot posts them (placeholder, ``chat.update`` with the first payload of
``slack_format.answer_payloads``, further parts as replies), so a change in that format breaks these tests.
Sleeps are recorded, never slept; the clock is fixed.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from slack_sdk import WebClient

from agent.cli import build_parser
from agent.cli import main as helpbot_main
from agent.core.run import Answer
from agent.errors import UsageError
from agent.slack.blocks import answer_payloads, failure_payload, placeholder_payload
from agent.slack.feedback import _cell, run
from agent.slack.markers import Me
from agent.slack.ratings import RatedAnswer, Scanner, parse_since, tally_reactions
from agent.slack.trigger import canonical_reaction
from mcp_lib.core import ToolContext
from mcp_lib.platforms.slack import load_config, make_client
from tests.fakes.answers import make_answer
from tests.fakes.clock import FakeClock
from tests.fakes.slack import BOT_TOKEN, PERSON_TOKEN, FakeSlack, Workspace

JST = ZoneInfo("Asia/Tokyo")
NOW = datetime(2025, 1, 20, 10, 0, tzinfo=JST)
BOT = "U0HELPBOT"
TANAKA, SUZUKI, OWNER = "U0TANAKA", "U0SUZUKI", "U0OWNER"
LONG_ANSWER = "\n\n".join(f"手順{i}: 在庫同期ジョブのログを確認し、APIの429エラーが出ていないかを見てください。" * 2
                          for i in range(1, 6))


def at(day: int, hour: int = 10, minute: int = 0) -> str:
    return f"{int(datetime(2025, 1, day, hour, minute, tzinfo=JST).timestamp())}.000000"


def result(*tools: str, sources: int = 1, rounds: int = 2, cost: float | None = 0.01,
           answer: str = "在庫同期ジョブのログを確認してください。") -> tuple[Answer, bool]:
    """An answer, and whether its metadata tells the cost (an older helpbot's answer did not)."""
    return make_answer(answer, rounds=rounds, tools=tools, cost_usd=cost or 0.0,
                       sources=[{"title": f"FAQ {i}", "url": f"https://faq.example/{i}"}
                                for i in range(1, sources + 1)]), cost is not None


def post_answer(client: WebClient, channel: str, question_ts: str | None, res: tuple[Answer, bool],
                limit: int = 12_000, meanwhile: Callable[[], object] | None = None) -> list[str]:
    """As ``helpbot answer`` does it: placeholder, replaced by the first part; further parts as replies.
    ``meanwhile`` runs after the first part (someone replying while helpbot is still posting)."""
    answer, with_cost = res
    payloads = answer_payloads(answer, channel=channel, question_ts=question_ts, limit=limit)
    if not with_cost:
        del payloads[0]["metadata"]["event_payload"]["cost_usd"]
    first = client.chat_postMessage(channel=channel, thread_ts=question_ts, **placeholder_payload())
    client.chat_update(channel=channel, ts=first["ts"], **payloads[0])
    if meanwhile:
        meanwhile()
    later = [client.chat_postMessage(channel=channel, thread_ts=question_ts or first["ts"], **p)["ts"]
             for p in payloads[1:]]
    return [first["ts"], *later]


def react(ws: Workspace, channel: str, ts: str, name: str, *users: str) -> None:
    ws.message(channel, ts).reactions.setdefault(name, []).extend(users)  # type: ignore[union-attr]


class Seeded:
    """The workspace of the scenario and the ts of what matters in it."""

    def __init__(self, fake: FakeSlack):
        self.fake = fake
        self.ws = fake.workspace
        self.ts: dict[str, list[str]] = {}


@pytest.fixture
def seeded() -> Iterator[Seeded]:
    ws = Workspace()
    ws.add_user(TANAKA, "tanaka", real_name="田中 太郎")
    ws.add_user(SUZUKI, "suzuki", real_name="鈴木 花子")
    for cid, name in [("C0ECSUP", "ec-support"), ("C0GENERAL", "general"), ("C0OTHER", "other"),
                      ("C0FEEDBACK", "helpbot-feedback")]:
        ws.add_channel(cid, name, members={TANAKA, SUZUKI})
    with FakeSlack(ws) as fake:
        s = Seeded(fake)
        bot = WebClient(token=BOT_TOKEN, base_url=fake.url)
        person = WebClient(token=PERSON_TOKEN, base_url=fake.url)
        ec = "C0ECSUP"
        # 01-05: outside --since 7d, inside 30d; a 👎.
        q_old = ws.post(ec, "楽天の在庫が合いません（田中 090-1234-5678）", user=TANAKA, ts=at(5)).ts
        s.ts["old"] = post_answer(bot, ec, q_old, result("faq_search"))
        react(ws, ec, s.ts["old"][0], "-1", SUZUKI)
        # 01-10: a question whose thread gets its answer only on 01-18 (root older than the window).
        q_late = ws.post(ec, "Yahoo!の注文取込が止まっています", user=TANAKA, ts=at(10)).ts
        # 01-11: a conversation without helpbot, replied to in the window (its thread must not be read).
        chat = ws.post(ec, "楽天の注文取込は15分ごとです", user=SUZUKI, ts=at(11, 9)).ts
        ws.post(ec, "了解です", user=TANAKA, thread_ts=chat, ts=at(14, 9))
        # 01-15: a one-part answer: 👍 by two people (one twice, with a skin tone), by helpbot itself, and 👀.
        q1 = ws.post(ec, "Shopifyの在庫同期が遅れています", user=TANAKA, ts=at(15)).ts
        s.ts["a1"] = post_answer(bot, ec, q1, result("faq_search", "slack_searchMessages", "faq_search",
                                                     sources=2, rounds=3, cost=0.0123))
        react(ws, ec, s.ts["a1"][0], "+1", TANAKA, SUZUKI, BOT)
        react(ws, ec, s.ts["a1"][0], "+1::skin-tone-2", TANAKA)
        react(ws, ec, s.ts["a1"][0], "eyes", SUZUKI)
        # 01-16: a long answer in several parts, a person replying between them; 👎 on the first and the last
        # part (and on the person's reply, which is not part of the answer).
        q2 = ws.post(ec, "CSVインポートでエラーになります", user=SUZUKI, ts=at(16)).ts
        s.ts["a2"] = post_answer(
            bot, ec, q2, result("redmine_search", "growi_searchPages", sources=3, rounds=5, cost=None,
                                answer=LONG_ANSWER), limit=300,
            meanwhile=lambda: s.ts.setdefault("aside", [person.chat_postMessage(
                channel=ec, thread_ts=q2, text="続きはありますか？")["ts"]]))
        react(ws, ec, s.ts["aside"][0], "-1", OWNER)
        react(ws, ec, s.ts["a2"][0], "-1", TANAKA)
        react(ws, ec, s.ts["a2"][0], "+1", OWNER)
        react(ws, ec, s.ts["a2"][-1], "-1", TANAKA, SUZUKI)
        # 01-17: a failure notice (ignored, even with reactions).
        q3 = ws.post(ec, "Amazon連携はできますか", user=TANAKA, ts=at(17)).ts
        notice = bot.chat_postMessage(channel=ec, thread_ts=q3, **placeholder_payload())["ts"]
        bot.chat_update(channel=ec, ts=notice, **failure_payload("model unavailable", channel=ec, question_ts=q3))
        react(ws, ec, notice, "-1", TANAKA)
        # 01-18: the late answer in the 01-10 thread, to a reply.
        follow = ws.post(ec, "まだ止まっています", user=SUZUKI, thread_ts=q_late, ts=at(18)).ts
        s.ts["late"] = post_answer(bot, ec, follow, result("github_searchIssues"))
        react(ws, ec, s.ts["late"][0], "+1", SUZUKI)
        # 01-18: a person's message with forged helpbot metadata (not helpbot's: ignored).
        forged = person.chat_postMessage(channel=ec, thread_ts=q1, text="偽の回答", metadata={
            "event_type": "helpbot_answer", "event_payload": {"question_ts": q1, "rounds": 9, "parts": 1}})["ts"]
        react(ws, ec, forged, "-1", TANAKA)
        # 01-19: a follow-up run still working in the a1 thread: its placeholder is not part of a1.
        pending = bot.chat_postMessage(channel=ec, thread_ts=q1, **placeholder_payload())["ts"]
        react(ws, ec, pending, "-1", OWNER)
        # 01-19: a free question answered top level in #general; and an answer in a channel not scanned.
        ws.post("C0GENERAL", "（チャンネル連絡）", user=SUZUKI, ts=at(19))
        s.ts["free"] = post_answer(bot, "C0GENERAL", None, result("faq_search", cost=0.002))
        react(ws, "C0GENERAL", s.ts["free"][0], "+1", TANAKA)
        q_other = ws.post("C0OTHER", "別チャンネルの質問", user=TANAKA, ts=at(19, 11)).ts
        s.ts["other"] = post_answer(bot, "C0OTHER", q_other, result("faq_search"))
        react(ws, "C0OTHER", s.ts["other"][0], "-1", TANAKA)
        # 01-19: an answer in a private channel (scanned only when a test asks for it).
        ws.add_channel("C0PRIV", "hr-private", private=True, members={TANAKA})
        q_priv = ws.post("C0PRIV", "人事の質問", user=TANAKA, ts=at(19, 12)).ts
        s.ts["priv"] = post_answer(bot, "C0PRIV", q_priv, result("redmine_getIssue", rounds=7, cost=0.4711))
        react(ws, "C0PRIV", s.ts["priv"][0], "-1", TANAKA)
        fake.requests.clear()
        yield s


@pytest.fixture
def env(seeded: Seeded) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": seeded.fake.url,
            "HELPBOT_CHANNELS": "C0ECSUP,C0GENERAL"}


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("feedback").parse_args(["feedback", *argv])


def feedback(env: dict[str, str], *argv: str, sleeps: list[float] | None = None, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    clock = FakeClock(wall=NOW.timestamp())
    code = run(parse(*argv), env, clock=clock, out=out, **kw)
    if sleeps is not None:
        sleeps.extend(clock.sleeps)
    return code, out.getvalue()


def as_json(env: dict[str, str], *argv: str) -> dict[str, Any]:
    code, out = feedback(env, *argv, "--json")
    assert code == 0
    return json.loads(out)


# -- what is counted ------------------------------------------------------------------------------------------
def test_totals_over_the_last_week(env: dict[str, str], seeded: Seeded) -> None:
    report = as_json(env, "--since", "7d")
    t = report["totals"]
    assert t["answers"] == 4  # a1, a2, the late answer, the free one; not the old one, the failure, the forgery
    assert (t["positive"], t["negative"]) == (5, 2)  # 👍 a1: tanaka+suzuki (not helpbot, not twice), a2, late, free
    assert t["reactions"] == {"+1": 5, "-1": 2, "eyes": 1}
    assert t["reactors"] == 3  # tanaka, suzuki, the owner
    assert (t["answers_with_positive"], t["answers_with_negative"], t["answers_without_reactions"]) == (4, 1, 0)
    assert t["rounds"] == 3 + 5 + 2 + 2 and t["rounds_avg"] == 3.0
    assert t["tool_calls"] == 3 + 2 + 1 + 1
    assert t["tools"] == {"faq_search": 2, "slack_searchMessages": 1, "redmine_search": 1, "growi_searchPages": 1,
                          "github_searchIssues": 1}
    assert t["cost_usd"] == pytest.approx(0.0123 + 0.01 + 0.002) and t["cost_unknown"] == 1
    assert t["sources"] == 2 + 3 + 1 + 1
    assert t["top_sources"][0] == {"title": "FAQ 1", "url": "https://faq.example/1", "answers": 4}
    assert report["channels"] == ["C0ECSUP", "C0GENERAL"]
    assert report["since"] == "2025-01-13T10:00:00+09:00" and report["until"] == "2025-01-20T10:00:00+09:00"


def test_per_answer_rows(env: dict[str, str], seeded: Seeded) -> None:
    rows = {a["ts"]: a for a in as_json(env, "--since", "7d")["answers"]}
    assert list(rows) == [seeded.ts["a1"][0], seeded.ts["a2"][0], seeded.ts["late"][0], seeded.ts["free"][0]]
    a1 = rows[seeded.ts["a1"][0]]
    assert a1["reactions"] == {"+1": 2, "eyes": 1} and (a1["positive"], a1["negative"], a1["reactors"]) == (2, 0, 2)
    assert a1["tools"] == ["faq_search", "slack_searchMessages"] and a1["tool_calls"] == 3 and a1["rounds"] == 3
    assert a1["sources"] == [{"title": "FAQ 1", "url": "https://faq.example/1"},
                             {"title": "FAQ 2", "url": "https://faq.example/2"}]
    assert a1["cost_usd"] == 0.0123 and a1["time"] == "2025-01-15T10:01:00+09:00"
    assert a1["question_ts"] == at(15) and a1["thread_ts"] == at(15) and a1["permalink"] is None
    a2 = rows[seeded.ts["a2"][0]]
    assert len(seeded.ts["a2"]) >= 2 and a2["parts"] == len(seeded.ts["a2"])
    assert (a2["positive"], a2["negative"], a2["reactors"]) == (1, 2, 3)  # tanaka's 👎 on two parts counts once
    assert len(a2["sources"]) == 3 and a2["sources_count"] == 3  # the sources block is in the last part
    assert a2["cost_usd"] is None
    late = rows[seeded.ts["late"][0]]
    assert late["thread_ts"] == at(10) and late["question_ts"] == at(18) and late["positive"] == 1
    free = rows[seeded.ts["free"][0]]
    assert free["channel"] == "C0GENERAL" and free["question_ts"] is None and free["thread_ts"] is None


def test_sources_are_read_whether_slack_returns_markdown_or_rich_text(env: dict[str, str], seeded: Seeded) -> None:
    """Slack may hand a posted markdown block back as rich_text: the sources must be found in both forms."""
    as_posted = {a["ts"]: a["sources"] for a in as_json(env, "--since", "7d")["answers"]}
    seeded.ws.markdown_as_rich_text = True
    read_back = as_json(env, "--since", "7d")["answers"]
    assert seeded.fake.calls("conversations.replies")[-1]  # really read again, now as rich_text
    assert {a["ts"]: a["sources"] for a in read_back} == as_posted
    a2 = next(a for a in read_back if a["ts"] == seeded.ts["a2"][0])
    assert [s["url"] for s in a2["sources"]] == [f"https://faq.example/{i}" for i in (1, 2, 3)]


def test_negative_answers_listed_with_permalinks(env: dict[str, str], seeded: Seeded) -> None:
    report = as_json(env, "--since", "30d")
    a2, old = seeded.ts["a2"][0], seeded.ts["old"][0]
    assert [(n["ts"], n["negative"]) for n in report["negative"]] == [(old, 1), (a2, 2)]
    for entry in report["negative"]:
        assert entry["permalink"] == seeded.ws.permalink("C0ECSUP", entry["ts"])
    asked = [c.params["message_ts"] for c in seeded.fake.calls("chat.getPermalink")]
    assert sorted(asked) == sorted([old, a2])  # only for the 👎 answers
    assert report["totals"]["answers"] == 5


def test_text_report(env: dict[str, str], seeded: Seeded) -> None:
    code, out = feedback(env, "--since", "7d")
    assert code == 0
    assert "4 answers in C0ECSUP, C0GENERAL" in out
    assert "👍 5 · 👎 2 · other :eyes: 1 · 3 people reacted" in out
    assert seeded.ws.permalink("C0ECSUP", seeded.ts["a2"][0]) in out.split("👎 answers")[1]
    for private in ("Shopifyの在庫同期", "CSVインポート", "FAQ 1", "在庫同期ジョブ"):  # no message text, no titles
        assert private not in out


def test_efficient_reads(env: dict[str, str], seeded: Seeded) -> None:
    feedback(env, "--since", "7d")
    history = seeded.fake.calls("conversations.history")
    assert {c.params["channel"] for c in history} == {"C0ECSUP", "C0GENERAL"}
    assert all(str(c.params["include_all_metadata"]).lower() in ("1", "true") for c in history)
    assert all("oldest" not in c.params for c in history)  # a thread may get its answer at any age (see below)
    threads = sorted(c.params["ts"] for c in seeded.fake.calls("conversations.replies"))
    assert threads == sorted([at(10), at(15), at(16), at(17)])  # not the chat without helpbot, not the old thread
    assert not seeded.fake.calls("reactions.get")  # reactions came with the messages
    assert not seeded.fake.calls("chat.postMessage")


def test_an_answer_in_the_window_to_a_question_months_older_is_counted(env: dict[str, str], seeded: Seeded) -> None:
    """The window is when the answer was posted: its question may be of any age (a :help: on an old message)."""
    months_ago = f"{int(datetime(2024, 9, 2, 10, tzinfo=JST).timestamp())}.000000"
    asked = seeded.ws.post("C0GENERAL", "去年の請求書の再発行は？", user=TANAKA, ts=months_ago).ts
    bot = WebClient(token=BOT_TOKEN, base_url=seeded.fake.url)
    late = post_answer(bot, "C0GENERAL", asked, result("faq_search"))  # posted now, inside the window
    react(seeded.ws, "C0GENERAL", late[0], "+1", SUZUKI)
    report = as_json(env, "--since", "7d")
    assert late[0] in [a["ts"] for a in report["answers"]]
    assert report["totals"]["answers"] == 5


# -- output shapes --------------------------------------------------------------------------------------------
def test_json_shape(env: dict[str, str]) -> None:
    report = as_json(env, "--since", "7d")
    assert set(report) == {"since", "until", "channels", "totals", "answers", "negative",
                           "private_channels_left_out"}
    assert set(report["answers"][0]) == {
        "channel", "ts", "time", "thread_ts", "question_ts", "positive", "negative", "reactions", "reactors",
        "rounds", "tool_calls", "tools", "sources_count", "sources", "cost_usd", "degraded", "parts", "permalink"}
    assert set(report["negative"][0]) == {"channel", "ts", "negative", "positive", "permalink"}


def test_csv_shape(env: dict[str, str], seeded: Seeded) -> None:
    code, out = feedback(env, "--since", "7d", "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["ts"] for r in rows] == [seeded.ts[k][0] for k in ("a1", "a2", "late", "free")]
    a1, a2 = rows[0], rows[1]
    assert (a1["positive"], a1["negative"], a1["other_reactions"], a1["reactors"]) == ("2", "0", "eyes:1", "2")
    assert a1["tools"] == "faq_search;slack_searchMessages" and a1["cost_usd"] == "0.012300"
    assert a1["source_urls"] == "https://faq.example/1 https://faq.example/2" and a1["degraded"] == "false"
    assert a2["permalink"] == seeded.ws.permalink("C0ECSUP", seeded.ts["a2"][0]) and a2["cost_usd"] == ""


def test_csv_cells_cannot_become_formulas() -> None:
    assert _cell("=HYPERLINK(\"x\")") == "'=HYPERLINK(\"x\")"
    assert _cell("-sum:1") == "'-sum:1" and _cell("@x") == "'@x" and _cell("+1") == "'+1"
    assert _cell("faq_search") == "faq_search" and _cell(3) == 3


# -- --post ---------------------------------------------------------------------------------------------------
def test_post_sends_exactly_one_summary(env: dict[str, str], seeded: Seeded) -> None:
    code, _ = feedback(env, "--since", "7d", "--post", "C0FEEDBACK")
    assert code == 0
    posts = seeded.fake.calls("chat.postMessage")
    assert len(posts) == 1 and posts[0].params["channel"] == "C0FEEDBACK" and posts[0].kind == "bot"
    [message] = seeded.ws.history("C0FEEDBACK")
    text = message.blocks[0]["text"]  # type: ignore[index]
    assert "回答 4 件 ・ 👍 5 ・ 👎 2" in text
    assert "検索先（使った回答の数）: FAQ 2、Slack 1、Redmine 1、Growi 1、GitHub 1" in text  # a1 counts FAQ once
    assert f"]({seeded.ws.permalink('C0ECSUP', seeded.ts['a2'][0])})" in text
    assert "FAQ 1" not in text and "CSVインポート" not in text  # counts and links only


def test_post_channel_from_the_environment(env: dict[str, str], seeded: Seeded) -> None:
    env = {**env, "HELPBOT_FEEDBACK_CHANNEL": "C0FEEDBACK"}
    code, _ = feedback(env, "--since", "30d", "--post")
    assert code == 0
    [message] = seeded.ws.history("C0FEEDBACK")
    assert message.text.startswith("helpbot フィードバック: 回答 5 件")
    assert "090-1234-5678" not in json.dumps(message.blocks, ensure_ascii=False)  # no question text leaves


def test_private_channel_answers_never_reach_a_public_post(env: dict[str, str], seeded: Seeded,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A private channel's answers (their numbers are the choices of a model that read private text) count in a
    post only when it goes to that same channel; in Actions the printed report leaves them out too."""
    env = {**env, "GITHUB_ACTIONS": "true"}
    public_only, _ = feedback(env, "--since", "7d", "--channel", "C0ECSUP", "--channel", "C0GENERAL", "--post",
                              "C0FEEDBACK")
    both, printed = feedback(env, "--since", "7d", "--channel", "C0ECSUP", "--channel", "C0GENERAL",
                             "--channel", "C0PRIV", "--post", "C0FEEDBACK")
    assert public_only == both == 0
    first, second = (m.blocks[0]["text"] for m in seeded.ws.history("C0FEEDBACK"))  # type: ignore[index]
    assert first == second and "Redmine 1" in first  # a2 used Redmine; the private answer is not counted
    for leaked in ("  C0PRIV  ", "0.47", "7.0", "redmine_getIssue"):  # the header lists the scanned channels
        assert leaked not in printed, leaked
    assert "C0PRIV" in capsys.readouterr().err  # the log says which channel it left out, nothing of it
    as_text = json.loads(feedback(env, "--since", "7d", "--channel", "C0PRIV", "--json")[1])
    assert as_text["answers"] == [] and as_text["private_channels_left_out"] == ["C0PRIV"]
    # posted into the private channel itself, its answers count; run locally, the report has them
    feedback(env, "--since", "7d", "--channel", "C0ECSUP", "--channel", "C0PRIV", "--post", "C0PRIV")
    inside = seeded.ws.history("C0PRIV")[-1].blocks[0]["text"]  # type: ignore[index]
    assert "回答 4 件" in inside and "ラウンド 7" in inside
    local = as_json({k: v for k, v in env.items() if k != "GITHUB_ACTIONS"}, "--since", "7d", "--channel", "C0PRIV")
    assert [a["channel"] for a in local["answers"]] == ["C0PRIV"] and local["private_channels_left_out"] == []


def test_many_negatives_still_one_message(seeded: Seeded, env: dict[str, str]) -> None:
    ws, bot = seeded.ws, WebClient(token=BOT_TOKEN, base_url=seeded.fake.url)
    for _ in range(30):
        q = ws.post("C0GENERAL", "質問", user=TANAKA).ts
        react(ws, "C0GENERAL", post_answer(bot, "C0GENERAL", q, result("faq_search"))[0], "-1", TANAKA)
    code, _ = feedback(env, "--since", "30d", "--post", "C0FEEDBACK")
    assert code == 0
    [message] = ws.history("C0FEEDBACK")
    text = message.blocks[0]["text"]  # type: ignore[index]
    assert text.count("\n- [") == 20 and "- ほか 12 件" in text  # 32 👎 answers: 20 listed


# -- bad input, bad configuration, Slack failures ------------------------------------------------------------
@pytest.mark.parametrize("since", ["3x", "0d", "", "7 days", "2025-13-01", "2099-01-01", "99999999d"])
def test_bad_since_exits_2(since: str, env: dict[str, str], seeded: Seeded,
                           capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert helpbot_main(["feedback", "--since", since]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--since" in err and "Traceback" not in err
    assert not seeded.fake.requests  # nothing read, nothing posted


@pytest.mark.parametrize(("argv", "env_over", "words"), [
    ([], {"HELPBOT_CHANNELS": ""}, "HELPBOT_CHANNELS: no channels to scan"),
    ([], {"HELPBOT_CHANNELS": "general"}, "'general' is not a channel ID"),
    (["--channel", "#general"], {}, "--channel '#general' is not a channel ID"),
    (["--post"], {}, "HELPBOT_FEEDBACK_CHANNEL: not set"),
    (["--post", "D0TANAKA"], {}, "--post 'D0TANAKA' is not a channel ID"),
    ([], {"SLACK_BOT_TOKEN": ""}, "SLACK_BOT_TOKEN: not set"),
    (["--json", "--csv"], {}, "not allowed with argument"),
])
def test_bad_configuration_exits_2(argv: list[str], env_over: dict[str, str], words: str, env: dict[str, str],
                                   seeded: Seeded, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {**env, **env_over}.items():
        monkeypatch.setenv(key, value)
    assert helpbot_main(["feedback", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not seeded.fake.requests


def test_slack_error_is_one_line_and_exit_1(env: dict[str, str], seeded: Seeded,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    seeded.ws.add_channel("C0NOBOT", "no-bot", bot_member=False)
    code, out = feedback(env, "--channel", "C0NOBOT")
    assert code == 1 and out == ""
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a member" in err


def test_rate_limit_is_waited_out(env: dict[str, str], seeded: Seeded) -> None:
    seeded.fake.fail("conversations.history", status=429, retry_after=3, times=2)
    sleeps: list[float] = []
    code, _ = feedback(env, "--since", "7d", "--json", sleeps=sleeps)
    assert code == 0 and len(sleeps) == 2 and all(3 <= s <= 3.5 for s in sleeps)


# -- pagination and truncated reaction lists ------------------------------------------------------------------
def test_pagination_over_history_and_replies() -> None:
    ws = Workspace(start=int(NOW.timestamp()) - 5 * 86400)
    ws.add_user(TANAKA, "tanaka")
    ws.add_channel("C0ECSUP", "ec-support", members={TANAKA})
    with FakeSlack(ws) as fake:
        bot = WebClient(token=BOT_TOKEN, base_url=fake.url)
        answers = []
        for n in range(8):
            q = ws.post("C0ECSUP", f"質問{n}", user=TANAKA).ts
            for m in range(4 if n == 0 else 0):  # one thread longer than a page before its answer
                ws.post("C0ECSUP", f"補足{m}", user=TANAKA, thread_ts=q)
            answers.append(post_answer(bot, "C0ECSUP", q, result("faq_search"))[0])
            react(ws, "C0ECSUP", answers[-1], "+1" if n % 2 else "-1", TANAKA)
            ws.post("C0ECSUP", f"雑談{n}", user=TANAKA)
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": fake.url, "HELPBOT_CHANNELS": "C0ECSUP"}
        code, out = feedback(env, "--since", "7d", "--json", page_size=3)
        assert code == 0
        report = json.loads(out)
        assert [a["ts"] for a in report["answers"]] == answers
        assert (report["totals"]["positive"], report["totals"]["negative"]) == (4, 4)
        history = fake.calls("conversations.history")
        assert len(history) == 6 and sum(1 for c in history if c.params.get("cursor")) == 5  # 16 messages / 3
        first_thread = [c for c in fake.calls("conversations.replies") if c.params["ts"] == ws.history("C0ECSUP")[0].ts]
        assert len(first_thread) == 2 and first_thread[1].params.get("cursor")  # 6 messages / 3


def test_truncated_reaction_users_are_fetched_with_reactions_get(seeded: Seeded) -> None:
    """Slack cuts long user lists in history (count > len(users)); reactions.get(full=true) has them all."""
    ws, ts = seeded.ws, seeded.ts["a1"][0]
    config = load_config({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": seeded.fake.url})
    assert config is not None
    scanner = Scanner(ToolContext(client=make_client(config), config=config, clock=FakeClock()), Me(BOT, "B0HELPBOT"))
    as_listed = {"ts": ts, "reactions": [{"name": "+1", "users": [TANAKA], "count": 3}]}
    answer = RatedAnswer(channel="C0ECSUP", ts=ts, thread_ts=None, question_ts=None, rounds=1, tool_calls=1,
                         tools=[], sources_count=0, sources=[], cost_usd=None, degraded=False, parts=1)
    tally_reactions(answer, [as_listed], {}, scanner.me, lambda m: scanner._refetch("C0ECSUP", m))
    assert [c.params["timestamp"] for c in seeded.fake.calls("reactions.get")] == [ts]
    assert answer.reactions == {"+1": 2, "eyes": 1}  # the full list: tanaka, suzuki (+ helpbot, excluded)
    assert answer.reactors == {TANAKA, SUZUKI}
    assert ws.reactions("C0ECSUP", ts)["+1"] == [TANAKA, SUZUKI, BOT]


# -- the window and reaction names ----------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [
    ("7d", NOW - timedelta(days=7)),
    ("12h", NOW - timedelta(hours=12)),
    ("2w", NOW - timedelta(days=14)),
    ("30D", NOW - timedelta(days=30)),
    ("2025-01-01", datetime(2025, 1, 1, tzinfo=JST)),
    ("2025-01-01T09:30", datetime(2025, 1, 1, 9, 30, tzinfo=JST)),
    ("2025-01-01T00:00:00Z", datetime(2025, 1, 1, 9, 0, tzinfo=JST)),
])
def test_parse_since(value: str, expected: datetime) -> None:
    assert parse_since(value, NOW) == expected


def test_parse_since_rejects_the_future() -> None:
    with pytest.raises(UsageError, match="not in the past"):
        parse_since("2025-01-21", NOW)


@pytest.mark.parametrize(("name", "normal"), [("+1", "+1"), ("thumbsup", "+1"), ("+1::skin-tone-4", "+1"),
                                              ("-1::skin-tone-2", "-1"), ("thumbsdown", "-1"), ("eyes", "eyes")])
def test_canonical_reaction_names(name: str, normal: str) -> None:
    assert canonical_reaction(name) == normal


def test_through_the_helpbot_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Registered in ``helpbot``, with the real clock."""
    ws = Workspace(start=int(datetime.now(JST).timestamp()) - 2 * 86400)
    ws.add_user(TANAKA, "tanaka")
    ws.add_channel("C0ECSUP", "ec-support", members={TANAKA})
    with FakeSlack(ws) as fake:
        q = ws.post("C0ECSUP", "質問", user=TANAKA).ts
        ts = post_answer(WebClient(token=BOT_TOKEN, base_url=fake.url), "C0ECSUP", q, result("faq_search"))[0]
        react(ws, "C0ECSUP", ts, "-1", TANAKA)
        monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_API_URL", fake.url)
        assert helpbot_main(["feedback", "--since", "7d", "--channel", "C0ECSUP", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["answers"] == 1 and report["negative"][0]["permalink"] == ws.permalink("C0ECSUP", ts)


def test_feedback_in_a_public_repository_keeps_its_log_as_a_private_channels(
        env: dict[str, str], seeded: Seeded) -> None:
    """The README: in a public repository "every run is kept that way [as a private channel's], whatever its
    channel"; feedback.yml passes HELPBOT_REPOSITORY_VISIBILITY. The answer runs' records keep nothing the model
    chose, so neither may the weekly report (tool names, rounds, cost, with --json their sources): in a public
    repository the printed report leaves every channel's answers out; the Slack post is as before."""
    public = {**env, "GITHUB_ACTIONS": "true", "HELPBOT_REPOSITORY_VISIBILITY": "public"}
    report = as_json(public, "--since", "7d", "--channel", "C0ECSUP")
    printed = json.dumps(report, ensure_ascii=False)
    assert report["answers"] == [], printed[:300]
    assert "FAQ 1" not in printed and "redmine_search" not in printed
    code, text = feedback(public, "--since", "7d", "--channel", "C0ECSUP", "--post", "C0FEEDBACK")
    assert code == 0 and "faq_search" not in text and "ラウンド" not in text
    [posted] = seeded.ws.history("C0FEEDBACK")  # the post goes to Slack, not to the log: counted as before
    assert "回答 3 件" in posted.blocks[0]["text"]  # type: ignore[index]
