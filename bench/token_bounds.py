"""Bench: the lowest bill any schedule of clearing old tool results and writing the cache could reach on the
token bench's transcript -- found with hindsight, so that a token economy knows the bound it works against.

It records ``agent_tokens``' baseline run (10 rounds, 21 calls, the real Agent and client to the billing stub),
counts each block as the stub does, and searches every schedule exhaustively (dynamic programming over Pareto
sets): at each request but the final one, clear every result not yet cleared of the rounds up to some J (never
the newest round's, shown ``cJ``), then write the cache (``W``), write only up to the first result not cleared
(``w``: the part the next clearing keeps) or not (``-``); the final request never writes. A clearing is either

- *summary*: the cheap model reads the results, the question and the notes so far (the agent's summary prompt,
  billed as the bench bills it: input 1/3, output 5/3); its notes (the stub's reply and the sources) go at the
  end of the newest message and each result becomes the summarized stub; or
- *digest*: each result becomes a block of D tokens (a stand-in), no model.

The cache is the stub's: a request reads the longest entry whose prefix is unchanged (0.1x), pays 1.25x for what
it writes and 1x for the rest; no entry under 1,024 tokens. Breakpoints are placed at best (on the entry read,
before the first result not cleared, at the end). Checks (exit 1 if one fails): never clearing bills what the stub
billed the baseline run, and each schedule shown, replayed through the stub's cache, bills what the search found.
Not modelled: the cache's 5-minute TTL, Claude's real tokenizer.

    uv run python bench/token_bounds.py [--sizes 1,20,50,100] [--digest-tokens 150]   # a sweep: 100,150,250
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from agent_http import MAIN, MIN_CACHEABLE, SUMMARY, CacheModel, Knowledge, _blocks, real_tools, summary_reply
from agent_tokens import QUESTION, baseline_settings, main_billed, run

from agent.core import tokens as tk
from agent.core.notes import SUMMARIZED_STUB, SUMMARY_SYSTEM, notes_text, summary_request
from agent.core.prompt_cache import CACHE
from agent.core.settings import CACHE_READ_FACTOR, CACHE_WRITE_FACTOR, Settings
from agent.core.tokens import estimate_tokens
from agent.core.transcript import tool_results, user_message

Kind = Literal["summary", "digest"]
Write = Literal["-", "w", "W"]  # none; only up to the first result not yet cleared; everything
Decision = tuple[int, Write]  # (clear the rounds up to this one, write the cache)
CACHE_CAPS = (0.3, 0.4, 0.5, 0.6, math.inf)  # the frontier is shown at these cache ratios
TARGET_CACHE = 0.5


# -- the transcript --------------------------------------------------------------------------------------------
def _plain(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


@dataclass(frozen=True)
class Transcript:
    """The baseline run's final request to the main model, without breakpoints: ``messages`` are the question,
    then per round the assistant's turn and the user message of its results (the last one with the final
    request's note); request k sends the first 2k-1 of them."""

    head: dict[str, Any]  # tools, system and tool_choice as sent
    messages: list[dict[str, Any]]
    sources: dict[str, list[dict[str, str]]]  # tool_use id -> the sources its result gave the agent

    @classmethod
    def of(cls, final: dict[str, Any], sources: dict[str, list[dict[str, str]]]) -> Transcript:
        head = {"tools": [_plain(t) for t in final.get("tools") or []],
                "system": [_plain(b) for b in final["system"]], "tool_choice": final.get("tool_choice")}
        messages = [{**m, "content": [_plain(b) for b in m["content"]]} for m in final["messages"]]
        return cls(head, messages, sources)

    @property
    def requests(self) -> int:
        return (len(self.messages) + 1) // 2

    def body(self, k: int, cleared: int = 0, clear: Callable[[dict[str, Any]], dict[str, Any]] = _plain,
             notes: str = "", notes_at: int = 0, marks: Iterable[int] = ()) -> dict[str, Any]:
        """Request ``k`` with the results of rounds 1..``cleared`` replaced by ``clear(block)``, the notes at the
        end of round ``notes_at``'s results and a breakpoint on each message in ``marks``."""
        messages = []
        for index, message in enumerate(self.messages[:2 * k - 1]):
            round_ = index // 2
            if index and index % 2 == 0:  # a user message of results
                content = [clear(b) if round_ <= cleared and b["type"] == "tool_result" else b
                           for b in message["content"]]
                content += [{"type": "text", "text": notes}] if notes and round_ == notes_at else []
                message = {**message, "content": content}
            messages.append(message)
        for index in marks:
            content = messages[index]["content"]
            messages[index] = {**messages[index], "content": [*content[:-1], {**content[-1], "cache_control":
                                                                               CACHE}]}
        return {**self.head, "messages": messages}


