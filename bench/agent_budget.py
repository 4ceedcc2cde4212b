"""Bench: even when tools return 5 MB (every round, next to normal results), no request to the model exceeds the
configured budget (default 100,000 estimated tokens) -- on production's path.

The tools are the real mcp_lib Growi and GitHub tools over HTTP to the fakes (the platforms' cuts, masking and
limits included), serving 5 MB pages and issue bodies; the model is the real Bedrock client over HTTP to the
stub. Three scenarios: the Growi pages are 5 MB and the GitHub answers ordinary; every page and issue is 5 MB;
every body is 5 MB, ``growi_getPage`` answers the raw 5 MB page without mcp_lib's limits (as an external MCP
server's tool might) and the loop's per-result caps are off, so only clearing, summaries and the budget cut
protect.
Sizes are helpbot's token estimate of each request as it was sent.

    uv run python bench/agent_budget.py [--latency 0.05] [--tool-latency 0.02]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

import httpx2
from agent_http import BillingStub, Knowledge, calls, forced, main_rounds, real_tools
from agent_tokens import QUESTION, plan
from mask_large_result import TEXT

from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tokens import request_tokens
from agent.core.tools import RegistryTools, ToolOutcome

HUGE = len(TEXT)


class Unlimited:
    """The real tools, except that ``growi_getPage`` is answered with the raw page fetched over HTTP from the fake
    Growi, without mcp_lib's limits -- as an external MCP server's tool might answer."""

    def __init__(self, tools: RegistryTools, growi_url: str, token: str):
        self.tools = tools
        self.client = httpx2.Client(base_url=growi_url, headers={"Authorization": f"Bearer {token}"})

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        if name != "growi_getPage":
            return self.tools.call(name, arguments)
        page = self.client.get("/_api/v3/page", params={"pageId": arguments["pageId"]}).json()["page"]
        return ToolOutcome(json.dumps(page, ensure_ascii=False), sources=[{"url": f"growi://{page['_id']}",
                                                                           "title": page["path"]}])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tools, name)


def scenario(label: str, knowledge: Knowledge, settings: Settings, latency: float, tool_latency: float,
             raw: bool = False) -> None:
    rounds = plan(knowledge)

    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        if model_id == settings.summary_model:
            return [{"type": "text", "text": "- 在庫同期ログ: job=4711 が running のまま"}]
        n = main_rounds(body)
        if forced(body) or n > len(rounds):
            return [{"type": "text", "text": "結論: ジョブ 4711 の詰まりです。"}]
        return calls(n, rounds[n - 1])

    with BillingStub(script, latency) as stub, real_tools(knowledge, tool_latency) as tools:
        used: Any = Unlimited(tools, tools.registry.env["GROWI_URL"], knowledge.growi.token) if raw else tools
        answer = Agent(stub.model(), used, settings).run(QUESTION)
        bodies = [r.body for r in stub.stub.requests if r.model_id == settings.model]
    sizes = [request_tokens("\n".join(b["text"] for b in body["system"]), body["tools"], body["messages"])
             for body in bodies]
    chars = max(len(json.dumps(body, ensure_ascii=False)) for body in bodies)
    verdict = "PASS" if max(sizes) <= settings.request_budget_tokens else "FAIL"
    cut = sum(1 for e in answer.trace if e["event"] == "budget_cut")
    summaries = sum(1 for e in answer.trace if e["event"] == "summary")
    clearings = sum(1 for e in answer.trace if e["event"] == "cleared")
    print(f"-- {label}\n  {len(answer.tool_calls)} calls in {answer.rounds} rounds, {len(bodies)} requests; "
          f"largest estimated {max(sizes):,} tokens ({chars:,} characters); budget "
          f"{settings.request_budget_tokens:,} -> {verdict}\n  budget cuts: {cut}, clearings: {clearings}, "
          f"summaries: {summaries}, stop: {answer.stop}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model request (stub)")
    parser.add_argument("--tool-latency", type=float, default=0.02, help="seconds per Growi/GitHub answer")
    args = parser.parse_args()
    default = Settings()
    no_cap = replace(default, tool_result_max_chars=10_000_000, tool_result_max_tokens=10_000_000)
    print(f"answers of {HUGE:,} characters ({len(TEXT.encode()) / 1e6:.1f} MB) from the fakes, over HTTP")
    one = Knowledge(chars=2_000)
    for page in one.page_ids:  # the Growi pages are huge, the GitHub issues ordinary
        one.growi.pages[page]["revision"]["body"] = TEXT
    scenario("Growi pages of 5 MB, GitHub answers ordinary", one, default, args.latency, args.tool_latency)
    scenario("every page and issue body 5 MB", Knowledge(chars=HUGE, text=TEXT), default, args.latency,
             args.tool_latency)
    scenario("every body 5 MB, growi_getPage without mcp_lib's limits (as an external MCP server) and the loop's "
             "per-result caps off: only clearing, summaries and the budget cut protect",
             Knowledge(chars=HUGE, text=TEXT),
             no_cap, args.latency, args.tool_latency, raw=True)


if __name__ == "__main__":
    main()
