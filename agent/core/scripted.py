"""A model that is a function of the transcript, for tests, benches and evals (pydantic-ai's FunctionModel).

    def script(request: Request) -> Reply:
        if request.round == 1:
            return calls(("faq_search", {"query": "在庫"}), ("redmine_search", {"query": "在庫"}))
        return text("在庫同期は… [FAQ](faq://stock-sync-delay)")

    agent = Agent(ScriptedModel(script), tools)

The function sees exactly what a real model would (system blocks, messages, tools, tool_choice) and every
request is recorded, deep-copied, in ``model.requests`` (with the deadline the loop gave it). Usage is estimated
from the request, so cost and budget logic run as they would against Bedrock; a script may return a response
with its own usage instead. A script may raise ModelUnavailable to act like an outage.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from agent.core.model import ModelResponse, Request, Usage
from agent.core.tokens import estimate_tokens, request_tokens

Reply = ModelResponse | str | list[dict[str, Any]]
_ids = itertools.count(1)


def text(answer: str) -> ModelResponse:
    return ModelResponse(content=[{"type": "text", "text": answer}], stop_reason="end_turn", usage=Usage())


def calls(*wanted: tuple[str, dict[str, Any]], thought: str = "") -> ModelResponse:
    """A response asking for tools: ``calls(("faq_search", {"query": "x"}), ...)``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": thought}] if thought else []
    content += [{"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": arguments}
                for name, arguments in wanted]
    return ModelResponse(content=content, stop_reason="tool_use", usage=Usage())


class ScriptedModel:
    def __init__(self, script: Callable[[Request], Reply], *, record: bool = True,
                 deltas: Callable[[str], Iterable[str]] | None = None):
        self.script = script
        self.record = record
        self.deltas = deltas or (lambda text: [text])  # how a text block streams to ``request.on_text``
        self.requests: list[Request] = []

    def create(self, request: Request) -> ModelResponse:
        on_text = request.on_text
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
