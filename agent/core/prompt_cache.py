"""Prompt caching: where a request's cache breakpoints go, following what earlier requests really cached."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CACHE = {"type": "ephemeral"}


def _with_cache(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": CACHE}


@dataclass
class CacheState:
    """Where the cache entries of a run's earlier requests end (message indices), and the messages as they were
    then. Messages are replaced, never mutated, so an entry stays valid while every message up to it is still the
    same object; a summary or a budget cut that replaces an earlier message invalidates the entries from there."""

    entries: list[int] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)

    def valid_entry(self, messages: list[dict[str, Any]]) -> int | None:
        """The end of the longest prefix still cached (a message index), or None."""
        same = 0
        for now, then in zip(messages, self.sent, strict=False):
            if now is not then:
                break
            same += 1
        self.entries = [i for i in self.entries if i < same]
        return max(self.entries, default=None)

    def record(self, messages: list[dict[str, Any]], marked: list[int]) -> None:
        self.sent = list(messages)
        self.entries = sorted(set(self.entries) | set(marked))


def cached_request(system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]], *,
                   cache: CacheState, write_at: int | None = -1, keep_at: int | None = None, read: bool = True
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Copies of system, tools and messages with the (at most 4) cache breakpoints: the system block (tools and
    system: the prefix every request shares); the end of the longest prefix an earlier request cached and that is
    still unchanged (``cache`` tracks where the entries really are: after a summary or a clearing, the part before
    the first changed result is read, not written again); the last block of message ``write_at`` (written for the
    next request: the end of the conversation, or the end of what the next request keeps; None for a final
    request, whose write would cost 1.25x for nothing); and with ``write_at`` the last block of message
    ``keep_at`` (the end of what later clearings keep: an entry there, free as part of the write, is what the next
    one reads). Without ``read`` (a request whose ``tool_choice`` differs from the earlier ones', which misses
    every message entry by Anthropic's caching rules) no message is marked. A spare breakpoint goes on the last
    tool."""
    marked: list[int] = []
    if read:
        if write_at is not None:
            marked.append(write_at % len(messages))
            if keep_at is not None and keep_at < marked[0]:
                marked.append(keep_at)
        if (stable := cache.valid_entry(messages)) is not None and stable not in marked:
            marked.append(stable)  # the entry that is really there, so a final request writes nothing
    system_blocks = [_with_cache({"type": "text", "text": system})]
    spare = len(marked) < 3
    cached_tools = [*tools[:-1], _with_cache(tools[-1])] if tools and spare else list(tools)
    out = list(messages)
    for index in marked:
        content = out[index]["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if content:
            out[index] = {**out[index], "content": [*content[:-1], _with_cache(content[-1])]}
    cache.record(messages, [i for i in marked if out[i] is not messages[i]])
    return system_blocks, cached_tools, out
