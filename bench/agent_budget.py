"""Bench: even when a tool returns 5 MB (every round, next to normal results), no request to the model exceeds the
configured budget (default 100,000 estimated tokens). The tool bypasses mcp_lib's limits on purpose (as an external
MCP server might): the agent's own caps, summaries and budget cut must hold.

    uv run python bench/agent_budget.py
"""

from __future__ import annotations

import json
from dataclasses import replace

from agent_common import BenchTools, CachingBedrock, investigation

from agent.core.loop import Agent
from agent.core.messages import request_tokens
from agent.core.model import ModelResponse
from agent.core.scripted import Request
from agent.core.settings import Settings
from agent.core.tools import ToolOutcome

FIVE_MB = ("在庫同期ログ 2026-11-10T10:00:00 stock-sync job=4711 status=running " * 80_000)[:5_000_000]


class HugeTools(BenchTools):
    def __init__(self, huge: set[str] | None):
        super().__init__()
        self.huge = huge

    def call(self, name: str, arguments: dict) -> ToolOutcome:
        if self.huge is None or name in self.huge:
            return ToolOutcome(FIVE_MB, sources=[{"url": f"https://example.test/dump/{name}", "title": "dump"}])
        return super().call(name, arguments)


def main() -> None:
    default = Settings()
    no_cap = replace(default, tool_result_max_chars=10_000_000)
    for label, huge, settings in [
            ("one tool returns 5 MB, the others normal results", {"redmine_getIssue"}, default),
            ("every tool returns 5 MB (2-3 per round)", None, default),
            ("every tool returns 5 MB and the per-result cap is off: only the budget cut protects", None, no_cap)]:
        print(f"-- {label}")
        scenario(huge, settings)


def scenario(huge: set[str] | None, settings: Settings) -> None:
    sizes: list[int] = []
    chars: list[int] = []

    def measuring(request: Request) -> ModelResponse:
        system = "\n".join(b["text"] for b in request.system)
        sizes.append(request_tokens(system, request.tools, request.messages))
        chars.append(len(system) + len(json.dumps([request.tools, request.messages], ensure_ascii=False)))
        return investigation(request)

    model = CachingBedrock(measuring)
    answer = Agent(model, HugeTools(huge), settings).run("在庫同期のログを全部見て原因を教えて")
    big = sum(huge is None or c.name in huge for c in answer.tool_calls)
    print(f"tool result: {len(FIVE_MB.encode()) / 1e6:.1f} MB ({len(FIVE_MB):,} characters), returned by {big} of "
          f"{len(answer.tool_calls)} calls in {answer.rounds} rounds")
    verdict = "PASS" if max(sizes) <= settings.request_budget_tokens else "FAIL"
    print(f"requests: {len(sizes)}; largest estimated {max(sizes):,} tokens ({max(chars):,} characters); "
          f"budget {settings.request_budget_tokens:,} -> {verdict}")
    cut = sum(1 for e in answer.trace if e["event"] == "budget_cut")
    summaries = sum(1 for e in answer.trace if e["event"] == "summary")
    print(f"budget cuts: {cut}, summaries: {summaries}, answer stop: {answer.stop}")


if __name__ == "__main__":
    main()
