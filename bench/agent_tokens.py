"""Bench: what the token economy saves over 10 rounds (21 tool calls), at four result sizes, on production's path.

Both runs are the real Agent with the real Bedrock client (agent.core.claude.Claude) over HTTP to the
local stub, and the real mcp_lib Growi and GitHub tools (the platforms' cuts, masking, limits) over HTTP to the
fakes, which serve pages and issues whose bodies are SIZE characters (see ``agent_http``).

- *baseline*: the same loop and the same limited results (mcp_lib's limits and the loop's caps), resent every
  round uncached, never cleared or summarized -- a run that could happen: the request budget is raised to 190,000
  tokens (under the 200k context window) and the summary threshold just under it; its cost is what its requests
  count.
- *ours*: the loop as configured by default (cache breakpoints, clearing read results to digests, summaries by
  the cheap model past the threshold, the budget); ``--clear-after-reads`` sets HELPBOT_CLEAR_AFTER_READS (0:
  never clear); ``--rounds`` makes the model answer earlier (a shorter investigation, same round limit).

Two ratios per size:
- billed: ours (main + summary model, Sonnet-equivalent input: cache reads 0.1x, writes 1.25x; Haiku input at 1/3
  of Sonnet's input price and its output at 5/3) / the baseline. Target <= 25 %.
- cache: what the main model pays / what its own requests would cost uncached. Target <= 50 %.

Token counts are helpbot's pessimistic estimate (1.5 per Japanese character), not a tokenizer. The model latency
only changes the wall time, not the tokens: the default 0.05 s keeps the bench short; ``--latency 2`` is realistic.

    uv run python bench/agent_tokens.py [--latency 0.05] [--tool-latency 0.02] [--sizes 1,20,50,100]
                                        [--clear-after-reads 2] [--rounds 10]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

from agent_http import (
    MAIN,
    REPO,
    SUMMARY,
    BillingStub,
    Knowledge,
    calls,
    forced,
    main_rounds,
    real_tools,
    summary_reply,
)

from agent.core.digest import CLEARED_HEADER
from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tokens import estimate_tokens
from agent.core.transcript import tool_results

QUESTION = "楽天とShopifyで在庫同期が30分以上遅れることがある。原因と、再発したときの確認手順を教えて。"


def plan(k: Knowledge) -> list[list[tuple[str, dict[str, Any]]]]:
    """One realistic investigation: searches, then reading issues and pages, round after round (21 calls)."""
    page = k.page_ids
    issue = lambda n: ("github_getIssue", {"repo": REPO, "number": n})  # noqa: E731
    return [
        [("growi_searchPages", {"query": "在庫同期"}), ("github_searchIssues", {"query": "在庫同期 遅延"}),
         ("growi_searchPages", {"query": "遅延"})],
        [issue(1), ("growi_getPage", {"pageId": page[0]})],
        [issue(2), ("growi_getPage", {"pageId": page[1]})],
        [("github_searchCode", {"query": "stock_sync"}), issue(3)],
        [("github_searchIssues", {"query": "429"}), ("growi_getPage", {"pageId": page[2]})],
        [issue(4), issue(5)],
        [("github_searchIssues", {"query": "rate limit"}), ("growi_getPage", {"pageId": page[3]})],
        [issue(6), ("growi_searchPages", {"query": "詰まり"})],
        [("growi_searchPages", {"query": "再実行 手順"}), ("growi_getPage", {"pageId": page[4]})],
        [issue(7), ("github_getFileContent", {"repo": REPO, "path": "src/stock_sync.py"})],
    ]


def run(k: Knowledge, settings: Settings, latency_s: float, tool_latency_s: float, stop_after: int = 10
        ) -> tuple[BillingStub, Any]:
    rounds = plan(k)[:stop_after]

    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        if model_id == SUMMARY:
            return summary_reply(body)
        n = main_rounds(body)
        if forced(body) or n > len(rounds):
            return [{"type": "text", "text": "結論: 在庫同期の遅延は 429 のレート制限による再実行待ちです。"}]
        return calls(n, rounds[n - 1])

    with BillingStub(script, latency_s) as stub, real_tools(k, tool_latency_s) as tools:
        answer = Agent(stub.model(), tools, settings).run(QUESTION)
    assert answer.rounds == len(rounds) and not any(c.is_error for c in answer.tool_calls), answer.tool_calls
    return stub, answer


def baseline_settings(settings: Settings) -> Settings:
    """The baseline's: never cleared or summarized, the budget raised to 190,000 (under the context window)."""
    return replace(settings, request_budget_tokens=190_000, summary_threshold_tokens=189_999, clear_after_reads=None)


