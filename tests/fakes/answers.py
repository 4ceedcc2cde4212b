"""A finished :class:`agent.core.run.Answer` for tests of what is posted (the loop makes real ones)."""

from __future__ import annotations

from collections.abc import Sequence

from agent.core.run import Answer, Stop, ToolCall


def make_answer(text: str, *, sources: Sequence[dict[str, str]] = (), rounds: int = 2,
                tools: Sequence[str] = ("faq_search",), cost_usd: float = 0.0, degraded: bool = False,
                tags: Sequence[str] = (), stop: Stop = "end_turn") -> Answer:
    return Answer(text=text, sources=list(sources), consulted=list(sources), rounds=rounds,
                  tool_calls=[ToolCall(name=name, input={}, is_error=False, round=1) for name in tools],
                  usage_by_model={}, cost_usd=cost_usd, degraded=degraded, seconds=1.0, stop=stop,
                  tags=list(tags))
