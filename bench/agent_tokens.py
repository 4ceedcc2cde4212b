"""Bench: what the token economy saves over 10 rounds (21 tool calls), at four result sizes.

The baseline is the same loop with the same *limited* results (mcp_lib's limits and the loop's caps applied)
resent every round with no prompt cache and no summaries -- what a client without the economy would pay.
Ours is the real Agent (cache breakpoints, summaries by the cheap model, the hard budget) against a stand-in
that bills like Bedrock's cache. Two ratios per size:

- billed: ours (main + summary model, Sonnet-equivalent: reads 0.1x, writes 1.25x, Haiku at 1/3 of Sonnet's
  input price and 5/3 for its output) / the baseline. Target <= 25 %.
- cache: what the main model pays / what its own requests would cost uncached. Target <= 50 % (the cache works).

Token counts are our pessimistic estimate (1.5 per Japanese character), not a tokenizer; sizes are characters of
each raw result before the limits.

    uv run python bench/agent_tokens.py
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from agent_common import PLAN, BenchTools, CachingBedrock, billed_equivalent, investigation

from agent.core.loop import Agent
from agent.core.messages import cut, request_tokens
from agent.core.prompt import build_system_prompt
from agent.core.settings import Settings

QUESTION = "楽天とShopifyで在庫同期が30分以上遅れることがある。原因と、再発したときの確認手順を教えて。"
SIZES_KB = (1, 20, 50, 100)


def baseline(tools: BenchTools, settings: Settings) -> tuple[int, int]:
    """Sum and max of the request sizes when the same limited results are resent every round, uncached."""
    schemas = tools.schemas()
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
        results = [{"type": "tool_result", "tool_use_id": f"t{number}_{i}",
                    "content": cut(tools.result_json(n, a)[0], settings.tool_result_max_chars)}
                   for i, (n, a) in enumerate(round_)]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "次を確認します。"}, *uses]})
        messages.append({"role": "user", "content": results})
    return total, biggest


def ours(tools: BenchTools, settings: Settings) -> dict[str, Any]:
    model = CachingBedrock(investigation)
    agent = Agent(model, tools, replace(settings, model="main", summary_model="summary"))
    answer = agent.run(QUESTION)
    assert answer.rounds == len(PLAN), answer.stop
    main = answer.usage_by_model["main"]
    summary = answer.usage_by_model.get("summary")
    summary_equiv = ((summary.prompt_tokens * 1.0 + summary.output_tokens * 5.0) / 3.0) if summary else 0.0
    summaries = sum(1 for event in answer.trace if event["event"] == "summary")
    return {"main": billed_equivalent(main), "main_uncached": main.prompt_tokens, "summary": summary_equiv,
            "summaries": summaries, "peak": model.max_prompt, "written": main.cache_creation_input_tokens,
            "read": main.cache_read_input_tokens}


def main() -> None:
    settings = Settings()
    print(f"{'size':>6} {'baseline':>10} {'ours':>10} {'billed':>7} {'cache':>6} {'summaries':>9} {'peak':>7} "
          f"{'written':>8} {'read':>8}")
    for kb in SIZES_KB:
        tools = BenchTools(limited=True, chars=kb * 1000)
        base_total, _ = baseline(tools, settings)
        o = ours(tools, settings)
        total = o["main"] + o["summary"]
        print(f"{kb:>4}KB {base_total:>10,} {total:>10,.0f} {total / base_total:>7.1%} "
              f"{o['main'] / o['main_uncached']:>6.1%} {o['summaries']:>9} {o['peak']:>7,} {o['written']:>8,} "
              f"{o['read']:>8,}")
    print(f"targets: billed <= 25 %, cache <= 50 %, peak <= {settings.request_budget_tokens:,} (the request budget)")


if __name__ == "__main__":
    main()
