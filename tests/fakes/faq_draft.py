"""Builders for ``helpbot faq-draft`` runs: the people, answers posted as helpbot posts them, reactions, the run."""

from __future__ import annotations

import argparse
import io
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from slack_sdk import WebClient

from agent.cli import build_parser
from agent.faq_draft import run
from agent.slack.blocks import answer_payloads, placeholder_payload
from tests.fakes.answers import make_answer
from tests.fakes.clock import FakeClock
from tests.fakes.slack import Workspace

JST = ZoneInfo("Asia/Tokyo")
NOW = datetime(2025, 1, 20, 10, 0, tzinfo=JST)
TANAKA, SUZUKI, SATO, BOT = "U0TANAKA", "U0SUZUKI", "U0SATO", "U0HELPBOT"
REPO = "acme/helpdesk"
GIFT = "ギフト包装は注文備考の「のし」欄で指定します。連絡先 tanaka@example.com / 090-1234-5678 まで。"


def at(day: int, hour: int = 10) -> str:
    return f"{int(datetime(2025, 1, day, hour, tzinfo=JST).timestamp())}.000000"


def answer(bot: WebClient, channel: str, question_ts: str, text: str, tags: list[str] | None = None) -> str:
    result = make_answer(text, cost_usd=0.01, tags=tags or [],
                         sources=[{"title": "ギフト設定（Growi）", "url": "https://wiki.example.com/gift"}])
    payloads = answer_payloads(result, channel=channel, question_ts=question_ts)
    first = bot.chat_postMessage(channel=channel, thread_ts=question_ts, **placeholder_payload())["ts"]
    bot.chat_update(channel=channel, ts=first, **payloads[0])
    return str(first)


def react(ws: Workspace, channel: str, ts: str, name: str, *users: str) -> None:
    ws.message(channel, ts).reactions.setdefault(name, []).extend(users)  # type: ignore[union-attr]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("faq-draft").parse_args(["faq-draft", *argv])


def draft(env: dict[str, str], *argv: str, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = run(parse(*argv), env, clock=FakeClock(wall=NOW.timestamp()), out=out, **kw)
    return code, out.getvalue()
