"""Answers that are not the model's: sources shown as they are, labelled so, in the question's language -- the
searches' best hits first when there was no usable model, the run's own sources when the model gave no answer."""

from __future__ import annotations

import re
from itertools import zip_longest
from typing import Literal

from agent.core.tools import ToolOutcome

DEGRADED_QUERY_CHARS = 300  # a search engine gets the head of a long question
MAX_SOURCES = 8
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
Why = Literal["no_model", "unavailable", "no_answer"]
_WHY: dict[Why, tuple[str, str]] = {
    "no_model": ("AI モデルが設定されていない", "no AI model is configured"),
    "unavailable": ("AI モデルを利用できなかった", "the AI model was unavailable"),
    "no_answer": ("AI モデルが回答しなかった", "the AI model gave no answer")}


def best_hits(outcomes: list[ToolOutcome], gathered: list[dict[str, str]]
              ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(every hit ranked, the first MAX_SOURCES distinct URLs): the best hit of every search first, then the
    second ones, ..., then whatever the run had gathered."""
    lists = [outcome.sources for outcome in outcomes if not outcome.is_error]
    ranked = [src for row in zip_longest(*lists) for src in row if src is not None] + gathered
    picked: dict[str, dict[str, str]] = {}
    for src in ranked:
        picked.setdefault(src["url"], src)
    return ranked, list(picked.values())[:MAX_SOURCES]


def degraded_text(question: str, why: Why, sources: list[dict[str, str]]) -> str:
    """The labelled list of sources, in Japanese when the question is."""
    searched = why != "no_answer"
    if _JAPANESE.search(question):
        what = "質問の言葉で各情報源を検索した結果" if searched else "調査で読んだ情報源"
        lines = [f"⚠️ これは AI が生成した回答ではありません（{_WHY[why][0]}ため、{what}をそのまま示します）。",
                 "関連しそうな情報:" if sources else "関連する情報は見つかりませんでした。"]
    else:
        what = "the search results for the question" if searched else "the sources the investigation read"
        lines = [f"⚠️ This is not an AI-generated answer ({_WHY[why][1]}); these are {what}.",
                 "Possibly relevant:" if sources else "Nothing relevant was found."]
    for number, src in enumerate(sources, 1):
        lines.append(f"{number}. {src['title']}" + (f" — {src['snippet']}" if src.get("snippet") else ""))
    return "\n".join(lines)
