"""Bench: one round whose 3 tools each take 1 s must finish in < 1.3 s (they run concurrently, not in 3 s).

    uv run python bench/agent_parallel.py
"""

from __future__ import annotations

import time

from agent_common import TOOL_NAMES, BenchTools, tool_overrides

from agent.core.loop import Agent
from agent.core.model import ModelResponse
from agent.core.run import Progress
from agent.core.scripted import Request, ScriptedModel, calls
from agent.core.tools import ToolOutcome


class SlowTools(BenchTools):
    def call(self, name: str, arguments: dict) -> ToolOutcome:
        time.sleep(1.0)
        return super().call(name, arguments)


def script(request: Request) -> ModelResponse | str:
    if request.round == 1:
        return calls(("faq_search", {"query": "在庫"}), ("redmine_search", {"query": "在庫"}),
                     ("slack_searchMessages", {"query": "在庫"}))
    return "done"


def main() -> None:
    for name in TOOL_NAMES:  # load the platform declarations now, not inside the timed round
        tool_overrides(name)
    marks: dict[str, float] = {}

    def progress(p: Progress) -> None:
        marks.setdefault(f"{p.phase}{p.round}", time.perf_counter())

    results = []
    for _ in range(3):
        marks.clear()
        began = time.perf_counter()
        answer = Agent(ScriptedModel(script, record=False), SlowTools(), on_progress=progress).run("在庫がずれる")
        total = time.perf_counter() - began
        round_s = marks["thinking2"] - marks["tools1"]
        assert answer.rounds == 1 and not any(c.is_error for c in answer.tool_calls)
        results.append((round_s, total))
    best_round = min(r for r, _ in results)
    worst_round = max(r for r, _ in results)
    print(f"round with 3 tools x 1 s: best {best_round:.3f} s, worst {worst_round:.3f} s over {len(results)} runs "
          f"(whole run incl. 2 model calls: {min(t for _, t in results):.3f} s) -> target < 1.3 s: "
          f"{'PASS' if worst_round < 1.3 else 'FAIL'}")


if __name__ == "__main__":
    main()
