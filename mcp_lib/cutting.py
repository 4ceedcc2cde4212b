"""Every way a text is cut, shortened, split or squashed onto one line, each under a name that says what it keeps.
Lengths are characters, except where Slack's limits count UTF-16 code units (:func:`slack_len`)."""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from .redact import redact_secrets

TRUNCATION_MARKER = "…[truncated: {n} more characters]"
_MARKER_AT_END = re.compile(r"…\[truncated: (\d{1,18}) more characters\]\Z")  # a count Python can parse
MASK_MARGIN = 1024  # how far past a cut masking looks: a secret shorter than this across the cut is masked whole
MARKDOWN_LIMIT = 12_000  # Slack's, per payload, all markdown blocks together


def squash_whitespace(text: str) -> str:
    """Every run of whitespace (newlines too) as one space, none at either end: a text on one line."""
    return " ".join(text.split())


def keep_start(text: str, limit: int, marker: str = TRUNCATION_MARKER, left_out: int = 0) -> str:
    """The first ``limit`` characters and, when any were left out (or ``left_out`` were before), ``marker``
    counting them all (its ``{n}``)."""
    count = max(0, len(text) - limit) + left_out
    return text[:limit] + marker.format(n=count) if count else text


def without_marker(text: str, marker: str) -> str:
    """The text without the marker :func:`keep_start` added (so cutting again does not stack markers)."""
    return text.split(marker.partition("{n}")[0])[0]


def keep_start_masked(text: str, limit: int, mask: Callable[[str], str] = redact_secrets) -> tuple[str, bool]:
    """``text`` masked and held to ``limit`` with :data:`TRUNCATION_MARKER` (one marker counting all that was left
    out, a platform's earlier cut too), and whether it was cut. Masked within ``limit + MASK_MARGIN`` only: it
    reads only what may be kept, and no secret straddling the cut is left too short to be recognised."""
    found = _MARKER_AT_END.search(text) if text.endswith("]") else None
    if found:
        text = text[: found.start()]
    left_out = max(0, len(text) - limit - MASK_MARGIN) + (int(found.group(1)) if found else 0)
    masked = mask(text[: limit + MASK_MARGIN])
    return keep_start(masked, limit, TRUNCATION_MARKER, left_out), len(masked) > limit or left_out > 0


def keep_start_within_tokens(text: str, tokens: int, estimate: Callable[[str], int], marker: str,
                             minimum: int = 0) -> str:
    """:func:`keep_start` (at least ``minimum`` characters) so that ``estimate`` of it is at most about ``tokens``."""
    estimated = estimate(text)
    if estimated <= tokens:
        return text
    chars = len(text)
    for _ in range(4):  # the ratio of characters to tokens varies along mixed text: refine a few times
        chars = max(minimum, int(chars * tokens / max(1, estimated)))
        estimated = estimate(text[:chars])
        if estimated <= tokens:
            break
    return keep_start(text, chars, marker)


def keep_start_and_end(text: str, limit: int) -> tuple[str, int]:
    """Head and tail of ``text`` within ``limit`` characters (a log's error is often at its end), and how many
    characters were left out between."""
    if len(text) <= limit:
        return text, 0
    head = limit * 2 // 3
    left_out = len(text) - limit
    return f"{text[:head]}\n…[helpbot: 中略 {left_out} 文字]…\n{text[head + left_out:]}", left_out


def excerpt(text: str, width: int, start: int = 0) -> str:
    """``width`` characters of ``text`` from ``start``, with "…" on each side where text was left out: a
    snippet or a title (a field that is too long gets :func:`keep_start_masked`'s marker)."""
    start = max(0, start)
    return ("…" if start else "") + text[start : start + width] + ("…" if start + width < len(text) else "")


def shorten_at_word(text: str, limit: int) -> str:
    """``text`` stripped and, when longer than ``limit`` (Slack's count), cut after a sentence end or a space
    (never inside a character) with "…": a text for people."""
    text = text.strip()
    if slack_len(text) <= limit:
        return text
    return split_line(text, max(1, limit - 1))[0] + "…"


def slack_len(text: str) -> int:
    """Length as Slack counts it (UTF-16 code units): one per Japanese character, two per emoji."""
    return len(text.encode("utf-16-le")) // 2


_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
# possessive: the runs of spaces around an optional "|" are not shared out anew for every way to fail
_TABLE_RULE = re.compile(r"^\s*+\|?\s*+:?-{3,}+:?\s*+(?:\|\s*+:?-{3,}+:?\s*+)*+\|?\s*+$")
_SENTENCE_END = re.compile(r"[。！？!?]|[.;:,、，](?=\s)|\s")


