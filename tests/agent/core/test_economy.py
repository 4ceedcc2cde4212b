"""Clearing: results the model has read become digests in batches, only in the first half of the round limit and
only when it pays; the request before a clearing writes no cache entry the clearing would discard; a repeated
call gets the whole result back from the run's copy."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from agent.core.digest import CLEARED_HEADER, digest
from agent.core.loop import Agent
from agent.core.settings import Settings
from agent.core.tokens import request_tokens
from agent.core.transcript import tool_results
from mcp_lib.config import ConfigError
from tests.fakes.clock import FakeClock
from tests.fakes.loop import FakeTools, check_transcript
from tests.fakes.model import Request, ScriptedModel, calls

SETTINGS = Settings(tool_timeout_s=5.0, max_rounds=10)
BODY = "在庫同期の遅延は 429 のレート制限による再実行待ち。確認手順: 連携ログを見る。" * 40  # ~1,600 characters


def page(n: int, body: str = BODY) -> dict[str, Any]:
    return {"title": f"手順 {n}", "url": f"https://wiki.example/page/{n}", "body": f"ページ{n}: {body}"}


def run(rounds: int, settings: Settings = SETTINGS, body: str = BODY,
        repeat: tuple[int, int] | None = None) -> tuple[Any, ScriptedModel, FakeTools]:
    """``rounds`` rounds of one growi_getPage each (page n in round n), then an answer; ``repeat`` = (round, n):
    that round asks for page n again, twice."""
    tools = FakeTools({"growi_getPage": lambda a: page(a["n"], body)})

    def script(request: Request) -> Any:
        if repeat and request.round == repeat[0]:
            return calls(("growi_getPage", {"n": repeat[1]}), ("growi_getPage", {"n": repeat[1]}))
        if request.round <= rounds:
            return calls(("growi_getPage", {"n": request.round}))
        return "結論: 429 です。[手順 1](https://wiki.example/page/1)"

    model = ScriptedModel(script)
    answer = Agent(model, tools, settings, clock=FakeClock()).run("在庫同期が遅れる原因は？")
    return answer, model, tools


def cleared_ids(request: Request) -> list[str]:
    return [r.tool_use_id for r in tool_results(request.messages) if r.content.startswith(CLEARED_HEADER[:20])]


def marked(request: Request) -> list[int]:
    return [i for i, m in enumerate(request.messages) if any("cache_control" in b for b in m["content"])]


def test_read_results_are_cleared_in_batches_in_the_first_half_only() -> None:
    answer, model, _ = run(9)
    events = [e for e in answer.trace if e["event"] == "cleared"]
    assert events and all(e["after_tokens"] < e["before_tokens"] for e in events)
    for request in model.requests:
        check_transcript(request.messages)  # every tool_use keeps its tool_result
        assert [b["text"] for b in request.messages[0]["content"]] == ["在庫同期が遅れる原因は？"]
        newest = request.messages[-1]["content"]
        assert not any(str(b.get("content", "")).startswith(CLEARED_HEADER[:20]) for b in newest)
    # a result is sent whole in two requests before it is cleared, and a clearing takes every read result
    first = next(i for i, req in enumerate(model.requests) if cleared_ids(req))
    assert first == 3 and len(cleared_ids(model.requests[first])) == 2
    # no clearing once fewer than half the rounds remain: the last requests only add whole results
    late = [len(cleared_ids(req)) for req in model.requests[SETTINGS.max_rounds // 2 + 1:]]
    assert late == sorted(late) and len(set(late)) == 1
    final = model.requests[-1]
    whole = [r for r in tool_results(final.messages) if not r.content.startswith(CLEARED_HEADER[:20])]
    assert len(whole) >= SETTINGS.max_rounds // 2 - 1
    # a digest keeps the source (title and URL, so it can still be cited) and the head of the text
    for ref in tool_results(final.messages):
        n = ref.input["n"]
        assert f"https://wiki.example/page/{n}" in ref.content and f"ページ{n}" in ref.content
    assert answer.sources == [{"url": "https://wiki.example/page/1", "title": "手順 1"}]


def test_the_request_before_a_clearing_writes_nothing_the_clearing_discards() -> None:
    _, model, _ = run(6)
    first = next(i for i, req in enumerate(model.requests) if cleared_ids(req))
    before, clearing = model.requests[first - 1], model.requests[first]
    assert len(before.messages) - 1 not in marked(before)  # the newest results were sent, not written
    # the clearing request reads the entry of an earlier request that it kept, and writes its own transcript
    assert len(clearing.messages) - 1 in marked(clearing)
    first_cleared = min(r.message for r in tool_results(clearing.messages) if r.tool_use_id in cleared_ids(clearing))
    assert any(i < first_cleared for i in marked(clearing))
    for req in model.requests:
        assert len(marked(req)) + 1 <= 4  # the system block plus at most three messages


def test_a_repeated_call_gets_the_whole_result_from_the_runs_copy() -> None:
    _, model, tools = run(6, repeat=(5, 1))  # page 1 was cleared by round 5; the model asks for it again
    assert tools.seen.count(("growi_getPage", {"n": 1})) == 1  # not fetched again
    again, twice = (r["content"] for r in model.requests[5].tool_results())
    assert again.startswith("[helpbot] Identical to call") and BODY[:200] in again
    assert "unchanged" in twice and BODY[:200] not in twice  # one whole copy per round, however often asked


def test_results_too_small_to_pay_for_the_rewrite_are_not_cleared() -> None:
    answer, model, _ = run(9, body="短い。")
    assert not any(e["event"] == "cleared" for e in answer.trace)
    assert all(len(req.messages) - 1 in marked(req) for req in model.requests[:-1])  # every request writes


def test_clearing_can_be_turned_off() -> None:
    answer, model, _ = run(9, settings=replace(SETTINGS, clear_after_reads=None))
    assert not any(e["event"] == "cleared" for e in answer.trace)
    assert not any(cleared_ids(req) for req in model.requests)


def test_a_digest_is_the_sources_and_the_head_of_the_text_not_the_envelope() -> None:
    content = json.dumps({"status": "ok", "tool": "github_getIssue", "item": {
        "title": "在庫同期 遅延 #1", "url": "https://github.com/acme/shop/issues/1", "number": 1,
        "body": "本文の最初の行。" + "詳細。" * 200}}, ensure_ascii=False)
    sources = [{"title": f"issue {n}", "url": f"https://github.com/acme/shop/issues/{n}"} for n in range(1, 9)]
    text = digest("github_getIssue", content, sources)
    assert text.startswith(CLEARED_HEADER.format(name="github_getIssue"))
    assert "<https://github.com/acme/shop/issues/6>" in text and "issues/7>" not in text
    assert "2 more sources" in text and "本文の最初の行。" in text and '"status"' not in text
    assert len(text) < 700
    plain = digest("sales_query", "  rows:\n 1  2  3 " + "x" * 500, [])
    assert "rows: 1 2 3" in plain and plain.endswith("…")


def test_the_clearing_setting_reads_empty_as_unset_and_zero_as_never() -> None:
    assert Settings.from_env({}).clear_after_reads == 2
    assert Settings.from_env({"HELPBOT_CLEAR_AFTER_READS": ""}).clear_after_reads == 2  # Actions' unset variable
    assert Settings.from_env({"HELPBOT_CLEAR_AFTER_READS": "3"}).clear_after_reads == 3
    assert Settings.from_env({"HELPBOT_CLEAR_AFTER_READS": "0"}).clear_after_reads is None
    with pytest.raises(ConfigError, match="HELPBOT_CLEAR_AFTER_READS"):
        Settings.from_env({"HELPBOT_CLEAR_AFTER_READS": "two"})


def test_past_the_threshold_read_results_are_cleared_not_summarized_even_late() -> None:
    settings = replace(SETTINGS, summary_threshold_tokens=6_000, model="main", summary_model="summary")
    answer, model, _ = run(9, settings=settings)
    late = [e for e in answer.trace if e["event"] == "cleared" and e["why"] == "threshold"]
    assert late and not any(e["event"] == "summary" for e in answer.trace)
    assert not [req for req in model.requests if req.model == "summary"]
    for req in model.requests[SETTINGS.max_rounds // 2 + 1:-1]:  # the second half stays under the threshold
        assert request_tokens(req.system_text, req.tools, req.messages[:-1]) <= settings.summary_threshold_tokens


def test_once_the_model_reads_a_cleared_result_again_no_more_scheduled_clearings() -> None:
    def clearings(repeat: tuple[int, int] | None) -> int:
        answer, _, _ = run(9, repeat=repeat)
        return sum(e["event"] == "cleared" for e in answer.trace)

    assert clearings(None) == 2
    assert clearings((4, 1)) == 1  # the one before round 4's repeat, none after it
