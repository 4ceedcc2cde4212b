"""The :class:`TaggingAgent`: the agent loop with each question tagged first (:mod:`agent.core.tags`) and the tags
applied -- their prompt part and, in degraded mode, faq_search's boosts. Apart from the tags, so that checking the
``[[tags]]`` configuration imports no loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.core.loop import Agent
from agent.core.model import Usage
from agent.core.run import Answer, Prelude, Turn
from agent.core.tags import FAQ_SEARCH, TagConfig, tag_question
from agent.core.tools import ToolExecutor


class BoostedTools:
    """The same tools, except that degraded mode's faq_search also gets the tags to boost."""

    def __init__(self, inner: ToolExecutor, faq_tags: Sequence[str]):
        self.inner = inner
        self.faq_tags = list(faq_tags)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def search_calls(self, question: str) -> list[tuple[str, dict[str, Any]]]:
        takes_tags = {s["name"] for s in self.inner.schemas()
                      if "tags" in (s.get("input_schema") or {}).get("properties", {})}
        return [(name, {**args, "tags": self.faq_tags} if name == FAQ_SEARCH and name in takes_tags
                 and "tags" not in args else args)
                for name, args in self.inner.search_calls(question)]


class TaggingAgent(Agent):
    """An :class:`Agent` that tags each question first and runs it with the tags applied: the boosted tools are
    that run's, and the tagging is its prelude (prompt part, trace, usage, time, tags)."""

    def __init__(self, tag_config: TagConfig, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.tag_config = tag_config

    def run(self, question: str, history: Sequence[Turn] = (), context: str = "", *,
            tools: ToolExecutor | None = None, prelude: Prelude | None = None,
            attachments: Sequence[dict[str, Any]] = ()) -> Answer:
        # A follow-up inherits its thread's topic: the earlier questions and the context (the thread around the
        # question) count too. Only the tagging sees them together; the run itself keeps them apart.
        text = "\n".join(part for part in (*(turn.question for turn in history), question, context) if part)
        tagging = tag_question(self.tag_config, text, model=self.model, settings=self.settings, clock=self.clock)
        tools = tools or self.tools
        part = tagging.prompt_part([s["name"] for s in tools.schemas()])
        earlier = prelude or Prelude()
        usage = dict(earlier.usage)
        if tagging.consulted:
            usage[tagging.model] = usage.get(tagging.model, Usage()) + tagging.usage
        return super().run(
            question, history, context,
            tools=BoostedTools(tools, tagging.faq_tags) if tagging.faq_tags else tools,
            prelude=Prelude(prompt_parts=(*earlier.prompt_parts, part) if part else earlier.prompt_parts,
                            tags=(*earlier.tags, *tagging.names), events=(*earlier.events, tagging.event()),
                            usage=usage, seconds=earlier.seconds + tagging.seconds),
            attachments=attachments)
