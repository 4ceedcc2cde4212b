"""What a run is made of: the conversation it builds on, what it did, and the answer it gives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from agent.core.economy import Economy
from agent.core.model import Usage
from agent.core.tools import ToolExecutor

Phase = Literal["thinking", "tools", "summarizing", "answering", "degraded"]
# Why the run ended: the model's stop reasons, or the loop's (rounds, time, HELPBOT_MAX_COST_USD, no model).
Stop = Literal["end_turn", "max_tokens", "stop_sequence", "pause_turn", "refusal", "model_context_window_exceeded",
               "round_limit", "deadline", "cost_limit", "degraded"]
_MODEL_STOPS = frozenset(get_args(Stop)) - {"round_limit", "deadline", "cost_limit", "degraded"}


def model_stop(reason: str | None) -> Stop:
    """The model's stop_reason as a :data:`Stop`; one we do not know (a newer API) counts as ``end_turn``."""
    return cast(Stop, reason) if reason in _MODEL_STOPS else "end_turn"


@dataclass
class Turn:
    """An earlier question and answer of the same conversation (a thread follow-up)."""

    question: str
    answer: str
    sources: list[dict[str, str]] = field(default_factory=list)


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any]
    is_error: bool
    round: int  # 1 for the first round of tools; 0 for degraded mode's searches
    reused: bool = False


@dataclass
class Progress:
    """What the run is doing now; the Slack front shows it in the placeholder message."""

    round: int
    max_rounds: int
    phase: Phase
    tools: list[str] = field(default_factory=list)

    def line(self) -> str:
        return {"tools": f"round {self.round}/{self.max_rounds}: {', '.join(self.tools)}",
                "thinking": f"round {self.round}/{self.max_rounds}: thinking",
                "summarizing": "summarizing earlier results", "answering": "writing the answer",
                "degraded": "no AI model: searching directly"}[self.phase]


@dataclass
class Answer:
    """What a run gives back: the answer, its sources, and what it took (rounds, calls, usage, cost, time)."""

    text: str
    sources: list[dict[str, str]]  # the ones the answer cites
    consulted: list[dict[str, str]]  # everything the tools returned
    rounds: int
    tool_calls: list[ToolCall]
    usage_by_model: dict[str, Usage]
    cost_usd: float
    degraded: bool
    seconds: float
    stop: Stop
    tags: list[str]  # the question's tags (agent.core.tags), shown in the footers
    error: str | None = None  # why the run degraded
    trace: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        return sum(self.usage_by_model.values(), Usage())

    def to_json(self) -> dict[str, Any]:
        return {"answer": self.text, "sources": [{"title": s["title"], "url": s["url"]} for s in self.sources],
                "rounds": self.rounds,
                "tool_calls": [{"name": c.name, "input": c.input, "is_error": c.is_error} for c in self.tool_calls],
                "usage": self.usage.to_dict(), "degraded": self.degraded, "cost_usd": round(self.cost_usd, 6),
                "seconds": round(self.seconds, 2), "stop": self.stop, "error": self.error, "tags": self.tags}


@dataclass(frozen=True)
class Plan:
    """What a run is given and never changes."""

    question: str  # as the model sees it (cut to max_question_chars)
    query: str  # what degraded mode searches for: the head of the question, without any cut marker
    started: float  # on the run's clock (including the question's tagging)
    soft_deadline: float  # no tool round starts, no tool runs and no request for more tools waits past this
    hard_deadline: float  # the final answer's request ends here
    system: str
    tools: ToolExecutor  # this run's tools (Agent.run(tools=...) or the agent's)
    schemas: list[dict[str, Any]]  # their Claude tool entries
    tags: tuple[str, ...] = ()  # the question's (agent.core.tags)
    faq_tags: tuple[str, ...] = ()  # their FAQ tags: degraded mode's faq_search boosts


@dataclass
class Run:
    """What one run accumulates over its plan; its token economy keeps its own state."""

    plan: Plan
    messages: list[dict[str, Any]]
    economy: Economy
    rounds: int = 0
    calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)  # url -> source, first seen first
    sources_by_id: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    seen: dict[str, tuple[int, str]] = field(default_factory=dict)  # call key -> (round, tool_use_id)
    tool_use_ids: set[str] = field(default_factory=set)  # every id so far: unique in the run (vet_tool_uses)
    trace: list[dict[str, Any]] = field(default_factory=list)
    tool_images: list[int] = field(default_factory=list)  # the raw bytes of each tool image shown (mcp_lib.media)

    def add_sources(self, tool_use_id: str, sources: list[dict[str, str]]) -> None:
        self.sources_by_id.setdefault(tool_use_id, []).extend(sources)
        for src in sources:
            self.sources.setdefault(src["url"], src)

    def tally(self, model: str, usage: Usage) -> None:
        self.usage[model] = self.usage.get(model, Usage()) + usage
