"""Bench: the token economy off the token bench's own plan, on production's path (``agent_http``: the real client
and tools over HTTP, the billing stub). Written by the second red team of clearing, to answer "is the policy fitted
to agent_tokens' one plan?".

- heldout: agent_tokens' billed and cache ratios (against its baseline) for variants of its plan that are just as
  honest -- the same 21 calls in another order, a round limit of 12, a wider first round, one re-read of cleared
  results.
- deadline: the soft deadline passes during round N; clearing on vs off (HELPBOT_CLEAR_AFTER_READS=0), billed.
- reread: one honest re-read of cleared results; clearing on vs off, billed.

    uv run python bench/agent_tokens_heldout.py heldout|deadline|reread [--kb 1,20]
"""

from __future__ import annotations

import argparse
import json
import random
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
from agent_tokens import QUESTION, baseline_settings, main_billed, plan, summary_billed

from agent.core.loop import Agent
from agent.core.settings import Settings

Plan = list[list[tuple[str, dict[str, Any]]]]


class JumpClock:
    """Real monotonic time, moved past the soft deadline once ``jump`` is set."""

    def __init__(self, settings: Settings):
        self.t0, self.jump = time.monotonic(), False
        self.offset = settings.deadline_s - settings.final_reserve_s + 5

    def monotonic(self) -> float:
        return self.t0 + (self.offset if self.jump else time.monotonic() - self.t0)

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def run(kb: int, settings: Settings, make: Any, deadline_round: int | None = None) -> BillingStub:
    k = Knowledge(chars=kb * 1000)
    rounds: Plan = make(k)
    clock = JumpClock(settings)
    state = {"round": 0}
    growi = k.growi.handler

    def late_growi(request: Any) -> Any:
        if state["round"] == deadline_round:
            clock.jump = True  # this round's tools end past the soft deadline
        return growi(request)

    k.growi.handler = late_growi

    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        if model_id == SUMMARY:
            return summary_reply(body)
        n = main_rounds(body)
        state["round"] = n
        told = "time for this investigation is up" in json.dumps(body["messages"][-1], ensure_ascii=False)
        if forced(body) or told or n > len(rounds):
            return [{"type": "text", "text": "結論: 429 です。"}]
        return calls(n, rounds[n - 1])

    with BillingStub(script, 0.0) as stub, real_tools(k, 0.0) as tools:
        Agent(stub.model(), tools, settings, clock=clock).run(QUESTION)
    return stub


def billed(stub: BillingStub) -> float:
    return main_billed(stub) + summary_billed(stub)


def shuffled(seed: int) -> Any:
    def make(k: Knowledge) -> Plan:
        p = plan(k)
        rest = p[1:]
        random.Random(seed).shuffle(rest)
        return [p[0], *rest]
    return make


def wide(k: Knowledge) -> Plan:
    p = plan(k)
    p[0] = p[0] + [("github_searchIssues", {"query": q}) for q in ("在庫", "同期", "楽天", "Shopify", "遅延 429")]
    return p


def reread(k: Knowledge) -> Plan:
    """Round 5 also reads page 1 and issue 1 again (both cleared by then), as their digests invite."""
    p = plan(k)
    p[4] = p[4] + [("growi_getPage", {"pageId": k.page_ids[0]}), ("github_getIssue", {"repo": REPO, "number": 1})]
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("heldout", "deadline", "reread"))
    parser.add_argument("--kb", default="1,20")
    args = parser.parse_args()
    on = Settings()
    off = replace(on, clear_after_reads=None)
    for kb in (int(x) for x in args.kb.split(",")):
        if args.what == "heldout":
            for name, make, limit in [("plan", plan, 10), ("plan, max_rounds 12", plan, 12),
                                      ("shuffled 1", shuffled(1), 10), ("shuffled 2", shuffled(2), 10),
                                      ("shuffled 3", shuffled(3), 10), ("wide round 1", wide, 10),
                                      ("re-read in round 5", reread, 10)]:
                ours = replace(on, max_rounds=limit)
                base = run(kb, baseline_settings(ours), make).billing.prompt[MAIN]
                stub = run(kb, ours, make)
                print(f"{kb:>3} KB {name:<22} billed {billed(stub) / base:6.1%}  "
                      f"cache {main_billed(stub) / stub.billing.prompt[MAIN]:6.1%}  peak {stub.billing.peak:,}")
        elif args.what == "deadline":
            for n in (3, 5, 7):
                b_on, b_off = billed(run(kb, on, plan, n)), billed(run(kb, off, plan, n))
                print(f"{kb:>3} KB deadline in round {n}: on {b_on:,.0f} off {b_off:,.0f} = {b_on / b_off:.1%}")
        else:
            for stop in (6, 10):
                make = lambda k, s=stop: reread(k)[:s]  # noqa: E731
                b_on, b_off = billed(run(kb, on, make)), billed(run(kb, off, make))
                print(f"{kb:>3} KB re-read in round 5, answer after {stop}: on {b_on:,.0f} off {b_off:,.0f} "
                      f"= {b_on / b_off:.1%}")


if __name__ == "__main__":
    main()
