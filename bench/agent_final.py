"""Bench: what the forced final answer costs when the model still asks for tools at the round limit.

The token bench's plan (10 rounds, 21 calls, the limit 10) on production's path (``agent_http``: the real Agent,
the real Bedrock client over HTTP to the billing stub, the real Growi and GitHub tools over HTTP to the fakes),
with three scripted models at the limit:

- *follows the note*: answers the first final request (the note in the last user message asks for it);
- *follows the refusal*: asks for tools once more in the final request, then answers when those calls come back
  refused (``is_error`` results that say no more tools will run);
- *ignores it*: asks for tools whenever ``tool_choice`` allows them (the worst case: broken or prompt-injected);
  after its second final request the run ends with its sources, labelled, and no further request.

Per model: the requests of the final answer (from the first forced one), what they bill (Sonnet-equivalent input:
uncached 1x, cache reads 0.1x, writes 1.25x), their share of the run's bill, and the run's bill against the run of
the model that follows the note (the floor: the same transcript answered by one cached request). Tokens are
deterministic (helpbot's estimate, as in ``agent_tokens``); no timing is printed.

    uv run python bench/agent_final.py [--sizes 1,20]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agent_http import MAIN, BillingStub, Knowledge, calls, forced, main_rounds, real_tools
from agent_tokens import QUESTION, plan

from agent.core.loop import Agent
from agent.core.settings import Settings

ANSWER = [{"type": "text", "text": "結論: 在庫同期の遅延は 429 のレート制限による再実行待ちです。"}]
MODELS = ("follows the note", "follows the refusal", "ignores it")


class PerRequest(BillingStub):
    """The billing stub, keeping what each main-model request billed (uncached, read, written) and whether it
    was sent with ``tool_choice: none``."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.bills: list[dict[str, Any]] = []

    def _respond(self, model_id: str, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        b = self.billing
        before = (b.input.get(MAIN, 0), b.read.get(MAIN, 0), b.written.get(MAIN, 0))
        reply = super()._respond(model_id, body)
        if model_id == MAIN:
            after = (b.input.get(MAIN, 0), b.read.get(MAIN, 0), b.written.get(MAIN, 0))
            uncached, read, written = (a - x for a, x in zip(after, before, strict=True))
            self.bills.append({"uncached": uncached, "read": read, "written": written, "strict": forced(body),
                               "billed": uncached + 0.1 * read + 1.25 * written})
        return reply


def refused(body: dict[str, Any]) -> bool:
    """The last user message answers every call with an error result (helpbot refused to run them)."""
    last = body["messages"][-1]
    results = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    return bool(results) and all(b.get("is_error") for b in results)


def script_for(model: str, rounds: list[list[tuple[str, dict[str, Any]]]]) -> Any:
    def script(model_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        n = main_rounds(body)
        if forced(body):  # tool_choice none (never sent after a cached request): no call can come back
            return ANSWER
        if n <= len(rounds):
            return calls(n, rounds[n - 1])
        if model == "follows the note" or (model == "follows the refusal" and refused(body)):
            return ANSWER
        return calls(n, [rounds[0][0]], thought="もう少し調べます。")  # one more search: the limit is ignored

    return script


def run(kb: int, model: str) -> tuple[PerRequest, Any]:
    k = Knowledge(chars=kb * 1000)
    rounds = plan(k)
    with PerRequest(script_for(model, rounds), 0.0) as stub, real_tools(k, 0.0) as tools:
        answer = Agent(stub.model(), tools, Settings()).run(QUESTION)
    assert answer.rounds == len(rounds), answer.rounds
    if model == "ignores it":  # the sources it read, labelled; none of its text
        assert answer.degraded and answer.text.startswith("⚠️") and "もう少し" not in answer.text, answer.text
    else:
        assert answer.text == ANSWER[0]["text"], answer.text
    return stub, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,20", help="KB per page/issue body")
    args = parser.parse_args()
    print(f"{'size':>5} {'model':<20} {'requests':>8} {'final requests (uncached/read/written, none?)':<58} "
          f"{'final billed':>12} {'share':>6} {'run billed':>10} {'vs floor':>8}")
    for kb in (int(x) for x in args.sizes.split(",")):
        floor = None
        for model in MODELS:
            stub, answer = run(kb, model)
            bills = stub.bills
            first_final = len(plan(Knowledge(chars=1)))  # requests 1..10 ask for the rounds; the rest answer
            final = bills[first_final:]
            run_billed = sum(b["billed"] for b in bills)
            final_billed = sum(b["billed"] for b in final)
            floor = floor if floor is not None else run_billed
            shape = " + ".join(f"{b['uncached']:,}/{b['read']:,}/{b['written']:,}{' none' if b['strict'] else ''}"
                               for b in final)
            print(f"{kb:>3}KB {model:<20} {len(bills):>8} {shape:<58} {final_billed:>12,.0f} "
                  f"{final_billed / run_billed:>6.1%} {run_billed:>10,.0f} {run_billed / floor:>7.2f}x")
            events = [e["event"] for e in answer.trace if e["event"].startswith("forced")]
            said = f"its {len(answer.sources)} sources, labelled" if answer.degraded else "the model's"
            print(f"{'':>26}events: {json.dumps(events)}; the answer: {said}")


if __name__ == "__main__":
    main()
