"""The hard budget: the largest tool results halved, then the earliest turns shortened or dropped, until the
request fits (``agent.core.economy`` decides when). Only contents shrink; the investigation is never reordered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent.core.cutting import MIN_CUT_CHARS, cut, uncut
from agent.core.tokens import estimate_tokens
from agent.core.transcript import ResultRef, replace_result, tool_results

HISTORY_TURN_SHORT_CHARS = 1_000  # an earlier turn's question or answer, when the request needs the room


def fit_budget(messages: list[dict[str, Any]], budget: int, estimate: Callable[[], int], scale: float = 1.0
               ) -> list[str]:
    """Halve the largest tool results until the estimate is within ``budget`` (or none is left to cut); returns
    the ids cut. Incremental: a halving subtracts what the cut text counted (times ``scale``), the whole transcript
    is estimated only to start and to confirm."""
    cut_ids: list[str] = []
    current = estimate()
    while current > budget:
        refs = {(ref.message, ref.block): ref for ref in tool_results(messages) if len(ref.content) > MIN_CUT_CHARS * 2}
        if not refs:
            break
        while current > budget and refs:
            key = max(refs, key=lambda k: len(refs[k].content))
            largest = refs.pop(key)
            keep = max(MIN_CUT_CHARS, len(largest.content) // 2)
            shorter = cut(uncut(largest.content), keep)
            replace_result(messages, largest, shorter)
            cut_ids.append(largest.tool_use_id)
            current -= int((_json_tokens(largest.content) - _json_tokens(shorter)) * scale)
            if len(shorter) > MIN_CUT_CHARS * 2:
                refs[key] = ResultRef(largest.message, largest.block, largest.tool_use_id, largest.name,
                                      largest.input, shorter)
        current = estimate()
    return cut_ids


def _json_tokens(text: str) -> int:
    return estimate_tokens(json.dumps(text, ensure_ascii=False))


def trim_history(messages: list[dict[str, Any]], question_index: int, fits: Callable[[], bool]) -> tuple[int, int]:
    """Room in the earlier turns, oldest first, until ``fits()``: each cut to HISTORY_TURN_SHORT_CHARS, then whole
    turns dropped. Returns (messages shortened, messages dropped)."""
    shortened = 0
    for index in range(question_index):
        if fits():
            return shortened, 0
        shortened += _shorten_text(messages, index, HISTORY_TURN_SHORT_CHARS)
    dropped = 0
    while not fits() and question_index - dropped >= 2:
        del messages[0:2]
        dropped += 2
    return shortened, dropped


def _shorten_text(messages: list[dict[str, Any]], index: int, limit: int) -> bool:
    message = messages[index]
    blocks = message["content"] if isinstance(message["content"], list) else [{"type": "text",
                                                                                "text": message["content"]}]
    if not any(b.get("type") == "text" and len(uncut(b["text"])) > limit for b in blocks):
        return False
    shorter = [{**b, "text": cut(uncut(b["text"]), limit)} if b.get("type") == "text" else b for b in blocks]
    messages[index] = {**message, "content": shorter}
    return True