def main_billed(stub: BillingStub) -> float:
    b = stub.billing
    return b.input.get(MAIN, 0) + 0.1 * b.read.get(MAIN, 0) + 1.25 * b.written.get(MAIN, 0)


def summary_billed(stub: BillingStub) -> float:
    b = stub.billing
    return (b.prompt.get(SUMMARY, 0) + 5.0 * b.output.get(SUMMARY, 0)) / 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model request (stub)")
    parser.add_argument("--tool-latency", type=float, default=0.02, help="seconds per Growi/GitHub answer")
    parser.add_argument("--sizes", default="1,20,50,100", help="KB (thousands of characters) per page/issue body")
    parser.add_argument("--rounds", type=int, default=10, choices=range(1, 11), metavar="1-10",
                        help="the model answers after this many of the plan's rounds (the limit stays 10)")
    parser.add_argument("--clear-after-reads", type=int, default=Settings().clear_after_reads or 0,
                        help="HELPBOT_CLEAR_AFTER_READS for ours (0: never clear)")
    args = parser.parse_args()
    ours_settings = replace(Settings(), clear_after_reads=args.clear_after_reads or None)
    base_settings = baseline_settings(ours_settings)
    print(f"{'size':>6} {'baseline':>10} {'b.peak':>7} {'ours':>9} {'billed':>7} {'cache':>6} {'clear':>5} "
          f"{'summ.':>5} {'peak':>7} {'written':>8} {'read':>8} {'summary':>8} {'digests':>9} {'wall':>6}")
    for kb in (int(x) for x in args.sizes.split(",")):
        k = Knowledge(chars=kb * 1000)
        base, _ = run(k, base_settings, args.latency, args.tool_latency, args.rounds)
        base_total = base.billing.prompt[MAIN]
        began = time.perf_counter()
        ours, answer = run(Knowledge(chars=kb * 1000), ours_settings, args.latency, args.tool_latency, args.rounds)
        wall = time.perf_counter() - began
        total = main_billed(ours) + summary_billed(ours)
        summaries = sum(1 for e in answer.trace if e["event"] == "summary")
        clearings = sum(1 for e in answer.trace if e["event"] == "cleared")
        header = CLEARED_HEADER.split("{")[0]
        digests = [estimate_tokens(ref.content) for ref in tool_results(answer.messages)
                   if ref.content.startswith(header)] or [0]
        b = ours.billing
        print(f"{kb:>4}KB {base_total:>10,} {base.billing.peak:>7,} {total:>9,.0f} {total / base_total:>7.1%} "
              f"{main_billed(ours) / b.prompt[MAIN]:>6.1%} {clearings:>5} {summaries:>5} {b.peak:>7,} "
              f"{b.written[MAIN]:>8,} {b.read[MAIN]:>8,} {summary_billed(ours):>8,.0f} "
              f"{f'{min(digests)}-{max(digests)}':>9} {wall:>5.1f}s")
    print(f"targets: billed <= 25 %, cache <= 50 %, peak <= {ours_settings.request_budget_tokens:,} (the budget); "
          f"model latency {args.latency} s, tool latency {args.tool_latency} s")


if __name__ == "__main__":
    main()
