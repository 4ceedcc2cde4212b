"""Names in FAQ drafts: the names the workspace knows for the thread's participants (``users.info``: real name,
display name, user name) leave the draft's question wherever they stand, with their honorifics -- not only a
leading 「○○さん」."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from agent.faq_draft import clean_question, names_of, run
from agent.faq_draft import run as faq_draft_run
from mcp_lib.platforms.slack.reading import MAX_NAME_LOOKUPS
from tests.fakes.clock import FakeClock
from tests.fakes.faq_draft import BOT, NOW, SATO, SUZUKI, TANAKA, answer, at, parse, react
from tests.fakes.slack import BOT_TOKEN, FakeSlack, named_workspace

KNOWN = names_of({"name": "tanaka", "real_name": "田中 太郎", "profile": {"display_name": "たなか",
                                                                        "real_name": "田中 太郎"}}) | \
    names_of({"name": "suzuki.h", "real_name": "Suzuki Hanako", "profile": {"display_name": "鈴木"}})

CASES = [  # (the asker's message, the draft's question)
    ("鈴木さんと田中部長に聞いた件、在庫の締め処理はいつ？", "と に聞いた件、在庫の締め処理はいつ？"),
    ("在庫の締め処理は田中課長の担当？", "在庫の締め処理は の担当？"),
    ("たなかくん・太郎さん・田中太郎様に確認済み。締め処理は？", "・ ・ に確認済み。締め処理は？"),
    ("Suzuki Hanako-san says the close runs at 9; suzuki.h and @tanaka agree?", "says the close runs at 9; and "
                                                                                 "agree?"),
    ("田中 部長、締め処理は？", "、締め処理は？"),
    ("tanakas は別の単語", "tanakas は別の単語"),  # an ASCII name only as a whole word
]


def test_names_of_reads_the_documented_fields() -> None:
    assert {"田中 太郎", "田中", "太郎", "田中太郎", "たなか", "tanaka"} <= KNOWN
    assert names_of({"name": "ok", "real_name": "Al"}) == set()  # too short to remove wherever they stand


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_known_names_leave_the_question_with_their_honorifics(text: str, expected: str) -> None:
    assert clean_question(text, KNOWN) == expected


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    ws = named_workspace(TANAKA, SUZUKI, SATO)
    with FakeSlack(ws) as running:
        bot = WebClient(token=BOT_TOKEN, base_url=running.url)
        q = ws.post("C0ECSUP", "鈴木さんと田中部長に聞いた件、ギフト包装の指定はどこでできますか？（たなか経由）",
                    user=SATO, ts=at(15)).ts
        ws.post("C0ECSUP", "私も知りたいです", user=TANAKA, thread_ts=q, ts=at(15, 11))
        react(ws, "C0ECSUP", answer(bot, "C0ECSUP", q, "注文備考の「のし」欄で指定します。"), "+1", SUZUKI, TANAKA)
        yield running


def test_a_draft_keeps_no_participants_name(fake: FakeSlack) -> None:
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": fake.url, "HELPBOT_CHANNELS": "C0ECSUP",
           "HELPBOT_BOT_USER_ID": BOT}
    out = io.StringIO()
    assert run(parse(), env, clock=FakeClock(wall=NOW.timestamp()), out=out) == 0
    printed = out.getvalue()
    assert "1 drafts" in printed and "ギフト包装の指定はどこでできますか" in printed
    for name in ("鈴木", "田中", "部長", "たなか"):
        assert name not in printed, name
    asked = {r.params.get("user") for r in fake.requests if r.method == "users.info"}
    assert {SATO, TANAKA} <= asked  # the asker and who replied in the thread


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
    out = io.StringIO()
    assert faq_draft_run(parse(), env, clock=FakeClock(wall=NOW.timestamp()), out=out) == 0
    printed = out.getvalue()
    assert "1 drafts" in printed and "「のし」欄で指定します" in printed
    for name in ("佐藤", "鈴木", "田中", "花子"):
        assert name not in printed, name


def test_a_question_of_500_mentions_looks_up_at_most_max_name_lookups_people() -> None:
    """faq-draft asked users.info for every distinct mention of a question, 3,000 in a 40,000-character message;
    now through the tools' lookups and their bound, each question's people counted on their own."""
    ws = named_workspace(TANAKA, SUZUKI, SATO)
    people = [f"U0P{n:04d}" for n in range(500)]
    for n, user in enumerate(people):
        ws.add_user(user, f"person{n}")
    with FakeSlack(ws) as fake:
        bot = WebClient(token=BOT_TOKEN, base_url=fake.url)
        mentions = " ".join(f"<@{user}>" for user in people)
        for day, question in ((15, "ギフト包装の指定はどこでできますか？"), (16, "返品の送料は誰が負担しますか？")):
            q = ws.post("C0ECSUP", f"{mentions} {question}", user=SATO, ts=at(day)).ts
            react(ws, "C0ECSUP", answer(bot, "C0ECSUP", q, "注文備考の欄を見てください。"), "+1", SUZUKI, TANAKA)
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": fake.url, "HELPBOT_CHANNELS": "C0ECSUP",
               "HELPBOT_BOT_USER_ID": BOT}
        out = io.StringIO()
        assert run(parse(), env, clock=FakeClock(wall=NOW.timestamp()), out=out) == 0
        assert "2 drafts" in out.getvalue() and "返品の送料は誰が負担しますか" in out.getvalue()
        assert MAX_NAME_LOOKUPS < len(fake.calls("users.info")) <= 2 * MAX_NAME_LOOKUPS
