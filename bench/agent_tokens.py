"""Bench: billed-equivalent input tokens of a scripted 10-round investigation, ours vs the naive approach.

Naive = what the old agent did: the full history with every raw tool result resent each round, no prompt
caching, no result limits, no summarization. Ours = the real Agent (caching breakpoints, mcp_lib limits,
summaries by the cheap model) against a stand-in that bills like Bedrock's cache. Billed-equivalent input tokens
count cache reads at 0.1x and writes at 1.25x; the summary model's tokens are converted at its price (Haiku
input $1 and output $5 vs Sonnet input $3 per MTok). Target: ours <= 30 % of naive.

    uv run python bench/agent_tokens.py
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent_common import PLAN, BenchTools, CachingBedrock, billed_equivalent, investigation

from agent.core.loop import Agent
from agent.core.messages import request_tokens
from agent.core.prompt import build_system_prompt
from agent.core.settings import Settings

QUESTION = "楽天とShopifyで在庫同期が30分以上遅れることがある。原因と、再発したときの確認手順を教えて。"


def naive() -> tuple[int, int]:
    """Sum and max of the request sizes when the whole raw history is resent every round."""
    tools = BenchTools(limited=False)
    schemas = tools.schemas()
    from datetime import datetime
    from zoneinfo import ZoneInfo

    system = build_system_prompt(now=datetime(2026, 11, 18, 10, tzinfo=ZoneInfo("Asia/Tokyo")), guide=tools.guide(),
                                 max_rounds=10)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    total = biggest = 0
    for number, round_ in enumerate([*PLAN, []], 1):
        size = request_tokens(system, schemas, messages)
        total += size
        biggest = max(biggest, size)
        if not round_:
            break
        uses: list[dict[str, Any]] = [{"type": "tool_use", "id": f"t{number}_{i}", "name": n, "input": a}
                                      for i, (n, a) in enumerate(round_)]
        results = [{"type": "tool_result", "tool_use_id": f"t{number}_{i}", "content": tools.result_json(n, a)[0]}
                   for i, (n, a) in enumerate(round_)]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "次を確認します。"}, *uses]})
        messages.append({"role": "user", "content": results})
    return total, biggest


def ours(settings: Settings) -> tuple[float, float, int, int]:
    model = CachingBedrock(investigation)
    agent = Agent(model, BenchTools(limited=True), replace(settings, model="main", summary_model="summary"))
    answer = agent.run(QUESTION)
    assert answer.rounds == len(PLAN), answer.stop
    main = answer.usage_by_model["main"]
    summary = answer.usage_by_model.get("summary")
    summary_equiv = ((summary.prompt_tokens * 1.0 + summary.output_tokens * 5.0) / 3.0) if summary else 0.0
    return billed_equivalent(main), summary_equiv, len(model.requests), model.max_prompt


def main() -> None:
    naive_total, naive_max = naive()
    print(f"naive: {naive_total:,} input tokens over {len(PLAN) + 1} requests (largest request {naive_max:,})")
    for label, settings in [("ours (defaults)", Settings()),
                            ("ours, summary threshold 30k", Settings(summary_threshold_tokens=30_000)),
                            ("ours without summaries (budget raised to 200k)",
                             Settings(request_budget_tokens=200_000, summary_threshold_tokens=199_999))]:
        main_equiv, summary_equiv, requests, biggest = ours(settings)
        total = main_equiv + summary_equiv
        print(f"{label}: {total:,.0f} billed-equivalent input tokens (main model {main_equiv:,.0f} + summary model "
              f"{summary_equiv:,.0f}; {requests} requests, largest {biggest:,}) -> {total / naive_total:.1%} of naive")


if __name__ == "__main__":
    main()
