"""Token estimates of what a request carries: text by character class, images and PDF pages by the API's rules, each
message counted once per run (:class:`TokenMemo`). Claude's tokenizer is not public (Bedrock's CountTokens would cost a
request per request): the loop scales these up when the usage reported runs higher."""

from __future__ import annotations

import base64
import functools
import io
import json
import logging
from typing import Any

# Estimates, not measured: English runs at 3.5-4 characters a token, Japanese at 1-1.5 tokens a character (kanji
# more than kana); both count at the pessimistic end.
ASCII_CHARS_PER_TOKEN = 3.5
NON_ASCII_TOKENS_PER_CHAR = 1.5


def estimate_tokens(text: str) -> int:
    """A deliberately pessimistic token count (see the ratios above)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return _from_counts(ascii_chars, len(text) - ascii_chars)


def _from_counts(ascii_chars: int, other_chars: int) -> int:
    return int(ascii_chars / ASCII_CHARS_PER_TOKEN + other_chars * NON_ASCII_TOKENS_PER_CHAR) + 1


# Media count by what the model sees: an image about w*h/750 tokens, scaled to ~1.15 megapixels at most; a PDF
# page its text (Anthropic's PDF guide: 1,500-3,000 tokens) plus its image, at the pessimistic end.
IMAGE_TOKENS = 1_600
PDF_PAGE_TOKENS = 3_000 + IMAGE_TOKENS
UNREADABLE_PDF_PAGES = 100  # a document block whose PDF cannot be parsed counts as the most the API takes


def pdf_pages(data: bytes) -> int:
    """Pages in a PDF by its page tree (pypdf: object streams and incremental updates included); ValueError when
    it cannot be read (broken, or encrypted). pypdf's warnings about a broken file are not logged."""
    from pypdf import PdfReader

    quiet = logging.getLogger("pypdf")
    quiet.propagate, quiet.disabled = False, True  # a hostile file's parse notes are nobody's log line
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("encrypted")
        return len(reader.pages)
    except Exception as exc:  # any parser failure on an attacker's bytes means the same
        raise ValueError(f"not a readable PDF ({type(exc).__name__})") from None


@functools.lru_cache(maxsize=16)
def _document_pages(data: str) -> int:
    """Pages of a base64 document, parsed once per block (its string is the same object request after request)."""
    try:
        return pdf_pages(base64.b64decode(data))
    except ValueError:
        return UNREADABLE_PDF_PAGES


def media_tokens(block: dict[str, Any]) -> int | None:
    """The token estimate of an image or base64 document block; None for any other block."""
    source = block.get("source") if block.get("type") in ("image", "document") else None
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    if block["type"] == "image":
        return IMAGE_TOKENS
    return _document_pages(str(source.get("data") or "")) * PDF_PAGE_TOKENS


def _strip_media(blocks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The blocks with media blocks left out (also inside a tool_result: a tool's images), and what those count."""
    kept, media = [], 0
    for block in blocks:
        tokens = media_tokens(block)
        if tokens is not None:
            media += tokens
            continue
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            inner, tokens = _strip_media(block["content"])
            block, media = {**block, "content": inner}, media + tokens
        kept.append(block)
    return kept, media


def block_tokens(block: dict[str, Any]) -> int:
    """The estimate of one block: its JSON text, its media by what the model sees."""
    kept, media = _strip_media([block])
    return media + sum(estimate_tokens(json.dumps(b, ensure_ascii=False)) for b in kept)


def request_tokens(system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]],
                   memo: TokenMemo | None = None) -> int:
    """The request's estimate: the system text, ``[tools, messages]`` as compact JSON without the media, 4 a
    message, and the media by what the model sees; a run's ``memo`` serializes each message once."""
    ascii_chars, other_chars, media = (memo or TokenMemo()).counts(tools, messages)
    return estimate_tokens(system) + _from_counts(ascii_chars, other_chars) + 4 * len(messages) + media


def _char_counts(value: Any, media: int = 0) -> tuple[int, int, int]:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars, len(text) - ascii_chars, media


class TokenMemo:
    """What each message and the tools count in :func:`request_tokens`' payload, kept by identity (messages are
    replaced, never mutated, as :class:`CacheState` relies on too)."""

    def __init__(self) -> None:
        self._tools: tuple[Any, tuple[int, int, int]] | None = None
        self._messages: dict[int, tuple[dict[str, Any], Any, tuple[int, int, int]]] = {}

    def counts(self, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> tuple[int, int, int]:
        """(ASCII characters, other characters, media tokens) of ``[tools, messages without media]``."""
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, _char_counts(tools))
        totals = [self._tools[1][0] + 5 + max(len(messages) - 1, 0), *self._tools[1][1:]]  # "[" t ",[" m "," m "]]"
        known, self._messages = self._messages, {}
        for message in messages:
            entry = known.get(id(message))
            if entry is None or entry[0] is not message or entry[1] is not message["content"]:
                content, tokens = message["content"], 0
                if isinstance(content, list):
                    content, tokens = _strip_media(content)
                entry = (message, message["content"], _char_counts({**message, "content": content}, tokens))
            self._messages[id(message)] = entry
            totals = [t + c for t, c in zip(totals, entry[2], strict=True)]
        return totals[0], totals[1], totals[2]
