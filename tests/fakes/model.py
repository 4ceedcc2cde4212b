"""A model that is a function of the transcript, for tests, benches and evals (pydantic-ai's FunctionModel).

    def script(request: ScriptedRequest) -> Reply:
        if request.round == 1:
            return calls(("faq_search", {"query": "在庫"}), ("redmine_search", {"query": "在庫"}))
        return text("在庫同期は… [FAQ](faq://stock-sync-delay)")

    agent = Agent(ScriptedModel(script), tools)

The function sees what a real model would, as a :class:`ScriptedRequest`, recorded deep-copied in
``model.requests``. Usage is estimated from the request unless the reply brings its own, so cost and budget logic
run as against Bedrock; a script may raise ModelUnavailable to act like an outage.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from typing import Any

from agent.core.loop import FORCED_NOTES
from agent.core.model import ModelResponse, Request, Usage
from agent.core.notes import NOTES_HEADER
from agent.core.tokens import estimate_tokens, request_tokens

Reply = ModelResponse | str | list[dict[str, Any]]
_ids = itertools.count(1)
_FINAL_NOTES = tuple(note.removeprefix("[helpbot] ") for note in FORCED_NOTES.values())


class ScriptedRequest(Request):
    """A :class:`Request` with the conveniences tests and benches read it by."""

    @property
    def system_text(self) -> str:
        return "\n".join(block.get("text", "") for block in self.system)

    @property
    def round(self) -> int:
        """1 for the first request about the current question, 2 after one round of tools, ..."""
        rounds = 0
        for message in reversed(self.messages):
            if message["role"] == "user" and not any(b.get("type") == "tool_result" for b in _blocks(message)):
                break
            rounds += message["role"] == "assistant"
        return rounds + 1

    @property
    def final(self) -> bool:
        """The loop's request for the final answer: its last message carries the note that asks for it."""
        last = json.dumps(self.messages[-1], ensure_ascii=False)
        return any(note in last for note in _FINAL_NOTES)

    @property
    def forced(self) -> bool:
        """The final answer, or a request that allows no tool call (``tool_choice: none``)."""
        return self.final or (self.tool_choice or {}).get("type") == "none"

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user message."""
        return [b for b in _blocks(self.messages[-1]) if b.get("type") == "tool_result"]

    def all_text(self) -> str:
        return json.dumps(self.messages, ensure_ascii=False)

    @property
    def cache_breakpoints(self) -> int:
        return self.all_text().count('"cache_control"') + sum("cache_control" in t for t in self.tools) + sum(
            "cache_control" in b for b in self.system)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def notes_of(messages: list[dict[str, Any]]) -> str:
    """The current notes block's text ("" when nothing was summarized yet)."""
    return next((b["text"] for m in messages for b in _blocks(m)
                 if b.get("type") == "text" and b.get("text", "").startswith(NOTES_HEADER)), "")


def text(answer: str) -> ModelResponse:
    return ModelResponse(content=[{"type": "text", "text": answer}], stop_reason="end_turn", usage=Usage())


def calls(*wanted: tuple[str, dict[str, Any]], thought: str = "") -> ModelResponse:
    """A response asking for tools: ``calls(("faq_search", {"query": "x"}), ...)``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": thought}] if thought else []
    content += [{"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": arguments}
                for name, arguments in wanted]
    return ModelResponse(content=content, stop_reason="tool_use", usage=Usage())


class ScriptedModel:
    def __init__(self, script: Callable[[ScriptedRequest], Reply], *, record: bool = True,
                 deltas: Callable[[str], Iterable[str]] | None = None):
        self.script = script
        self.record = record
        self.deltas = deltas or (lambda text: [text])  # how a text block streams to ``request.on_text``
        self.requests: list[ScriptedRequest] = []

    def create(self, sent: Request) -> ModelResponse:
        on_text = sent.on_text
        request = ScriptedRequest(**{f.name: getattr(sent, f.name) for f in fields(Request)})
        if self.record:
            request = copy.deepcopy(replace(request, clock=None, on_text=None))  # the transcript only
            self.requests.append(request)
        reply = self.script(request)
        if isinstance(reply, str):
            reply = text(reply)
        elif isinstance(reply, list):
            reply = ModelResponse(content=reply, stop_reason="tool_use" if any(
                b.get("type") == "tool_use" for b in reply) else "end_turn", usage=Usage())
        if on_text is not None:  # streamed as a real model does: each text block's deltas, in order
            for block in reply.content:
                if block.get("type") == "text" and block.get("text"):
                    for delta in self.deltas(block["text"]):
                        on_text(delta)
        if reply.usage == Usage():
            prompt = request_tokens(request.system_text, request.tools, request.messages)
            output = estimate_tokens(json.dumps(reply.content, ensure_ascii=False))
            reply = ModelResponse(reply.content, reply.stop_reason, Usage(prompt, output), reply.retries)
        return reply