@dataclass
class _Segment:
    """A paragraph, a fenced code block or a table: split only inside, repeating ``head``/``tail``."""

    lines: list[str]
    head: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)


def _segments(text: str) -> list[_Segment]:
    segments: list[_Segment] = []
    para: list[str] = []

    def flush() -> None:
        table = len(para) >= 2 and para[0].lstrip().startswith("|") and _TABLE_RULE.match(para[1])
        if para:
            segments.append(_Segment(para[2:], head=para[:2]) if table else _Segment(para[:]))
        para.clear()

    lines = iter(text.replace("\r\n", "\n").split("\n"))
    for line in lines:
        opener = _FENCE_OPEN.match(line)
        if opener and not (opener.group(1)[0] == "`" and "`" in opener.group(2)):
            flush()
            fence, body = opener.group(1), []
            # An unterminated fence (the model stopped mid-block) is closed, so every part stays balanced.
            closing = line[: len(line) - len(line.lstrip())] + fence
            for inner in lines:
                stripped = inner.strip()
                if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                    closing = inner
                    break
                body.append(inner)
            segments.append(_Segment(body, head=[line], tail=[closing]))
        elif line.strip():
            para.append(line)
        else:
            flush()
    flush()
    return segments


def _unbreakable_before(text: str, pos: int) -> bool:
    """Whether a cut at ``pos`` (0 < pos < len) would part a character from its combining mark / ZWJ / modifier."""
    nxt, prev = text[pos], text[pos - 1]
    return (
        unicodedata.combining(nxt) != 0
        or unicodedata.category(nxt) in ("Mn", "Me")
        or nxt in "\u200d\ufe0e\ufe0f" or prev == "\u200d"
        or 0x1F3FB <= ord(nxt) <= 0x1F3FF  # skin tones
        or 0xE0020 <= ord(nxt) <= 0xE007F  # tag sequences (flags)
    )


def split_line(line: str, budget: int) -> list[str]:
    """One over-long line in pieces of at most ``budget`` (Slack's count): after a sentence end or a space when
    possible, never inside a grapheme."""
    pieces = []
    while slack_len(line) > budget:
        end = bisect.bisect_right(list(itertools.accumulate(map(slack_len, line[:budget]))), budget)  # what fits
        # the last sentence end or space in the window's last 40 %, else the window's end
        best = max((match.end() for match in _SENTENCE_END.finditer(line, max(1, end * 6 // 10), end)), default=0)
        cut = best or end
        while cut > 1 and _unbreakable_before(line, cut):
            cut -= 1
        if cut == 1 and end > 1 and _unbreakable_before(line, 1):  # one grapheme wider than the window (a letter
            cut = end  # and 5000 combining marks): cut at the window's end, not one character per window scanned
        if cut == 0:  # not even the first character fits (an emoji in a budget of 1): it goes alone, over
            cut = next((i for i in range(1, len(line)) if not _unbreakable_before(line, i)), len(line))
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip() if best else line[cut:]
    pieces.append(line)
    return [p for p in pieces if p]


def _split_segment(segment: _Segment, limit: int, first_limit: int | None = None) -> list[str]:
    """The segment whole if it fits, else pieces of at most ``limit`` (the first at most ``first_limit``)."""
    whole = "\n".join(segment.head + segment.lines + segment.tail)
    if slack_len(whole) <= limit:
        return [whole]
    frame = sum(slack_len(line) + 1 for line in segment.head + segment.tail)  # with their newlines
    if frame > limit // 2:  # a fence or table head too long to repeat in every part: cut it as plain lines
        segment, frame = _Segment(segment.head + segment.lines + segment.tail), 0
    budget = max(limit - frame, 1)
    lines = [piece for line in segment.lines
             for piece in (split_line(line, budget) if slack_len(line) > budget else [line])]
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    room = budget if first_limit is None else first_limit - frame
    for line in lines:
        cost = slack_len(line) + (1 if current else 0)
        if used + cost > room:
            if current:
                pieces.append("\n".join(segment.head + current + segment.tail))
            current, used, room, cost = [], 0, budget, slack_len(line)
        current.append(line)
        used += cost
    if current or not pieces:
        pieces.append("\n".join(segment.head + current + segment.tail))
    return pieces


def split_markdown(text: str, limit: int = MARKDOWN_LIMIT) -> list[str]:
    """Markdown in parts of at most ``limit`` (Slack's count), each with balanced code fences (closed, and
    reopened with the same info string). A paragraph, code block or table that fits in a part is never cut; one
    that fits in none is cut at lines (then sentences), its first piece filling what is left of the part."""
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
                parts += [current] if current else []
                current = piece
    if current or not parts:
        parts.append(current)
    return parts
