"""Bench: what clearing saves, or costs, per call pattern -- honest, hostile, early answers -- billed with clearing on
(default) and off (HELPBOT_CLEAR_AFTER_READS=0), on production's path (real Bedrock client over HTTP to the billing
stub, real Growi tools over HTTP to the fake). Written by the red team of the clearing change.

Patterns (10 rounds):
- honest: one new page a round (the bench's kind of run, for reference).
- repeat: pages 1-3 in rounds 1-3, then every later round asks for pages 1-3 again (identical calls).
- chatty: like honest, but every call comes with a long preamble text.
- early4, early5, early6: honest, but the model answers after 4, 5 or 6 of the 10 rounds (most runs end early).

    uv run python bench/agent_clearing.py [--kb 20] [--patterns honest,repeat,...]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from agent_http import MAIN, BillingStub, Knowledge, calls, forced, main_rounds, real_tools
from agent_tokens import main_billed, summary_billed

from agent.core.loop import Agent
from agent.core.settings import Settings


def pattern(name: str, k: Knowledge, n: int) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    get = lambda i: ("growi_getPage", {"pageId": k.page_ids[i % len(k.page_ids)]})  # noqa: E731
    if name == "honest" or name.startswith("early"):
        return [get(n - 1)], "次を確認します。"
    if name == "repeat":
        return ([get(n - 1)] if n <= 3 else [get(0), get(1), get(2)]), "もう一度読みます。"
    if name == "chatty":
        return [get(n - 1)], "考察: " + "在庫同期の遅延について検討する。" * 150
    raise ValueError(name)


def run(name: str, kb: int, settings: Settings) -> tuple[float, int, int]:
    k = Knowledge(chars=kb * 1000, pages=12)

    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        n = main_rounds(body)
        last = int(name[5:]) if name.startswith("early") else settings.max_rounds
        if forced(body) or n > last:
            return [{"type": "text", "text": "結論です。"}]
        wanted, thought = pattern(name, k, n)
        return calls(n, wanted, thought)

    with BillingStub(script, 0.0) as stub, real_tools(k, 0.0) as tools:
        answer = Agent(stub.model(), tools, settings).run("在庫同期が遅れる原因は？")
    cleared = sum(1 for e in answer.trace if e["event"] == "cleared")
    return main_billed(stub) + summary_billed(stub), stub.billing.peak, cleared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=int, default=20)
    parser.add_argument("--patterns", default="honest,repeat,chatty,early4,early5,early6")
    args = parser.parse_args()
    on = Settings()
    off = replace(on, clear_after_reads=None)
    print(f"{'pattern':>8} {'billed on':>10} {'billed off':>10} {'on/off':>7} {'peak on':>8} {'peak off':>8} clearings")
    for name in args.patterns.split(","):
        b_on, p_on, c_on = run(name, args.kb, on)
        b_off, p_off, _ = run(name, args.kb, off)
        print(f"{name:>8} {b_on:>10,.0f} {b_off:>10,.0f} {b_on / b_off:>7.1%} {p_on:>8,} {p_off:>8,} {c_on}")
    print(f"main + summary model, Sonnet-equivalent input tokens; page bodies {args.kb} KB; model {MAIN}")


if __name__ == "__main__":
    main()
