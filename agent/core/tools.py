"""The tool seam: what the loop needs from "the tools" (:class:`RegistryTools`: mcp_lib's registry), and how a batch of
calls runs in threads. A failed call is a :class:`ToolOutcome` with ``is_error``, not an exception -- and the loop still
guards against an executor that raises."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mcp_lib import Registry
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.cutting import excerpt, squash_whitespace
from mcp_lib.schemas import claude_tools, platform_guide

T = TypeVar("T")


@dataclass
class ToolOutcome:
    content: str  # what the model reads (JSON text for mcp_lib tools)
    is_error: bool = False
    sources: list[dict[str, str]] = field(default_factory=list)  # {"url", "title", "snippet"?}
    timed_out: bool = False  # abandoned after its timeout: the call may still be running (and writing)
    images: list[dict[str, Any]] = field(default_factory=list)  # Claude image blocks, shown after the content

    @classmethod
    def error(cls, message: str) -> ToolOutcome:
        return cls(content=message, is_error=True)


class ToolExecutor(Protocol):
    """What the loop needs from "the tools", whoever provides them."""

    def schemas(self) -> list[dict[str, Any]]: ...  # Claude ``tools=`` entries: name, description, input_schema
    def guide(self) -> str: ...  # the providers' usage scenes and security rules, for the system prompt
    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome: ...
    def is_read_only(self, name: str) -> bool: ...  # False: it may write, no earlier read is reused across it
    def search_calls(self, question: str) -> list[tuple[str, dict[str, Any]]]: ...  # degraded mode's, best first
    def mask(self, text: str) -> str: ...  # what tool results pass (secrets, held credentials); the question too


def _snippet(item: dict[str, Any]) -> str:
    for key in ("snippet", "text", "body", "description"):
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return excerpt(squash_whitespace(value), 200)
    return ""


class RegistryTools:
    """The mcp_lib tools of the enabled platforms."""

    def __init__(self, registry: Registry):
        self.registry = registry
        self._schemas = claude_tools(registry)
        self._names = {entry["name"] for entry in self._schemas}

    def schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    def guide(self) -> str:
        return platform_guide(self.registry)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        if name not in self._names:
            return ToolOutcome.error(f"unknown tool {name!r}; available: {', '.join(sorted(self._names))}")
        result = self.registry.call(name, arguments)
        sources = [{"url": str(item["url"]), "title": str(item.get("title") or item["url"]),
                    **({"snippet": snippet} if (snippet := _snippet(item)) else {})}
                   for item in ([result.item] if result.item else []) + result.items if item.get("url")]
        images = [{"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}
                  for image in result.images]
        return ToolOutcome(content=result.to_json(), is_error=result.is_error, sources=sources, images=images)

    def mask(self, text: str) -> str:
        return self.registry.limits.mask(text)

    def is_read_only(self, name: str) -> bool:
        try:
            return self.registry.find(name).read_only
        except KeyError:  # an unknown tool never runs
            return True

    def search_calls(self, question: str) -> list[tuple[str, dict[str, Any]]]:
        """Every tool whose function is a search taking a ``query`` (faq_search, redmine_search, ...)."""
        return [(tool.wire_name, {"query": question}) for tool in self.registry.tools()
                if tool.function.lower().startswith("search") and any(p.name == "query" for p in tool.params)]


MAX_INPUT_CHARS = 20_000  # a tool_use input larger than this (as JSON) is refused, not run
MAX_INPUT_DEPTH = 32  # ... and one nested deeper than this (no tool takes more than a few levels)


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and dicts in ``value`` nest more than ``limit`` levels (walked without recursion)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            stack += [(child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return False


def vet_tool_uses(content: list[dict[str, Any]], names: set[str], ids: set[str]
                  ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The model's (untrusted) tool_use blocks made safe to answer: each gets a string id unique in the run
    (``ids``, updated: earlier rounds' ids), a string name and an object input; the calls that must not run
    (an id twice in one response, an unknown tool, an input not an object or too big) get why."""
    vetted: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    earlier = set(ids)  # an id of an earlier round is renamed, not refused: some gateways number per response
    for index, block in enumerate(content):
        if block.get("type") != "tool_use":
            vetted.append(block)
            continue
        raw_id, raw_name, raw_input = block.get("id"), block.get("name"), block.get("input")
        name = raw_name if isinstance(raw_name, str) else json.dumps(raw_name, ensure_ascii=False, default=str)
        call_id = raw_id if isinstance(raw_id, str) and raw_id and raw_id not in ids else f"toolu_helpbot_{index}"
        while call_id in ids:
            call_id += "_"
        ids.add(call_id)
        deep = _nested_deeper_than(raw_input, MAX_INPUT_DEPTH)
        try:  # NaN and Infinity parse, but no request can carry them again: the run's next one would be refused
            size = 0 if deep else len(json.dumps(raw_input, ensure_ascii=False, default=str, allow_nan=False))
        except ValueError:
            size = -1
        problem = None
        if isinstance(raw_id, str) and raw_id != call_id and raw_id not in earlier:
            problem = f"not run: duplicate tool_use id {raw_id[:80]!r}; every call needs its own id"
        elif not isinstance(raw_name, str) or name not in names:
            problem = f"unknown tool {name[:80]!r}; available: {', '.join(sorted(names))}"
        elif not isinstance(raw_input, dict):
            problem = f"not run: the input must be a JSON object of arguments, not {type(raw_input).__name__}"
        elif deep:
            problem = f"not run: the input is nested more than {MAX_INPUT_DEPTH} levels deep"
        elif size > MAX_INPUT_CHARS:
            problem = f"not run: the input is too large ({size} characters; at most {MAX_INPUT_CHARS})"
        elif size < 0:
            problem = "not run: the input has a number JSON cannot write (NaN or Infinity)"
        safe_input = raw_input if isinstance(raw_input, dict) and not deep and 0 <= size <= MAX_INPUT_CHARS else {}
        vetted.append({**block, "id": call_id, "name": name[:200], "input": safe_input})
        if problem:
            refused[call_id] = problem
    return vetted, refused


MAX_IN_FLIGHT = 8  # tool calls of one batch running at the same time; the rest wait for a free slot
ThreadWait = Callable[[Sequence[threading.Thread], float], object]


def join_until(threads: Sequence[threading.Thread], timeout_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
    """Wait until the threads have ended or ``timeout_s`` has passed on ``clock``: each join is bounded by the
    seconds left, so on a clock that does not move a stuck thread is waited for ``timeout_s``, never for ever."""
    end = clock.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, end - clock.monotonic()))


def run_concurrently(jobs: Sequence[Callable[[], T]], timeout_s: float, on_timeout: Callable[[int], T],
                     max_in_flight: int = MAX_IN_FLIGHT, wait: ThreadWait = join_until) -> list[T]:
    """The jobs in daemon threads (a stuck tool blocks neither the answer nor the exit), ``max_in_flight`` at a
    time; one not finished when ``wait`` returns is ``on_timeout(index)``, one still waiting for a slot never
    starts. ``wait`` is the tests' seam: their timeout passes when they say."""
    results: dict[int, T] = {}
    slots = threading.Semaphore(max_in_flight)
    expired = threading.Event()

    def runner(index: int) -> None:
        with slots:
            if expired.is_set():
                return
            results[index] = jobs[index]()

    threads = [threading.Thread(target=runner, args=(i,), daemon=True, name=f"helpbot-tool-{i}")
               for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    wait(threads, timeout_s)
    expired.set()
    return [results[i] if i in results else on_timeout(i) for i in range(len(jobs))]
