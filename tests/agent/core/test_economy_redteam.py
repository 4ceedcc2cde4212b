"""Red team of clearing (612b79c, 132fb42): a hostile (or merely obedient) model and odd tool results against the
digests, the repeat path and the write-before-clearing prediction. Each test states the property it checks; all
but the last failed on main at 132fb42 (the red team's strict xfails) and pass since the fixes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from agent.core.digest import CLEARED_HEADER, digest
from agent.core.loop import Agent
from agent.core.messages import tool_results
from agent.core.scripted import Request, ScriptedModel, calls
from agent.core.settings import Settings
from agent.core.tools import ToolOutcome
from tests.fakes.loop import FakeClock, FakeTools, check_transcript

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
