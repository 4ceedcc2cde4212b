"""Cutting text with a marker that says how much was cut."""

from __future__ import annotations

from agent.core.tokens import estimate_tokens

CUT_MARKER = "\n…[helpbot: {n} more characters cut to stay within the request budget]"
MIN_CUT_CHARS = 400


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + CUT_MARKER.format(n=len(text) - limit)


def uncut(text: str) -> str:
    """The text without the marker an earlier ``cut`` added (so cutting again does not stack markers)."""
    return text.split(CUT_MARKER[:12])[0]


def cut_to_tokens(text: str, tokens: int) -> str:
    """``text`` cut (with the marker) so that its estimate is at most about ``tokens``."""
    estimate = estimate_tokens(text)
    if estimate <= tokens:
        return text
    chars = len(text)
    for _ in range(4):  # the ratio of characters to tokens varies along mixed text: refine a few times
        chars = max(MIN_CUT_CHARS, int(chars * tokens / max(1, estimate)))
        estimate = estimate_tokens(text[:chars])
        if estimate <= tokens:
            break
    return cut(text, chars)
