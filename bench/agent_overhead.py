"""Bench: the time our own code spends per round (prompt building, caching marks, token estimates, summaries'
bookkeeping, tool dispatch in threads, sources, trace), excluding model and tool latency. Target: < 20 ms.

The model is scripted and answers instantly (the time inside its calls is subtracted); the tools return
realistic several-KB results instantly (generated once in a warm-up run, then served from memory).

    uv run python bench/agent_overhead.py
"""

from __future__ import annotations

import statistics
import time
from typing import ClassVar

from agent_common import PLAN, TOOL_NAMES, BenchTools, investigation, tool_overrides

from agent.core.loop import Agent
from agent.core.model import ModelResponse, Request
from agent.core.scripted import ScriptedModel
from agent.core.tools import ToolOutcome


class TimedModel(ScriptedModel):
    spent = 0.0

    def create(self, request: Request) -> ModelResponse:
        began = time.perf_counter()
        try:
            return super().create(request)
        finally:
            TimedModel.spent += time.perf_counter() - began


class MemoTools(BenchTools):
    """Results generated on first use (the warm-up run), then served from memory."""

    cache: ClassVar[dict[tuple[str, str], ToolOutcome]] = {}

    def call(self, name: str, arguments: dict) -> ToolOutcome:
        key = (name, str(sorted(arguments.items())))
        if key not in self.cache:
            self.cache[key] = super().call(name, arguments)
        return self.cache[key]


def one_run() -> tuple[float, int]:
    TimedModel.spent = 0.0
    agent = Agent(TimedModel(investigation, record=False), MemoTools())
    began = time.perf_counter()
    answer = agent.run("楽天とShopifyで在庫同期が30分以上遅れることがある。原因と確認手順は？")
    ours = time.perf_counter() - began - TimedModel.spent
    return ours / (answer.rounds + 1), answer.rounds


def main() -> None:
    for name in TOOL_NAMES:
        tool_overrides(name)
    one_run()  # warm up imports and caches
    samples = [one_run() for _ in range(10)]
    per_round = [s for s, _ in samples]
    print(f"our overhead per round over {samples[0][1]} tool rounds + the answer ({len(PLAN)}-round investigation, "
          f"{len(samples)} runs): median {statistics.median(per_round) * 1000:.2f} ms, "
          f"max {max(per_round) * 1000:.2f} ms -> target < 20 ms: "
          f"{'PASS' if max(per_round) < 0.020 else 'FAIL'}")


if __name__ == "__main__":
    main()
