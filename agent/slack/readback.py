"""helpbot's posted answers read back as markdown -- their text and what their 参照元 section lists -- whether Slack
hands a markdown block back as it was or as rich_text and sections (follow-ups, ``feedback``, ``faq-draft``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.slack.blocks import SOURCES_TITLE

_SOURCES_HEAD = re.compile(rf"\s*[*_]*{re.escape(SOURCES_TITLE)}[*_]*\s*")
_SOURCE_MD = re.compile(r"\s*[-•*]\s*\[(?P<title>[^\]\n]*)\]\((?P<url>[^)\s]+)\)\s*")
_SOURCE_MRKDWN = re.compile(r"\s*[-•*]\s*<(?P<url>https?://[^|>\s]+)\|(?P<title>[^>]*)>\s*")
_SOURCE_MORE = re.compile(r"\s*[-•*]\s*ほか\s*(?P<n>\d+)\s*件\s*")  # sources_markdown's "- ほか N 件"
# a source without a URL (the title to its last non-space: a lazy one tried the trailing \s* at every character)
_SOURCE_PLAIN = re.compile(r"\s*[-•*]\s+(?P<title>\S(?:.*\S)?)\s*")
_WRAPS = {"rich_text_preformatted": "```\n{}\n```", "rich_text_quote": "> {}"}


def _rich_elements(elements: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for element in elements:
        kind = element.get("type")
        if kind == "text":
            text = str(element.get("text") or "")
            style = element.get("style") or {}
            if style.get("code"):
                text = f"`{text}`"
            if style.get("bold"):
                text = f"**{text}**"
            out.append(text)
        elif kind == "link":
            url = str(element.get("url") or "")
            out.append(f"[{element.get('text') or url}]({url})")
        elif kind == "emoji":
            out.append(f":{element.get('name')}:")
        elif kind in ("user", "channel", "usergroup"):
            out.append(f"<@{element.get('user_id') or element.get('channel_id') or element.get('usergroup_id')}>")
        elif "elements" in element:
            out.append(_rich_elements(element["elements"]))
    return "".join(out)


def block_text(block: Mapping[str, Any]) -> str | None:
    """The text of one block as markdown (Slack may hand a posted markdown block back as rich_text/sections)."""
    kind = block.get("type")
    if kind == "markdown":
        return str(block.get("text") or "")
    if kind in ("section", "header"):
        text = block.get("text") or {}
        return str(text.get("text") or "") if isinstance(text, dict) else str(text)
    if kind != "rich_text":
        return None  # context (the footer), dividers, images: not part of the answer
    parts = []
    for element in block.get("elements") or []:
        sub = element.get("type")
        if sub == "rich_text_list":
            ordered = element.get("style") == "ordered"
            parts.append("\n".join(f"{f'{n}.' if ordered else '-'} {_rich_elements(item.get('elements') or [])}"
                                   for n, item in enumerate(element.get("elements") or [], 1)))
        else:  # a section as it is, a code block fenced, a quote quoted
            parts.append(_WRAPS.get(str(sub), "{}").format(_rich_elements(element.get("elements") or [])))
    return "\n".join(parts)


def message_markdown(message: Mapping[str, Any]) -> str:
    """A posted answer as markdown again: its blocks when it has any, else its fallback text."""
    texts = [t for b in message.get("blocks") or [] if isinstance(b, dict) and (t := block_text(b)) is not None]
    return "\n\n".join(t for t in texts if t.strip()) if texts else str(message.get("text") or "")


@dataclass
class ReadAnswer:
    """A posted answer read back: its text and what its 参照元 section lists."""

    text: str
    sources: list[dict[str, str]]  # {title, url}: the linked ones
    unlinked: list[str] = field(default_factory=list)  # titles listed without a URL
    left_out: int = 0  # "ほか N 件": sources the section had no room for


def read_answer(parts: Sequence[Mapping[str, Any]]) -> ReadAnswer:
    """An answer's messages (one, or a long answer's parts) as markdown, split at the last 参照元 heading."""
    markdown = "\n\n".join(message_markdown(part) for part in parts)
    lines = markdown.split("\n")
    head = next((i for i in reversed(range(len(lines))) if _SOURCES_HEAD.fullmatch(lines[i])), len(lines))
    read = ReadAnswer("\n".join(lines[:head]).strip(), [])
    for line in lines[head + 1:]:
        if match := _SOURCE_MD.fullmatch(line) or _SOURCE_MRKDWN.fullmatch(line):
            read.sources.append({"title": match.group("title").strip(), "url": match.group("url")})
        elif more := _SOURCE_MORE.fullmatch(line):
            read.left_out += int(more.group("n"))
        elif plain := _SOURCE_PLAIN.fullmatch(line):
            read.unlinked.append(plain.group("title"))
    return read
