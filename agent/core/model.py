"""The model seam: the one request the loop sends and the response it gets back, content blocks as the Messages API's
JSON dicts (a transcript can be saved, traced and replayed). Models: ``agent.core.claude``; ``tests.fakes.model``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, astuple, dataclass, field
from typing import Any, Protocol

from mcp_lib.clock import Clock


@dataclass(frozen=True)
class Request:
    """What the Messages API call carries, plus the deadline on the run's ``clock`` (no attempt starts, and no
    request outlives, it; retries sleep on that clock; without one the model uses its own)."""

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: dict[str, Any] | None
    max_tokens: int
    model: str
    deadline: float | None = None
    clock: Clock | None = field(default=None, compare=False, repr=False)
    # Streaming: the response's text as it is generated, delta by delta (not sent; a model that cannot stream
    # calls it with the whole text, or not at all). A retried attempt does not call it again.
    on_text: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    @property
    def prompt_tokens(self) -> int:
        """Everything the request carried, cached or not."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class ModelResponse:
    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: Usage
    retries: list[str] = field(default_factory=list)  # one line per retried attempt, for the trace

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b.get("type") == "text" and b.get("text")).strip()

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


class Model(Protocol):
    def create(self, request: Request) -> ModelResponse: ...
