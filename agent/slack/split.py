"""Text cut to Slack's limits: lengths as Slack counts them, markdown split into parts, one way to shorten.

Lengths are counted in UTF-16 code units: that is what Slack's limits count, it is never less than the number of
code points, and a Japanese character counts as one (not three UTF-8 bytes). No cut separates a character from
its combining marks, ZWJ sequences or skin tones. A paragraph, code block or table is cut only when it does not
fit in a part, and every part keeps balanced code fences (closed, and reopened with the same info string).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

MARKDOWN_LIMIT = 12_000  # per payload, all markdown blocks together
ELLIPSIS = "…"


def slack_len(text: str) -> int:
    """Length as Slack counts it (UTF-16 code units): one per Japanese character, two per emoji."""
    return len(text.encode("utf-16-le")) // 2


_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_SENTENCE_END = re.compile(r"[。！？!?]|[.;:,、，](?=\s)|\s")


@dataclass
class _Segment:
    """A paragraph, a fenced code block or a table: split only inside, repeating ``head``/``tail``."""

    lines: list[str]
    head: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.head + self.lines + self.tail)


def _segments(text: str) -> list[_Segment]:
    segments: list[_Segment] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            if len(para) >= 2 and para[0].lstrip().startswith("|") and _TABLE_RULE.match(para[1]):
                segments.append(_Segment(para[2:], head=para[:2]))
            else:
                segments.append(_Segment(list(para)))
            para.clear()

    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        opener = _FENCE_OPEN.match(line)
        if opener and not (opener.group(1)[0] == "`" and "`" in opener.group(2)):
            flush()
            fence = opener.group(1)
            body: list[str] = []
            i += 1
            closing = None
            while i < len(lines):
                stripped = lines[i].strip()
                if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                    closing = lines[i]
                    break
                body.append(lines[i])
                i += 1
            # An unterminated fence (the model stopped mid-block) is closed, so every part stays balanced.
            indent = line[: len(line) - len(line.lstrip())]
            segments.append(_Segment(body, head=[line], tail=[closing if closing is not None else indent + fence]))
            i += 1
            continue
        if line.strip():
            para.append(line)
        else:
            flush()
        i += 1
    flush()
    return segments


def _unbreakable_before(text: str, pos: int) -> bool:
    """True where a cut at ``pos`` would separate a character from its combining mark / ZWJ / modifier."""
    if pos <= 0 or pos >= len(text):
        return False
    nxt, prev = text[pos], text[pos - 1]
    return (
        unicodedata.combining(nxt) != 0
        or unicodedata.category(nxt) in ("Mn", "Me")
        or nxt in "\u200d\ufe0e\ufe0f" or prev == "\u200d"
        or 0x1F3FB <= ord(nxt) <= 0x1F3FF  # skin tones
        or 0xE0020 <= ord(nxt) <= 0xE007F  # tag sequences (flags)
    )


def hard_split(line: str, budget: int) -> list[str]:
    """Cut one over-long line: after a sentence end or a space when possible, never inside a grapheme."""
    pieces = []
    while slack_len(line) > budget:
        end, used = 0, 0
        while end < len(line) and used + slack_len(line[end]) <= budget:
            used += slack_len(line[end])
            end += 1
        window_start = max(1, end * 6 // 10)
        best = None
        for match in _SENTENCE_END.finditer(line, window_start, end):
            best = match.end()
        cut = best if best and best > 0 else end
        while cut > 1 and _unbreakable_before(line, cut):
            cut -= 1
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip() if best else line[cut:]
    pieces.append(line)
    return [p for p in pieces if p]


def _split_segment(segment: _Segment, limit: int, first_limit: int | None = None) -> list[str]:
    """The segment whole if it fits, else pieces of at most ``limit`` (the first at most ``first_limit``)."""
    whole = segment.text()
    if slack_len(whole) <= limit:
        return [whole]
    frame = slack_len("\n".join([*segment.head, ""])) + slack_len("\n".join(["", *segment.tail]))
    budget = max(limit - frame, 1)
    lines: list[str] = []
    for line in segment.lines:
        lines += hard_split(line, budget) if slack_len(line) > budget else [line]
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    room = budget if first_limit is None else first_limit - frame
    for line in lines:
        cost = slack_len(line) + (1 if current else 0)
        if used + cost > room:
            if current:
                pieces.append("\n".join(segment.head + current + segment.tail))
            current, used, room = [], 0, budget
            cost = slack_len(line)
        current.append(line)
        used += cost
    if current or not pieces:
        pieces.append("\n".join(segment.head + current + segment.tail))
    return pieces


def split_markdown(text: str, limit: int = MARKDOWN_LIMIT) -> list[str]:
    """Split markdown into parts of at most ``limit`` UTF-16 units, each with balanced code fences.

    A paragraph, code block or table that fits in a part is never cut; one that does not fit in any part
    is cut at line (then sentence) boundaries, its first piece filling what is left of the current part.
    """
    if limit < 40:
        raise ValueError("limit too small to split markdown sensibly")
    parts: list[str] = []
    current = ""
    for segment in _segments(text):
        room = limit - slack_len(current) - 2 if current else limit
        for piece in _split_segment(segment, limit, room if room >= limit // 4 else None):
            candidate = f"{current}\n\n{piece}" if current else piece
            if slack_len(candidate) <= limit:
                current = candidate
            else:
                parts.append(current)
                current = piece
    if current or not parts:
        parts.append(current)
    return parts


def cut(text: str, limit: int) -> str:
    """``text`` stripped, and shortened to at most ``limit`` (Slack's count) with "…" when it is longer: the one
    way helpbot shortens a text for people."""
    text = text.strip()
    if slack_len(text) <= limit:
        return text
    return hard_split(text, max(1, limit - 1))[0] + ELLIPSIS
