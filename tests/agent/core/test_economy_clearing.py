"""Clearing of read tool results: a hostile (or merely obedient) model and odd tool results against the digests,
the repeat path, the write-before-clearing prediction (``clear_due``) and the copy a repeat brings back. Each test
states the property it checks."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from agent.core.digest import CLEARED_HEADER, digest
from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tokens import estimate_tokens
from agent.core.tools import ToolOutcome
from agent.core.transcript import CUT_MARKER, tool_results
from tests.fakes.clock import FakeClock
from tests.fakes.loop import FakeTools, check_transcript
from tests.fakes.model import Request, ScriptedModel, calls

SETTINGS = Settings(tool_timeout_s=5.0, max_rounds=10)
BODY = "在庫同期の遅延は 429 のレート制限による再実行待ち。確認手順: 連携ログを見る。" * 40  # ~1,600 characters
QUESTION = "在庫同期が遅れる原因は？"


def page(n: int, body: str = BODY) -> dict[str, Any]:
    return {"title": f"手順 {n}", "url": f"https://wiki.example/page/{n}", "body": f"ページ{n}: {body}"}


def is_digest(content: Any) -> bool:
    return str(content).startswith(CLEARED_HEADER[:20])


def digested_calls(request: Request) -> list[tuple[str, dict[str, Any]]]:
    """The (name, input) of every call whose result is a digest in this request."""
    return [(ref.name, ref.input) for ref in tool_results(request.messages) if is_digest(ref.content)]


def main_requests(model: ScriptedModel, settings: Settings) -> list[Request]:
    return [req for req in model.requests if req.model == settings.model]


def ends_marked(request: Request) -> bool:
    return any("cache_control" in b for b in request.messages[-1]["content"])


# -- cost amplification --------------------------------------------------------------------------------------------
def repeat_run(settings: Settings) -> tuple[ScriptedModel, FakeTools]:
    """Pages 1-3 in rounds 1-3; from round 4 on, every round asks for pages 1-3 again (identical calls)."""
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"])})

    def script(request: Request) -> Any:
        n = request.round
        if n > settings.max_rounds - 1:
            return "結論: 429 です。"
        if n <= 3:
            return calls(("growi_getPage", {"n": n}))
        return calls(*[("growi_getPage", {"n": i}) for i in (1, 2, 3)])

    model = ScriptedModel(script)
    Agent(model, tools, settings, clock=FakeClock()).run(QUESTION)
    return model, tools


def test_a_cleared_result_asked_for_every_round_is_whole_at_most_once_at_a_time() -> None:
    model, tools = repeat_run(SETTINGS)
    assert tools.counts["growi_getPage"] == 3  # held: no platform is asked twice
    final = main_requests(model, SETTINGS)[-1]
    whole = [ref for ref in tool_results(final.messages) if "ページ1:" in ref.content and not is_digest(ref.content)]
    assert len(whole) <= 1, f"{len(whole)} whole copies of page 1 in the last request"


def test_repeating_cleared_calls_never_costs_more_than_with_clearing_off() -> None:
    """Sum of the main model's prompt sizes (the ScriptedModel's estimate) with clearing on vs off."""
    def sent(settings: Settings) -> int:
        model, _ = repeat_run(settings)
        return sum(len(json.dumps(req.messages, ensure_ascii=False)) for req in main_requests(model, settings))

    on, off = sent(SETTINGS), sent(replace(SETTINGS, clear_after_reads=None))
    assert on <= off, f"clearing on sent {on:,} characters, off {off:,} ({on / off:.0%})"


# -- the digest's advice must be safe to follow --------------------------------------------------------------------
def test_following_a_digest_never_runs_a_write_again() -> None:
    """The digest (and the system prompt) say: call it again, same input, to read it whole. A model that does so
    for a write tool's digest makes the write happen twice: writes are never answered from the run's copy."""
    note = {"title": "#12 note", "url": "https://redmine.example/issues/12", "body": "追記しました。" + BODY}
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"]), "redmine_addNote": lambda a: note},
                      writes=frozenset({"redmine_addNote"}))
    obeyed: set[str] = set()

    def script(request: Request) -> Any:
        for name, arguments in digested_calls(request):  # do what the digest says, once each
            key = name + json.dumps(arguments, sort_keys=True)
            if key not in obeyed:
                obeyed.add(key)
                return calls((name, arguments))
        if request.round == 1:
            return calls(("redmine_addNote", {"issue": 12, "text": "確認済み"}))
        if request.round <= 6:
            return calls(("growi_getPage", {"n": request.round}))
        return "結論です。"

    Agent(ScriptedModel(script), tools, SETTINGS, clock=FakeClock()).run(QUESTION)
    assert tools.counts["redmine_addNote"] == 1, "the write ran again because its digest said to call it again"


# -- the digest itself ---------------------------------------------------------------------------------------------
def test_the_digest_of_a_cut_result_keeps_its_first_words_not_the_envelope() -> None:
    """A Japanese page of ~8,000 characters is over the loop's per-result token cap (7,500 tokens at 1.5 a
    character): the loop cuts it, the JSON no longer parses, and the head becomes '{"status": "ok", ...'. With
    the real tools (bench/agent_http) 3 of 9 digests at 20 KB look like this (github_getIssue)."""
    long_body = BODY * 5
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"], long_body)})
    model = ScriptedModel(lambda r: calls(("growi_getPage", {"n": r.round})) if r.round <= 5 else "結論です。")
    Agent(model, tools, SETTINGS, clock=FakeClock()).run(QUESTION)
    digests = [ref for ref in tool_results(main_requests(model, SETTINGS)[-1].messages) if is_digest(ref.content)]
    assert digests
    for ref in digests:
        assert f"ページ{ref.input['n']}" in ref.content and '"status"' not in ref.content, ref.content


def test_clearing_never_makes_a_result_longer() -> None:
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"]), "faq_search": lambda a: "",
                       "redmine_getIssue": lambda a: ToolOutcome.error("404 not found")})

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("growi_getPage", {"n": 1}), ("faq_search", {"query": "在庫"}),
                         ("redmine_getIssue", {"id": 9}))
        return calls(("growi_getPage", {"n": request.round})) if request.round <= 5 else "結論です。"

    model = ScriptedModel(script)
    Agent(model, tools, SETTINGS, clock=FakeClock()).run(QUESTION)
    requests = main_requests(model, SETTINGS)
    first = {ref.tool_use_id: ref.content for req in requests for ref in tool_results(req.messages)
             if not is_digest(ref.content)}
    grown = {ref.name: (len(first[ref.tool_use_id]), len(ref.content)) for ref in tool_results(requests[-1].messages)
             if is_digest(ref.content) and len(ref.content) > len(first[ref.tool_use_id])}
    assert not grown, f"(chars before, after) of results made longer by clearing: {grown}"


def test_a_deeply_nested_result_is_digested_not_a_crash() -> None:
    text = digest("sales_query", "[" * 3000 + "]" * 3000, [])
    assert text.startswith(CLEARED_HEADER.format(name="sales_query"))


def test_a_run_with_a_deeply_nested_result_answers() -> None:
    """A provider's text result (ToolOutcome.content need not be JSON) or an mcp_lib envelope nesting ~990 levels
    (json.dumps in the tool's thread succeeds, json.loads deeper in the loop's stack does not)."""
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"]), "sales_query": lambda a: "[" * 3000})

    def script(request: Request) -> Any:
        if request.round == 1:
            return calls(("growi_getPage", {"n": 1}), ("sales_query", {"query": "x"}))
        return calls(("growi_getPage", {"n": request.round})) if request.round <= 5 else "結論です。"

    answer = Agent(ScriptedModel(script), tools, SETTINGS, clock=FakeClock()).run(QUESTION)
    assert answer.text == "結論です。"


# -- the write before a clearing -------------------------------------------------------------------------------------
def test_a_request_that_withholds_its_write_is_followed_by_the_clearing() -> None:
    """write_at asks _batch(ahead=1) whether the next request clears, but that request's tail also holds the
    model's next message: a long preamble (here ~2,400 characters) tips the balance, the clearing does not
    happen, and the withheld entry is paid for twice (sent uncached, then written by the next request)."""
    thought = "考察: " + "在庫同期の遅延について検討する。" * 150
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"], BODY * 3)})
    model = ScriptedModel(lambda r: calls(("growi_getPage", {"n": r.round}), thought=thought)
                          if r.round <= 8 else "結論です。")
    Agent(model, tools, SETTINGS, clock=FakeClock()).run(QUESTION)
    requests = main_requests(model, SETTINGS)
    for i, req in enumerate(requests[:-1]):
        check_transcript(req.messages)
        if req.final or ends_marked(req):
            continue
        before = {ref.tool_use_id for ref in tool_results(req.messages) if is_digest(ref.content)}
        after = {ref.tool_use_id for ref in tool_results(requests[i + 1].messages) if is_digest(ref.content)}
        assert after - before, f"request {i + 1} withheld its write, request {i + 2} cleared nothing"


# -- ids the model reuses across rounds ------------------------------------------------------------------------------
def test_a_reused_tool_use_id_never_serves_another_calls_result() -> None:
    """vet_tool_uses makes ids unique within a response only. A model that gives round 4's call round 1's id:
    round 1's result is cleared under that id, and a repeat of round 4's call is answered with round 1's page as
    'whole again' (the Messages API generates ids itself, so this needs a misbehaving or non-Anthropic model)."""
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"])})

    def script(request: Request) -> Any:
        n = request.round
        if n <= 5:
            return [{"type": "tool_use", "id": "dup" if n in (1, 4) else f"id{n}", "name": "growi_getPage",
                     "input": {"n": n}}]
        if n == 6:
            return [{"type": "tool_use", "id": "again", "name": "growi_getPage", "input": {"n": 4}}]
        return "結論です。"

    model = ScriptedModel(script)
    Agent(model, tools, SETTINGS, clock=FakeClock()).run(QUESTION)
    [again] = [ref for ref in tool_results(main_requests(model, SETTINGS)[-1].messages) if ref.tool_use_id == "again"]
    assert "ページ1:" not in again.content, "the repeat of page 4 was answered with page 1"


# -- what held: transcript and breakpoints under random hostile runs ------------------------------------------------
def hostile_run(seed: int) -> tuple[ScriptedModel, Settings]:
    """One seeded run: 1-8 rounds, clear_after_reads 1-3 or off, small budgets (cuts, summaries, trimmed history),
    a cost limit or a short deadline, history turns, an image, errors, empty and plain-text results, unknown and
    write tools, repeats, long preambles. Tool results depend only on their input (the calls run in threads)."""
    import random

    from agent.core.run import Turn

    rng = random.Random(seed)
    budget = rng.choice([8_000, 15_000, 100_000])
    settings = Settings(tool_timeout_s=5.0, max_rounds=rng.randint(1, 8), clear_after_reads=rng.choice([1, 2, 3, None]),
                        request_budget_tokens=budget,
                        summary_threshold_tokens=min(budget - 1, rng.choice([6_000, 12_000, 60_000])),
                        max_cost_usd=rng.choice([None, None, 0.05]), deadline_s=rng.choice([120.0, 600.0]))
    clock = FakeClock()

    def get(arguments: dict[str, Any]) -> Any:
        n = int(arguments.get("n", 0))
        clock.advance((0, 0, 5, 40)[n % 4])
        kind = n % 5
        if kind == 0:
            return {"title": f"p{n}", "url": f"https://w/{n}", "body": BODY * (1 + n % 3)}
        if kind == 1:
            return ToolOutcome.error("boom " + "x" * (n * 300))
        if kind == 2:
            return "plain text " + BODY
        if kind == 3:
            return ""
        return [{"title": f"t{i}", "url": f"https://w/{n}/{i}", "snippet": BODY[:200]} for i in range(12)]

    tools = FakeTools({"growi_getPage": get, "write_note": lambda a: {"ok": True, "url": "https://w/note"}},
                      writes=frozenset({"write_note"}))

    def script(request: Request) -> Any:
        if rng.random() < 0.08:
            return "answer"
        wanted: list[tuple[str, dict[str, Any]]] = []
        for _ in range(rng.randint(1, 5)):
            pick = rng.random()
            name = "no_such_tool" if pick < 0.1 else "write_note" if pick < 0.2 else "growi_getPage"
            wanted.append((name, {"n": rng.randint(0, 9)}))
        return calls(*wanted, thought="t" * rng.choice([0, 10, 3000]))

    model = ScriptedModel(script)
    history = [Turn("前の質問" * rng.randint(1, 600), "前の答え" * rng.randint(1, 600),
                    [{"title": "h", "url": "https://h/1"}]) for _ in range(rng.randint(0, 3))]
    image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    try:
        Agent(model, tools, settings, clock=clock).run(QUESTION, history=history,
                                                      attachments=image if rng.random() < 0.3 else [])
    except Exception as exc:  # a first request over the budget is rejected by design
        assert "request would need" in str(exc)
    return model, settings


@pytest.mark.parametrize("seeds", [range(0, 100), range(100, 200)])
def test_random_hostile_runs_keep_the_transcript_valid_and_four_breakpoints(seeds: range) -> None:
    for seed in seeds:
        model, settings = hostile_run(seed)
        for request in main_requests(model, settings):
            check_transcript(request.messages)
            blocks = [*request.system, *request.tools,
                      *(b for m in request.messages if isinstance(m["content"], list) for b in m["content"])]
            assert sum("cache_control" in b for b in blocks) <= 4, seed
            assert not any(is_digest(b.get("content")) for b in request.messages[-1]["content"]), seed
            assert any(b.get("type") == "text" and b["text"].startswith(QUESTION)
                       for m in request.messages if m["role"] == "user" for b in m["content"]), seed


def _plain(messages: list[dict[str, Any]]) -> str:
    return json.dumps([{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
                       for m in messages], ensure_ascii=False, sort_keys=True)


def _breakpoints(request: Request) -> list[int]:
    return [i for i, m in enumerate(request.messages) if any("cache_control" in b for b in m["content"])]


def _cached_prefixes(requests: list[Request]) -> set[str]:
    """Every message prefix an earlier request put a breakpoint at (what the cache may hold)."""
    return {_plain(req.messages[:i + 1]) for req in requests for i in _breakpoints(req)}


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
