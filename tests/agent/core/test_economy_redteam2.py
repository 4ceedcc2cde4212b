"""Red team 2 of clearing (main at b073b33): what the first red team's fixes changed -- the withheld write that
commits the next request to a clearing (``clear_due``), and the run's copy a repeat brings back. Each test states
the property it checks; the defects were strict xfails and pass since the fixes, the controls (clearing off) too."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from agent.core.loop import Agent
from agent.core.messages import CUT_MARKER, tool_results
from agent.core.scripted import Request, ScriptedModel, calls
from agent.core.settings import Settings
from agent.core.tokens import estimate_tokens
from tests.agent.core.test_economy_redteam import BODY, QUESTION, SETTINGS, main_requests, page
from tests.fakes.loop import FakeClock, FakeTools


def _plain(messages: list[dict[str, Any]]) -> str:
    return json.dumps([{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
                       for m in messages], ensure_ascii=False, sort_keys=True)


def _breakpoints(request: Request) -> list[int]:
    return [i for i, m in enumerate(request.messages) if any("cache_control" in b for b in m["content"])]


def _cached_prefixes(requests: list[Request]) -> set[str]:
    """Every message prefix an earlier request put a breakpoint at (what the cache may hold)."""
    return {_plain(req.messages[:i + 1]) for req in requests for i in _breakpoints(req)}


# -- the forced answer after a withheld write --------------------------------------------------------------------
def forced_after_withheld_write(settings: Settings, why: str) -> list[Request]:
    """Request 3 withholds its cache write: request 4 is to clear rounds 1-2 (clear_due). But round 3 runs past
    the soft deadline (or the spend cap is reached), so request 4 is the forced final answer, which never clears
    -- and its breakpoint on the previous request's last user message (cached_request's ``messages[-3]``) now
    *writes* the tail request 3 held back, at 1.25x, for a request that has no successor. On production's path
    (the billing stub, bench/agent_http; the deadline during round 3 of agent_tokens' plan): the run bills
    116 % (1 KB) and 127.5 % (20 KB) of the same run with HELPBOT_CLEAR_AFTER_READS=0
    (``bench/redteam2_clearing.py deadline``). The same breakpoint writes in any final request whose own fit
    changed the previous request's last message (a budget cut, trimmed history): with clearing off too."""
    clock = FakeClock()

    def get(arguments: dict[str, Any]) -> Any:
        if why == "deadline" and arguments["n"] == 3:
            clock.advance(settings.deadline_s - settings.final_reserve_s)  # round 3 ends past the soft deadline
        return page(arguments["n"], BODY * 3)

    tools = FakeTools({"growi_getPage": get})
    model = ScriptedModel(lambda r: "結論です。" if r.final or r.round > 8
                          else calls(("growi_getPage", {"n": r.round})))
    if why == "cost_limit":  # the scripted usage: $0.027 after request 2, $0.071 after request 3
        settings = replace(settings, max_cost_usd=0.05)
    answer = Agent(model, tools, settings, clock=clock).run(QUESTION)
    assert answer.stop == why and answer.rounds == 3, (answer.stop, answer.rounds)
    return main_requests(model, settings)


@pytest.mark.parametrize("why", ["deadline", "cost_limit"])
@pytest.mark.parametrize("settings", [
    pytest.param(SETTINGS, id="clearing-on"),
    pytest.param(replace(SETTINGS, clear_after_reads=None), id="clearing-off"),
])
def test_a_forced_final_answer_writes_no_cache_entry(settings: Settings, why: str) -> None:
    """A final request has no later request to read what it writes: each of its breakpoints must be at a prefix
    an earlier request already marked (a read), never a new one (a write at 1.25x)."""
    requests = forced_after_withheld_write(settings, why)
    final = requests[-1]
    assert final.final
    cached = _cached_prefixes(requests[:-1])
    new = [i for i in _breakpoints(final) if _plain(final.messages[:i + 1]) not in cached]
    assert not new, f"the final request writes the cache at message(s) {new}"


# -- the run's copy of a result cut for the budget ------------------------------------------------------------------
def test_a_cleared_result_read_again_comes_back_as_the_tool_returned_it() -> None:
    """Round 1 reads three long pages at once: request 2 is over the 12,000-token budget and fit_budget halves
    pages 1 and 2. Request 4 clears them; the transcript falls to ~2,400 tokens. Round 5 asks for page 1 again, as
    its digest says to ('call growi_getPage again, same input, for all of it'): the answer says 'here it is whole
    again' but is the budget-cut text, marker included -- though the whole page would fit in every request after it. The
    platform is never asked again (by design), so the model can never read the rest of page 1."""
    settings = replace(SETTINGS, request_budget_tokens=12_000, summary_threshold_tokens=10**9)
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"], BODY * 2 if a["n"] <= 3 else BODY[:300])})

    def script(request: Request) -> Any:
        if request.final or request.round > 7:
            return "結論です。"
        if request.round == 1:
            return calls(*[("growi_getPage", {"n": n}) for n in (1, 2, 3)])
        if request.round == 5:
            return calls(("growi_getPage", {"n": 1}))
        return calls(("growi_getPage", {"n": 2 + request.round}))

    model = ScriptedModel(script)
    answer = Agent(model, tools, settings, clock=FakeClock()).run(QUESTION)
    cuts = [e for e in answer.trace if e["event"] == "budget_cut"]
    sizes = [e["estimated_tokens"] for e in answer.trace if e["event"] == "model_request"]
    whole = estimate_tokens(json.dumps(page(1, BODY * 2), ensure_ascii=False))
    assert len(cuts) == 1 and max(sizes[3:5]) + whole < settings.request_budget_tokens, (cuts, sizes)  # room for it
    [again] = [ref for ref in tool_results(main_requests(model, settings)[-1].messages)
               if ref.input == {"n": 1} and "whole again" in ref.content]
    assert CUT_MARKER[:12] not in again.content, "the copy read again 'whole' is the budget-cut text"
    assert BODY * 2 in again.content
