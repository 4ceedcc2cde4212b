"""Prompt caching: where a request's cache breakpoints go, following what earlier requests really cached."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

CACHE = {"type": "ephemeral"}


def _with_cache(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": CACHE}


@dataclass
class CacheState:
    """Where a run's cache entries end (message indices) and the messages as sent. Messages are replaced, never
    mutated: an entry stays valid while every message up to it is the same object."""

    entries: list[int] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    def valid_entry(self, messages: list[dict[str, Any]]) -> int | None:
        """The end of the longest prefix still cached (a message index), or None."""
        same = sum(1 for _ in takewhile(lambda pair: pair[0] is pair[1], zip(messages, self.sent, strict=False)))
        self.entries = [i for i in self.entries if i < same]
        return max(self.entries, default=None)

    def record(self, messages: list[dict[str, Any]], marked: list[int]) -> None:
        self.sent = list(messages)
        self.entries = sorted(set(self.entries) | set(marked))


def cached_request(system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]], *,
                   cache: CacheState, write_at: int | None = -1, keep_at: int | None = None
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Copies of system, tools and messages with at most 4 breakpoints: the system block (the prefix every request
    shares); the longest prefix still cached (read, not written again); message ``write_at``, written for the next
    request (None: a final request writes nothing); with it ``keep_at``, the end of what later clearings keep; a
    spare goes on the last tool."""
    marked: list[int] = []
    if write_at is not None:
        marked.append(write_at % len(messages))
        if keep_at is not None and keep_at < marked[0]:
            marked.append(keep_at)
    if (stable := cache.valid_entry(messages)) is not None and stable not in marked:
        marked.append(stable)  # the entry that is really there, so a final request writes nothing
    cached_tools = [*tools[:-1], _with_cache(tools[-1])] if tools and len(marked) < 3 else list(tools)  # a spare
    out = list(messages)
    for index in marked:
        content = out[index]["content"]
        if content:
            out[index] = {**out[index], "content": [*content[:-1], _with_cache(content[-1])]}
    cache.record(messages, [i for i in marked if out[i] is not messages[i]])
    return [_with_cache({"type": "text", "text": system})], cached_tools, out
