"""Degraded mode: when there is no model, the question is searched directly and the hits are shown as they are.

The loop degrades when no model is configured, when it stays unavailable after retries, or when it rejects a
request after tools have run: the search tools run on the head of the question, and their best hits -- then what
the run had gathered -- are shown, labelled as not AI-generated, in the question's language.
"""

from __future__ import annotations

import re

from agent.core.tools import ToolOutcome

DEGRADED_QUERY_CHARS = 300  # a search engine gets the head of a long question
MAX_SOURCES = 8
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def best_hits(outcomes: list[ToolOutcome], gathered: list[dict[str, str]]
              ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(every hit ranked, the first MAX_SOURCES distinct URLs): the best hit of every search first, then the
    second ones, ..., then whatever an interrupted model run had gathered."""
    ranked: list[dict[str, str]] = []
    lists = [outcome.sources for outcome in outcomes if not outcome.is_error]
    for rank in range(max((len(x) for x in lists), default=0)):
        ranked += [x[rank] for x in lists if rank < len(x)]
    ranked += gathered
    picked: dict[str, dict[str, str]] = {}
    for src in ranked:
        if len(picked) < MAX_SOURCES:
            picked.setdefault(src["url"], src)
    return ranked, list(picked.values())


def degraded_text(question: str, no_model: bool, sources: list[dict[str, str]]) -> str:
    """The labelled list of hits, in Japanese when the question is."""
    japanese = bool(_JAPANESE.search(question))
    if japanese:
        why = "AI モデルが設定されていない" if no_model else "AI モデルを利用できなかった"
        lines = [f"⚠️ これは AI が生成した回答ではありません（{why}ため、質問の言葉で各情報源を検索した結果を"
                 "そのまま示します）。"]
        lines.append("関連しそうな情報:" if sources else "関連する情報は見つかりませんでした。")
    else:
        why = "no AI model is configured" if no_model else "the AI model was unavailable"
        lines = [f"⚠️ This is not an AI-generated answer ({why}); these are the search results for the question."]
        lines.append("Possibly relevant:" if sources else "Nothing relevant was found.")
    for number, src in enumerate(sources, 1):
        lines.append(f"{number}. {src['title']}" + (f" — {src['snippet']}" if src.get("snippet") else ""))
    return "\n".join(lines)
