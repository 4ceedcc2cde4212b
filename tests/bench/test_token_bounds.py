"""The token-bounds search of bench/token_bounds.py on toy transcripts: never clearing bills what the cache's
rules give by hand, every schedule bills the same in the stub's cache, and the search finds the cheapest of
every schedule enumerated one by one, for both kinds of clearing."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent.core.settings import Settings
from agent.core.tokens import estimate_tokens

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def tb(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # the bench scripts import their neighbours by name
    return importlib.import_module("token_bounds")


def final_request(rounds: int) -> dict[str, Any]:
    """A final request as the loop sends it: one tool call per round, results of 2,001 tokens times the round."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "q" * 700}]}]
    for r in range(1, rounds + 1):
        use = {"type": "tool_use", "id": f"toolu_{r}", "name": "growi_getPage", "input": {"pageId": str(r)}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{r}", "content": "r" * 7000 * r}
        messages += [{"role": "assistant", "content": [{"type": "text", "text": "a"}, use]},
                     {"role": "user", "content": [result]}]
    messages[-1]["content"].append({"type": "text", "text": "Answer now."})
    return {"tools": [{"name": "growi_getPage", "description": "d", "input_schema": {"type": "object"}}],
            "system": [{"type": "text", "text": "s" * 3500, "cache_control": {"type": "ephemeral"}}],
            "tool_choice": {"type": "auto"}, "messages": messages}


def economy(tb: ModuleType, rounds: int, kind: str) -> Any:
    sources = {f"toolu_{r}": [{"title": f"page {r}", "url": f"https://wiki.example/{r}"}] for r in range(1, 9)}
    return tb.Economy(tb.Transcript.of(final_request(rounds), sources), kind, 40, Settings())


def test_never_clearing_bills_the_cache_rules_by_hand(tb: ModuleType) -> None:
    e = economy(tb, 2, "digest")
    c = [estimate_tokens(text) for text, _ in tb._blocks(final_request(2))]
    prefix, question, a1, r1, a2, r2 = c[0] + c[1], c[2], c[3] + c[4], c[5], c[6] + c[7], c[8] + c[9]
    assert prefix + question >= 1024  # the first request's entry is written
    by_hand = (1.25 * (prefix + question) + 4 * 1  # writes the question; 4 tokens per message, never cached
               + 0.1 * (prefix + question) + 1.25 * (a1 + r1) + 4 * 3  # reads it, writes round 1
               + 0.1 * (prefix + question + a1 + r1) + (a2 + r2) + 4 * 5)  # the final request reads, writes nothing
    never = ((0, "W"), (0, "W"), (0, "-"))
    point, peak = tb.evaluate(e, never)
    assert point.main == pytest.approx(by_hand)
    assert point.uncached == 3 * (prefix + question) + 2 * (a1 + r1) + a2 + r2 + 4 * (1 + 3 + 5)
    assert peak == prefix + question + a1 + r1 + a2 + r2 + 4 * 5
    assert tb.replay(e, never) == pytest.approx(by_hand)  # the stub's cache bills it the same


def every_schedule(requests: int) -> list[tuple[tuple[int, str], ...]]:
    """The schedule space, spelled out: clear up to J <= the round before the newest, then write W, w or -."""
    paths: list[tuple[tuple[int, str], ...]] = [()]
    for k in range(1, requests + 1):
        grown = []
        for path in paths:
            level = max((j for j, _ in path), default=0)
            choices = [(level, "-")] if k == requests else [
                (j, w) for j in range(level, max(level, k - 2) + 1) for w in "-wW"]
            grown += [(*path, choice) for choice in choices]
        paths = grown
    return paths


@pytest.mark.parametrize("kind", ["digest", "summary"])
def test_the_search_finds_the_cheapest_of_every_schedule(tb: ModuleType, kind: str) -> None:
    e = economy(tb, 4, kind)
    points = [tb.evaluate(e, path)[0] for path in every_schedule(e.t.requests)]
    assert len(points) > 100
    found = tb.search(e, ("-", "w", "W"))
    for cap in (0.3, 0.5, 0.7, math.inf):
        cheapest = min((p.billed for p in points if p.main <= cap * p.uncached), default=None)
        best = min((p.billed for p in found if p.main <= cap * p.uncached), default=None)
        assert best == pytest.approx(cheapest), cap


@pytest.mark.parametrize("kind", ["digest", "summary"])
def test_every_schedule_bills_in_the_stubs_cache_what_the_search_counts(tb: ModuleType, kind: str) -> None:
    e = economy(tb, 4, kind)
    for path in every_schedule(e.t.requests):
        assert tb.replay(e, path) == pytest.approx(tb.evaluate(e, path)[0].main), tb.schedule_text(path)
