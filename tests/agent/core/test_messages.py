"""The transcript operations behind the token economy: cache breakpoints that follow what is still cached, the
incremental budget cut, the token cap of one result, and where the notes go."""

from __future__ import annotations

import json
from typing import Any

from agent.core import tokens as tk
from agent.core.economy import fit_budget
from agent.core.notes import NOTES_HEADER, SUMMARIZED_STUB, notes_text, set_notes
from agent.core.prompt_cache import CacheState, cached_request
from agent.core.transcript import CUT_MARKER, MIN_CUT_CHARS, replace_result, tool_results, user_message
from mcp_lib.cutting import keep_start_within_tokens, without_marker
from tests.fakes.model import notes_of


def _transcript(rounds: int, chars: int = 2_000) -> list[dict[str, Any]]:
    messages = [user_message("在庫同期が遅れる原因は？")]
    for n in range(1, rounds + 1):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{n}", "name": "redmine_getIssue", "input": {"n": n}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"チケット{n}の調査ログ。" * (chars // 10)}]})
    return messages


def _marked(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if any("cache_control" in b for b in m["content"])]


def test_breakpoints_read_the_longest_prefix_still_cached_after_a_summary() -> None:
    messages = _transcript(4)
    cache = CacheState()
    for size in range(1, len(messages) + 1, 2):  # the requests of rounds 0..4 as the transcript grew
        cached_request("system", [{"name": "t", "input_schema": {}}], messages[:size], cache=cache)
    assert cache.entries[-2:] == [6, 8]
    # a summary replaces the results of rounds 2 and 3 (messages 4 and 6) and puts the notes in the newest one
    for ref in [r for r in tool_results(messages) if r.tool_use_id in ("t2", "t3")]:
        replace_result(messages, ref, SUMMARIZED_STUB)
    set_notes(messages, len(messages) - 1, notes_text("- 要約", []))
    system, tools, out = cached_request("system", [{"name": "t", "input_schema": {}}], messages, cache=cache)
    assert _marked(out) == [2, 8]  # round 1's results: the prefix still cached, read and not written again
    assert "cache_control" in system[0] and "cache_control" in tools[-1]  # the spare one on the tools: four at most
    assert out[0] is messages[0] and messages[0]["content"] == [{"type": "text", "text": "在庫同期が遅れる原因は？"}]
    assert "cache_control" not in json.dumps(messages)


def test_a_final_request_reads_the_cached_messages_and_writes_none() -> None:
    messages = _transcript(2)
    cache = CacheState()
    cached_request("system", [], messages[:3], cache=cache)  # round 1's request wrote its transcript
    _, _, out = cached_request("system", [], messages, cache=cache, write_at=None)
    assert _marked(out) == [2]  # the final answer reads the previous request's entry and writes none


def test_the_notes_move_to_the_newest_message_and_leave_the_question_alone() -> None:
    messages = _transcript(3)
    set_notes(messages, 4, notes_text("- 一回目", []))
    set_notes(messages, 6, notes_text("- 二回目", []))
    assert notes_of(messages).endswith("- 二回目")
    assert json.dumps(messages, ensure_ascii=False).count(NOTES_HEADER) == 1
    assert messages[6]["content"][0]["type"] == "tool_result"  # tool results stay first, the notes after them
    assert messages[0] == user_message("在庫同期が遅れる原因は？")


def test_the_budget_cut_is_incremental_and_ends_within_the_budget() -> None:
    messages = _transcript(6, chars=20_000)
    calls = 0

    def estimate() -> int:
        nonlocal calls
        calls += 1
        return tk.request_tokens("system", [], messages)

    cut = fit_budget(messages, 20_000, estimate)
    assert estimate() <= 20_000 and len(cut) > 6  # several halvings of the same results
    assert calls <= 4  # not one whole-transcript estimate per halving (once to start, once or twice to confirm)


def test_one_result_is_capped_in_estimated_tokens() -> None:
    japanese, english = "在庫同期ログ。" * 5_000, "stock sync log line. " * 5_000
    for text in (japanese, english):
        capped = keep_start_within_tokens(text, 3_000, tk.estimate_tokens, CUT_MARKER, MIN_CUT_CHARS)
        assert tk.estimate_tokens(without_marker(capped, CUT_MARKER)) <= 3_000 and "more characters cut" in capped
        assert tk.estimate_tokens(without_marker(capped, CUT_MARKER)) > 2_400  # near the cap, not far below it
    assert keep_start_within_tokens("短い", 3_000, tk.estimate_tokens, CUT_MARKER) == "短い"


def test_the_token_memo_counts_exactly_what_the_whole_payload_counts() -> None:
    import base64

    pdf = base64.b64encode(b"%PDF /Type /Page x /Type /Page y").decode()
    tools = [{"name": "faq_search", "description": "FAQ を検索", "input_schema": {"type": "object"}}]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "前の質問"},
        {"role": "assistant", "content": [{"type": "text", "text": "answer \"quoted\" \\ 日本語"}]},
        {"role": "user", "content": [{"type": "document", "source": {"type": "base64", "data": pdf}},
                                     {"type": "text", "text": "在庫同期が遅れる"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "faq_search",
                                           "input": {"query": "在庫"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "結果 " * 300}]},
    ]

    def whole(messages: list[dict[str, Any]]) -> int:  # the whole payload serialized at once, media apart
        text_only, media = [], 0
        for m in messages:
            if isinstance(m["content"], list):
                media += sum(tk.media_tokens(b) or 0 for b in m["content"])
                m = {**m, "content": [b for b in m["content"] if tk.media_tokens(b) is None]}
            text_only.append(m)
        payload = json.dumps([tools, text_only], ensure_ascii=False, separators=(",", ":"))
        return tk.estimate_tokens("system") + tk.estimate_tokens(payload) + 4 * len(messages) + media

    memo = tk.TokenMemo()
    for count in range(len(messages) + 1):  # every prefix, the empty one too
        assert tk.request_tokens("system", tools, messages[:count], memo) == whole(messages[:count])
    messages[-1] = {**messages[-1], "content": [{**messages[-1]["content"][0], "content": "短い"}]}  # replaced
    assert tk.request_tokens("system", tools, messages, memo) == whole(messages)
    messages[1]["content"] = [{"type": "text", "text": "x" * 1000}]  # even a content swapped in place is seen
    assert tk.request_tokens("system", tools, messages, memo) == whole(messages)