def record(kb: int, settings: Settings) -> tuple[Transcript, float, int]:
    """The baseline run of ``agent_tokens`` at ``kb`` KB: its transcript, what the stub billed the main model
    (with the loop's breakpoints, never summarized) and what its requests count uncached."""
    knowledge = Knowledge(chars=kb * 1000)
    baseline = baseline_settings(settings)
    stub, _ = run(knowledge, baseline, 0.0, 0.0)
    bodies = [r.body for r in stub.stub.requests if r.model_id == MAIN]
    final = bodies[-1]
    uses = [b for m in final["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    with real_tools(knowledge, 0.0) as tools:  # the same fakes answer the same calls: the sources the agent kept
        sources = {b["id"]: tools.call(b["name"], b["input"]).sources for b in uses}
    transcript = Transcript.of(final, sources)
    for k, body in enumerate(bodies, 1):  # every request is a prefix of the final one, as the search assumes
        sent = Transcript.of(body, sources)
        assert (sent.head, sent.messages) == (transcript.head, transcript.body(k)["messages"]), f"request {k}"
    return transcript, main_billed(stub), stub.billing.prompt[MAIN]


# -- what a clearing costs and leaves ------------------------------------------------------------------------
@dataclass(frozen=True)
class Notes:
    summary: str = ""
    sources: tuple[tuple[tuple[str, str], ...], ...] = ()  # each source's items, first seen first
    cost: float = 0.0  # what the summary request that wrote them billed (Sonnet-equivalent)

    @property
    def text(self) -> str:
        return notes_text(self.summary, [dict(s) for s in self.sources]) if self.summary else ""


@dataclass(frozen=True)
class Cache:
    """Where the valid entries end (message indices): ``tail`` where the last full write ended, while nothing
    before it changed; ``stable`` before the first result not cleared when it was written, which later clearings
    leave as it was."""

    stable: int | None = None
    tail: int | None = None

    @property
    def read_at(self) -> int | None:
        return max((at for at in (self.stable, self.tail) if at is not None), default=None)


State = tuple[tuple[int, ...], int, Cache]  # (the clear levels so far, the round holding the notes, the cache)


@dataclass(frozen=True)
class Step:
    state: State
    main: float  # what the main model request billed (Sonnet-equivalent)
    summary: float
    size: int  # what it counts uncached
    marks: tuple[int, ...]  # where the breakpoints go (message indices) to bill like that


class Economy:
    """The cost of one request under a clearing schedule, for one transcript and one kind of clearing."""

    def __init__(self, transcript: Transcript, kind: Kind, digest_tokens: int, settings: Settings):
        self.t, self.kind, self.digest_tokens, self.settings = transcript, kind, digest_tokens, settings
        self.refs = list(tool_results(transcript.messages))
        self._notes: dict[tuple[int, ...], Notes] = {(): Notes()}
        self._sizes: dict[tuple[int, str, int], list[int]] = {}
        self._digests: dict[str, dict[str, Any]] = {}

    def clear(self, block: dict[str, Any]) -> dict[str, Any]:
        if self.kind == "summary":
            return {**block, "content": SUMMARIZED_STUB}
        if block["tool_use_id"] not in self._digests:  # D tokens as the stub counts the block
            pad = next(n for n in range(8 * self.digest_tokens) if estimate_tokens(json.dumps(
                {**block, "content": "." * n}, ensure_ascii=False)) >= self.digest_tokens)
            self._digests[block["tool_use_id"]] = {**block, "content": "." * pad}
        return self._digests[block["tool_use_id"]]

    def notes(self, levels: tuple[int, ...]) -> Notes:
        """The notes after clearing up to each of ``levels`` in turn (summary kind; none for digests)."""
        if self.kind == "digest":
            return Notes()
        if levels not in self._notes:
            earlier = self.notes(levels[:-1])
            since = levels[-2] if len(levels) > 1 else 0
            refs = [ref for ref in self.refs if since < ref.message // 2 <= levels[-1]]
            budget = self.settings.request_budget_tokens

            def fits(prompt: str) -> bool:
                return tk.request_tokens(SUMMARY_SYSTEM, [], [user_message(prompt)]) <= budget

            prompt = summary_request(QUESTION, earlier.summary, refs, fits)
            assert prompt is not None, "the summary request never fits the budget"
            body = {"system": [{"type": "text", "text": SUMMARY_SYSTEM}], "messages": [user_message(prompt)],
                    "max_tokens": self.settings.summary_max_tokens}
            reply = summary_reply(body)
            prompt_tokens = CacheModel().bill(SUMMARY, body)[3]
            output = estimate_tokens(json.dumps(reply, ensure_ascii=False))
            sources = list(earlier.sources)
            for ref in refs:  # as the economy keeps them: each new one once
                sources += [s for s in (tuple(x.items()) for x in self.t.sources[ref.tool_use_id]) if s not in sources]
            cost = (prompt_tokens + 5.0 * output) / 3.0  # as agent_tokens.summary_billed
            self._notes[levels] = Notes(reply[0]["text"], tuple(sources), cost)
        return self._notes[levels]

    def sizes(self, cleared: int, notes: str, notes_at: int) -> list[int]:
        """The stub's token count of the transcript up to the end of each message (tools and system included,
        the per-message overhead not: it is never cached)."""
        key = (cleared, notes, notes_at)
        if key not in self._sizes:
            body = self.t.body(self.t.requests, cleared, self.clear, notes, notes_at)
            counts = iter(estimate_tokens(text) for text, _ in _blocks(body))
            total = sum(next(counts) for _ in range(len(body["tools"]) + len(body["system"])))
            out = []
            for message in body["messages"]:
                total += sum(next(counts) for _ in message["content"])
                out.append(total)
            self._sizes[key] = out
        return self._sizes[key]

    def body(self, k: int, state: State, marks: Iterable[int]) -> dict[str, Any]:
        levels, notes_at, _ = state
        return self.t.body(k, levels[-1] if levels else 0, self.clear, self.notes(levels).text, notes_at, marks)

    def options(self, k: int, state: State, writes: tuple[Write, ...]) -> list[Decision]:
        level = state[0][-1] if state[0] else 0
        if k == self.t.requests:
            return [(level, "-")]
        return [(j, write) for j in range(level, max(level, k - 2) + 1) for write in writes]

    def step(self, k: int, state: State, decision: Decision) -> Step:
        levels, notes_at, cache = state
        level, write = decision
        summary = 0.0
        if level > (levels[-1] if levels else 0):
            levels = (*levels, level) if self.kind == "summary" else (level,)
            notes_at = k - 1 if self.kind == "summary" else 0
            summary = self.notes(levels).cost
            cache = Cache(cache.stable)  # the last write's tail changed
        sizes = self.sizes(level, self.notes(levels).text, notes_at)
        last = 2 * (k - 1)
        total = sizes[last]
        size = total + 4 * (last + 1)  # the stub counts 4 tokens per message
        read_at = cache.read_at
        read = sizes[read_at] if read_at is not None and sizes[read_at] >= MIN_CACHEABLE else 0
        marks: tuple[int, ...] = () if read_at is None else (read_at,)
        kept = min(2 * level + 1, last)  # the assistant turn before the first result not cleared
        written = 0
        if write == "W" and total >= MIN_CACHEABLE:
            written = total - read
            cache, marks = Cache(kept, last), (*marks, kept, last)
        elif write == "w" and (read_at is None or read_at < kept) and sizes[kept] >= MIN_CACHEABLE:
            written = sizes[kept] - read
            cache, marks = Cache(kept, cache.tail), (*marks, kept)
        main = CACHE_READ_FACTOR * read + CACHE_WRITE_FACTOR * written + (size - read - written)
        return Step((levels, notes_at, cache), main, summary, size, tuple(sorted(set(marks))))


# -- the search ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    billed: float  # main + summary model
    main: float
    uncached: int  # what the main model's requests count uncached
    path: tuple[Decision, ...]


def _pareto(points: list[Point]) -> list[Point]:
    """The points no other beats on every count (lower billed, lower main, more uncached): the future adds the
    same to each, so only these can end best at any cache ratio."""
    kept: list[Point] = []
    for p in sorted(points, key=lambda p: (p.billed, p.main, -p.uncached)):
        if not any(q.main <= p.main and q.uncached >= p.uncached for q in kept):
            kept.append(p)
    return kept


START: State = ((), 0, Cache())


def search(economy: Economy, writes: tuple[Write, ...]) -> list[Point]:
    """Every schedule, by dynamic programming: the points reachable at the end that no other point beats."""
    frontier: dict[State, list[Point]] = {START: [Point(0.0, 0.0, 0, ())]}
    for k in range(1, economy.t.requests + 1):
        reached: dict[State, list[Point]] = {}
        for state, points in frontier.items():
            for decision in economy.options(k, state, writes):
                s = economy.step(k, state, decision)
                reached.setdefault(s.state, []).extend(
                    Point(p.billed + s.main + s.summary, p.main + s.main, p.uncached + s.size, (*p.path, decision))
                    for p in points)
        frontier = {state: _pareto(points) for state, points in reached.items()}
    return _pareto([p for points in frontier.values() for p in points])


def evaluate(economy: Economy, path: tuple[Decision, ...]) -> tuple[Point, int]:
    """One schedule's point, and its largest request."""
    state, point, peak = START, Point(0.0, 0.0, 0, ()), 0
    for k, decision in enumerate(path, 1):
        s = economy.step(k, state, decision)
        state, peak = s.state, max(peak, s.size)
        point = Point(point.billed + s.main + s.summary, point.main + s.main, point.uncached + s.size,
                      (*point.path, decision))
    return point, peak


def replay(economy: Economy, path: tuple[Decision, ...]) -> float:
    """What the stub's cache bills the main model for this schedule's requests, breakpoints as assumed."""
    cache, state, billed = CacheModel(), START, 0.0
    for k, decision in enumerate(path, 1):
        s = economy.step(k, state, decision)
        assert len(s.marks) <= 3, s.marks  # Bedrock takes 4: one is left for the system block
        body = economy.body(k, s.state, s.marks)
        uncached, read, written, _ = cache.bill(MAIN, body)
        billed += uncached + CACHE_READ_FACTOR * read + CACHE_WRITE_FACTOR * written
        state = s.state
    return billed


def schedule_text(path: tuple[Decision, ...]) -> str:
    out, level = [], 0
    for j, write in path:
        out.append((f"c{j}" if j > level else "") + write)
        level = j
    return " ".join(out)


def same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


# -- the report ------------------------------------------------------------------------------------------------
WRITES: dict[str, tuple[Write, ...]] = {"W-": ("-", "W"), "Ww-": ("-", "w", "W")}  # the writes a schedule may use


def report(kb: int, transcript: Transcript, billed: float, baseline: int, kinds: list[tuple[Kind, int]],
           settings: Settings) -> bool:
    """Per kind of clearing, one line per set of writes; False when a check fails."""
    ok = True
    never: tuple[Decision, ...] = tuple((0, "W" if k < transcript.requests else "-")
                                        for k in range(1, transcript.requests + 1))
    for kind, digest in kinds:
        economy = Economy(transcript, kind, digest, settings)
        reference, _ = evaluate(economy, never)
        if not (same(reference.main / billed, 1.0) and reference.uncached == baseline):
            print(f"CHECK FAILED {kb}KB {kind}: never clearing bills {reference.main:,.1f} of {reference.uncached:,} "
                  f"tokens here, the stub billed the baseline run {billed:,.1f} of {baseline:,}", file=sys.stderr)
            ok = False
        for writes_name, writes in WRITES.items():
            points = search(economy, writes)
            best = {cap: min((p for p in points if p.main <= cap * p.uncached), key=lambda p: p.billed, default=None)
                    for cap in CACHE_CAPS}
            for p in {p.path: p for p in (reference, *(b for b in best.values() if b))}.values():
                stub = replay(economy, p.path)
                if not same(stub / p.main, 1.0):
                    print(f"CHECK FAILED {kb}KB {kind}: {schedule_text(p.path)} bills {p.main:,.1f} here, {stub:,.1f} "
                          f"in the stub's cache", file=sys.stderr)
                    ok = False
            name = "summary" if kind == "summary" else f"digest {digest}"
            line = (f"{kb:>4}KB {name:<10} {writes_name:<4} {reference.billed / baseline:>6.1%} "
                    f"{reference.main / reference.uncached:>6.1%}")
            target = best[TARGET_CACHE]
            if target is None:
                line += f" {'(the cache target is out of reach)':<76}"
            else:
                _, peak = evaluate(economy, target.path)
                line += (f" {target.billed / baseline:>6.1%} {target.main / target.uncached:>6.1%} "
                         f"{(target.billed - target.main) / target.billed:>6.1%} {peak:>7,}  "
                         f"{schedule_text(target.path):<46}")
            print(line + " " + " ".join(f"{b.billed / baseline:>6.1%}" if b else f"{'-':>6}" for b in best.values()))
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,20,50,100", help="KB (thousands of characters) per page/issue body")
    parser.add_argument("--digest-tokens", default="150", help="tokens per cleared result (comma-separated: a sweep)")
    args = parser.parse_args()
    settings = Settings()
    kinds: list[tuple[Kind, int]] = [("summary", 0), *(("digest", int(d)) for d in args.digest_tokens.split(","))]
    caps = " ".join(f"{'<=' + format(c, '.0%') if c != math.inf else 'any':>6}" for c in CACHE_CAPS)
    print(f"{'':<22} {'never clear':>13} {'best at cache <= 50 %':<84} billed at cache\n"
          f"{'size':>6} {'kind':<10} {'wr.':<4} {'billed':>6} {'cache':>6} {'billed':>6} {'cache':>6} {'summ.':>6} "
          f"{'peak':>7}  {'schedule':<46} {caps}")
    ok = True
    for kb in (int(x) for x in args.sizes.split(",")):
        transcript, billed, baseline = record(kb, settings)
        print(f"{kb:>4}KB baseline: {baseline:,} tokens resent uncached over {transcript.requests} requests")
        ok &= report(kb, transcript, billed, baseline, kinds, settings)
    print("billed: main + summary model (Sonnet-equivalent) / the baseline; cache: what the main model pays / its "
          "requests uncached;\nsumm.: the summary model's share of billed; wr.: the writes a schedule may use (W "
          "everything, w up to the\nfirst result not cleared, - none)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
