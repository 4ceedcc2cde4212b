"""Fakes for the agent tests: a tool provider made of plain functions, tools that hang, and a transcript checker."""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from agent.core.tools import ToolOutcome
from mcp_lib.redact import redact_secrets


class FakeTools:
    """A ToolExecutor from functions ``name -> fn(arguments)``; a function returns a ToolOutcome, a dict or list
    (serialized as JSON, items with ``url`` become sources) or a string, or raises."""

    def __init__(self, functions: dict[str, Callable[[dict[str, Any]], Any]], guide: str = "## fake\nA fake.",
                 writes: frozenset[str] = frozenset()):
        self.functions = functions
        self._guide = guide
        self.writes = writes
        self.counts: Counter[str] = Counter()
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def schemas(self) -> list[dict[str, Any]]:
        return [{"name": name, "description": f"The {name} tool.",
                 "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}
                for name in self.functions]

    def guide(self) -> str:
        return self._guide

    def is_read_only(self, name: str) -> bool:
        return name not in self.writes

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        with self._lock:
            self.counts[name] += 1
            self.seen.append((name, arguments))
        if name not in self.functions:
            return ToolOutcome.error(f"unknown tool {name!r}")
        value = self.functions[name](arguments)
        if isinstance(value, ToolOutcome):
            return value
        if isinstance(value, str):
            return ToolOutcome(value)
        items = value if isinstance(value, list) else [value]
        sources = [{"url": i["url"], "title": i.get("title", i["url"])} for i in items if i.get("url")]
        return ToolOutcome(json.dumps({"status": "ok", "items": items}, ensure_ascii=False), sources=sources)

    def search_calls(self, question: str) -> list[tuple[str, dict[str, Any]]]:
        return [(name, {"query": question}) for name in self.functions if "search" in name]

    def mask(self, text: str) -> str:
        return redact_secrets(text)


def check_transcript(messages: list[dict[str, Any]]) -> None:
    """What the Messages API demands: roles alternate starting with the user, and every tool_use is answered by a
    tool_result -- first in the very next user message, same ids, same order; no orphan tool_results."""
    assert messages[0]["role"] == "user"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], "roles must alternate"
    for index, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if not ids:
                continue
            assert index + 1 < len(messages), f"tool_use {ids} left unanswered at the end"
            nxt = messages[index + 1]["content"]
            answered = [b["tool_use_id"] for b in nxt if b.get("type") == "tool_result"]
            assert answered == ids, f"tool_use {ids} answered by {answered}"
            assert all(b.get("type") == "tool_result" for b in nxt[: len(ids)]), "tool_results must come first"
        else:
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if results:
                previous = messages[index - 1]["content"]
                assert results == [b["id"] for b in previous if b.get("type") == "tool_use"], "orphan tool_result"


class Hangs:
    """Tools that hang until released, and the tool wait (``Agent(tool_wait=...)``) for them: a batch's timeout
    passes as soon as each of its threads has ended or hangs here -- no real sub-second timeouts in the tests."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hanging: set[threading.Thread] = set()
        self.waits: list[float] = []  # the timeout of every batch waited for

    def tool(self, result: Any = "late") -> Callable[[dict[str, Any]], Any]:
        def hang(arguments: dict[str, Any]) -> Any:
            self.hanging.add(threading.current_thread())
            self.release.wait(10)
            return result
        return hang

    def wait(self, threads: Sequence[threading.Thread], timeout_s: float) -> None:
        self.waits.append(timeout_s)
        for thread in threads:
            for _ in range(2000):  # ~10 s at most: a thread neither ending nor hanging fails the test
                if thread in self.hanging:
                    break
                thread.join(0.005)
                if not thread.is_alive():
                    break
            else:
                raise AssertionError(f"{thread.name} neither ended nor hung")
