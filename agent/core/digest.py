"""What a tool result keeps once it is cleared: its digest -- the call it answered, its sources (still citable), the
head of its text, and how to read it whole again (the identical call, answered from the run's copy). Mechanical on
purpose: a paid summary cannot reach the token target (``bench/token_bounds.py``)."""

from __future__ import annotations

import json
from typing import Any

from mcp_lib.cutting import excerpt, squash_whitespace

CLEARED_HEADER = "[helpbot] Shortened after reading (to save tokens); call {name} again, same input, for all of it."
HEAD_CHARS = 80  # of the result's text
MAX_SOURCES = 6  # beyond these, a count
TITLE_CHARS = 60
_NOT_TEXT = ("url", "status", "tool")  # envelope fields, never the head


def digest(name: str, content: str, sources: list[dict[str, str]]) -> str:
    """The cleared form of the result of tool ``name``: the header, its sources and the head of its text."""
    lines = [CLEARED_HEADER.format(name=name),
             *(f"- {excerpt(src['title'], TITLE_CHARS)} <{src['url']}>" for src in sources[:MAX_SOURCES])]
    if len(sources) > MAX_SOURCES:
        lines.append(f"- … {len(sources) - MAX_SOURCES} more sources")
    try:  # the words without the JSON envelope
        head = _first_text(json.loads(content))
    except (ValueError, RecursionError):  # plain text, or nested deeper than the parser goes
        head = content
    if head := squash_whitespace(head):
        lines.append(excerpt(head, HEAD_CHARS))
    return "\n".join(lines)


def _first_text(value: Any) -> str:
    """The first string of at least HEAD_CHARS characters, depth first (at most 8 levels), else the longest."""
    best = ""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if len(item) >= HEAD_CHARS:
                return item
            best = max(best, item, key=len)
        elif level < 8 and isinstance(item, dict):
            stack += [(v, level + 1) for k, v in reversed(item.items()) if k not in _NOT_TEXT]
        elif level < 8 and isinstance(item, list):
            stack += [(v, level + 1) for v in reversed(item)]
    return best
