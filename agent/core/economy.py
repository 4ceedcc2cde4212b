"""The token economy of a run: estimate each request, and make the transcript fit before it is sent. With the prompt
cache a token is written once (1.25x) and read by every later request (0.1x), so results already read are the run's
largest cost. They are cleared to digests in batches, in the first half of the round limit and only when the reads saved
pay for the rewrite; past the summary threshold they become notes from the cheap model; past the hard budget the largest
are cut, then the earliest turns. Estimates follow the usage reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal, Protocol

from agent.core import tokens as tk
from agent.core.model import Model, Request, Usage
from agent.core.notes import SUMMARIZED_STUB, SUMMARY_SYSTEM, mechanical_summary, notes_text, set_notes, summary_request
from agent.core.prompt_cache import CacheState, cached_request
from agent.core.settings import CACHE_READ_FACTOR, CACHE_WRITE_FACTOR, Settings
from agent.core.transcript import CUT_MARKER, MIN_CUT_CHARS, ResultRef, replace_result, tool_results, user_message
from agent.errors import ModelError, ModelRequestError
from mcp_lib.clock import Clock
from mcp_lib.cutting import keep_start, keep_start_within_tokens, without_marker

MAX_CALIBRATION, MIN_CALIBRATION = 4.0, 0.5  # the bounds of reported usage / our estimate
ClearMode = Literal["schedule", "due", "threshold"]
Fate = Literal["cleared", "summarized", "cut", "unchanged"]
REPLACED: tuple[Fate, ...] = ("cleared", "summarized")  # by a digest or the notes: never cleared or summarized again
HISTORY_TURN_SHORT_CHARS = 1_000  # an earlier turn's question or answer, when the request needs the room


class RunView(Protocol):
    """What the economy reads of its run (``agent.core.run.Run``, which holds the economy)."""

    messages: list[dict[str, Any]]
    rounds: int
    sources_by_id: dict[str, list[dict[str, str]]]

    def tally(self, model: str, usage: Usage) -> None: ...


class Economy:
    """One run's economy and what it keeps (below)."""

    def __init__(self, model: Model | None, settings: Settings, clock: Clock, question_index: int, *,
                 system: str, schemas: list[dict[str, Any]], question: str,
                 event: Callable[..., None], progress: Callable[..., None]):
        self.model, self.settings, self.clock = model, settings, clock
        self.system, self.schemas, self.question = system, schemas, question  # the run's plan
        self.event = event  # event(run, kind, **data): the loop's trace
        self.progress = progress  # progress(run, phase): the loop's progress report
        self.question_index = question_index  # moves up when earlier turns are dropped
        self.digests: dict[str, str] = {}  # tool_use id -> what clearing leaves of its result
        self.copies: dict[str, str] = {}  # tool_use id -> the content first shown, for a repeat of the call
        self.fates: dict[str, Fate] = {}  # tool_use id -> cleared, summarized or (only) cut to fit the budget
        self.read_again = False  # a cleared result was asked for again: no more scheduled clearings
        self.clear_due = False  # the last request withheld its cache write for a clearing: the next one clears
        self.notes = ""  # the summary so far (the notes block adds notes_sources)
        self.notes_sources: list[dict[str, str]] = []
        self.calibration = 1.0
        self.cache = CacheState()
        self.token_memo = tk.TokenMemo()

    # -- what a round asks -------------------------------------------------------------------------------------
    def admit(self, tool_use_id: str, content: str, digest: str | None) -> str:
        """A fresh result as shown, capped in tokens; one with a ``digest`` may be cleared, its copy kept."""
        content = keep_start_within_tokens(content, int(self.settings.tool_result_max_tokens / self.calibration),
                                           tk.estimate_tokens, CUT_MARKER, MIN_CUT_CHARS)
        if digest is not None:
            self.digests[tool_use_id], self.copies[tool_use_id] = digest, content
        return content

    def bring_back(self, tool_use_id: str) -> bool:
        """Whether a repeat brings a cleared result back; after one, no scheduled clearing (more may be needed)."""
        self.read_again |= self.fate(tool_use_id) == "cleared"
        return self.fate(tool_use_id) == "cleared"

    def fate(self, tool_use_id: str) -> Fate:
        return self.fates.get(tool_use_id, "unchanged")

    # -- one request -------------------------------------------------------------------------------------------
    def prepare(self, r: RunView, deadline: float, *, final: bool
                ) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(estimated tokens, system, tools, messages): the request made to fit, with its cache breakpoints."""
        estimate = self._fit(r, deadline, final)
        return estimate, *cached_request(self.system, self.schemas, r.messages, write_at=self._write_at(r, final),
                                         keep_at=self._keep_at(r), cache=self.cache)

    def calibrate(self, r: RunView, usage: Usage) -> None:
        """Scale later estimates to what the model counted for the transcript just sent, within bounds."""
        estimated = self._raw_estimate(r)
        if usage.prompt_tokens > 0 and estimated > 0:
            self.calibration = min(MAX_CALIBRATION, max(MIN_CALIBRATION, usage.prompt_tokens / estimated))

    def estimate(self, r: RunView) -> int:
        return int(self._raw_estimate(r) * self.calibration)

    def _raw_estimate(self, r: RunView) -> int:
        return tk.request_tokens(self.system, self.schemas, r.messages, self.token_memo)

    def _fits(self, r: RunView) -> bool:
        return self.estimate(r) <= self.settings.request_budget_tokens

    def _fit(self, r: RunView, deadline: float, final: bool) -> int:
        """Clear what is due; past the threshold clear every read result, then summarize -- not before the final
        answer (no later request pays it back) unless the request before it counted on the clearing. Past the
        budget cut the largest results, then the earliest turns. Returns the estimate."""
        s = self.settings
        if not final or self.clear_due:
            self._clear(r, "due" if self.clear_due else "schedule")
        self.clear_due = False
        if not final and self.estimate(r) > s.summary_threshold_tokens:
            self._clear(r, "threshold")
            if self.estimate(r) > s.summary_threshold_tokens:
                self._summarize(r, deadline)
        if not self._fits(r):
            cut_ids = fit_budget(r.messages, s.request_budget_tokens, lambda: self.estimate(r), self.calibration)
            for tool_use_id in cut_ids:
                self.fates.setdefault(tool_use_id, "cut")  # a cleared or summarized one stays what it was
            self.event(r, "budget_cut", tool_use_ids=cut_ids, estimated_tokens=self.estimate(r))
        if not self._fits(r):
            shortened, dropped = trim_history(r.messages, self.question_index, lambda: self._fits(r))
            self.question_index -= dropped
            self.event(r, "history_trimmed", shortened_messages=shortened, dropped_turns=dropped // 2,
                       estimated_tokens=self.estimate(r))
        estimate = self.estimate(r)
        if estimate > s.request_budget_tokens:
            raise ModelRequestError(f"the request would need ~{estimate} tokens even with every tool result cut "
                                    f"and no earlier turns; raise HELPBOT_REQUEST_BUDGET_TOKENS "
                                    f"({s.request_budget_tokens}) or ask a shorter question")
        return estimate

    # -- clearing ----------------------------------------------------------------------------------------------
    def _write_at(self, r: RunView, final: bool) -> int | None:
        """Where this request writes the cache (None: nowhere): the end, or, when the next request clears, the
        end of what that one keeps (a write it would discard costs 1.25x for nothing)."""
        if final:
            return None
        batch = self._batch(r, ahead=1, mode="schedule")
        if batch is None:
            return len(r.messages) - 1
        self.clear_due = True  # committed: the next request clears whatever its own tail (this one did not write)
        first = batch[0].message - 1  # the tool_use message before the first result to be cleared
        entry = self.cache.valid_entry(r.messages)
        return first if entry is None or first > entry else None

    def _keep_at(self, r: RunView) -> int | None:
        """The message of the last result cleared or summarized, when no cache entry ends there or later yet."""
        kept = [ref.message for ref in tool_results(r.messages) if self.fate(ref.tool_use_id) in REPLACED]
        entry = self.cache.valid_entry(r.messages)
        return max(kept) if kept and (entry is None or max(kept) > entry) else None

    def _clear(self, r: RunView, mode: ClearMode) -> None:
        refs = self._batch(r, ahead=0, mode=mode)
        if not refs:
            return
        before = self.estimate(r)
        for ref in refs:
            self.fates[ref.tool_use_id] = "cleared"
            replace_result(r.messages, ref, self.digests[ref.tool_use_id])
        self.event(r, "cleared", cleared=len(refs), before_tokens=before, after_tokens=self.estimate(r), why=mode)

    def _batch(self, r: RunView, ahead: int, mode: ClearMode) -> list[ResultRef] | None:
        """The results to clear ``ahead`` requests from now (0: this one), None when none is due: the read ones
        with a digest shorter than them. On ``schedule`` the oldest must have been sent ``clear_after_reads``
        times, in the first half of the rounds, none read again, and the reads saved must pay for the rewrite;
        ``due`` (counted on earlier) is not priced again; past the ``threshold`` every read result goes."""
        reads, rounds = self.settings.clear_after_reads, self.settings.max_rounds
        later = rounds - r.rounds - ahead  # requests that may follow that one
        if reads is None or (mode == "schedule" and (later < rounds // 2 or self.read_again)):
            return None
        end = len(r.messages) - 1 + ahead
        refs = [ref for ref in tool_results(r.messages, before=end)
                if ref.tool_use_id in self.digests and self.fate(ref.tool_use_id) not in REPLACED
                and len(self.digests[ref.tool_use_id]) < len(ref.content)]
        if not refs or mode == "threshold":
            return refs or None
        if (len(r.messages) - 1 + 2 * ahead - refs[0].message) // 2 < reads:
            return None
        digests = {ref.tool_use_id: self.digests[ref.tool_use_id] for ref in refs}
        saved = sum(tk.estimate_tokens(ref.content) - tk.estimate_tokens(digests[ref.tool_use_id]) for ref in refs)
        tail = sum(_tokens(block, digests) for m in r.messages[refs[0].message:end] for block in m["content"])
        if mode == "schedule" and CACHE_READ_FACTOR * saved * (later + 1) <= (
                CACHE_WRITE_FACTOR - CACHE_READ_FACTOR) * tail:
            return None  # the reads saved do not pay for writing the rest of the transcript again (the tail)
        return refs

    # -- summaries ---------------------------------------------------------------------------------------------
    def _summarize(self, r: RunView, deadline: float) -> None:
        """Every read result becomes the notes at the end of the newest message -- all, not just enough: one kept
        after the first summarized would be written to the cache again, and the next summary is rounds away."""
        read = tool_results(r.messages, before=len(r.messages) - 1)  # the last message is not read yet
        refs = [ref for ref in read if self.fate(ref.tool_use_id) not in REPLACED]
        if sum(tk.estimate_tokens(ref.content) for ref in refs) < self.settings.summary_threshold_tokens // 4:
            return  # too little to gain: the budget cut handles one oversized round
        before = self.estimate(r)
        self.progress(r, "summarizing")
        summary, fallback = self._new_notes(r, refs, deadline)
        for ref in refs:
            replace_result(r.messages, ref, SUMMARIZED_STUB)
            self.fates[ref.tool_use_id] = "summarized"
            self.notes_sources += [src for src in r.sources_by_id.get(ref.tool_use_id, [])
                                   if src not in self.notes_sources]
        self.notes = summary
        set_notes(r.messages, len(r.messages) - 1, notes_text(self.notes, self.notes_sources))
        self.event(r, "summary", summarized=len(refs), before_tokens=before, after_tokens=self.estimate(r),
                   fallback=fallback)

    def _new_notes(self, r: RunView, refs: list[ResultRef], deadline: float) -> tuple[str, str | None]:
        """(notes, why the fallback was used): the summary model's, within the budget and its own deadline, or
        the notes so far plus each result's head -- the notes never depend on the cheap model being up."""
        assert self.model is not None
        s = self.settings
        fallback = "\n".join(part for part in (self.notes, mechanical_summary(refs)) if part)
        prompt = summary_request(self.question, self.notes, refs, lambda text: tk.request_tokens(
            SUMMARY_SYSTEM, [], [user_message(text)]) * self.calibration <= s.request_budget_tokens)
        if prompt is None:
            return fallback, "the results do not fit the request budget even when cut"
        try:
            ends = min(deadline, self.clock.monotonic() + s.summary_timeout_s)
            response = self.model.create(Request([{"type": "text", "text": SUMMARY_SYSTEM}], [user_message(prompt)],
                                                 [], None, s.summary_max_tokens, s.summary_model, ends, self.clock))
        except ModelError as exc:
            return fallback, str(exc)
        r.tally(s.summary_model, response.usage)
        if not response.text:
            return fallback, "the summary model returned no text"
        return response.text, None


def _tokens(block: dict[str, Any], digests: dict[str, str]) -> int:
    """A block's estimate once the results in ``digests`` are cleared."""
    if block.get("type") == "tool_result" and block.get("tool_use_id") in digests:
        return tk.estimate_tokens(digests[block["tool_use_id"]])
    return tk.block_tokens(block)


# -- the hard budget ---------------------------------------------------------------------------------------------
def fit_budget(messages: list[dict[str, Any]], budget: int, estimate: Callable[[], int], scale: float = 1.0
               ) -> list[str]:
    """Halve the largest tool results until the estimate is within ``budget`` (or none is left to cut); returns
    the ids cut. Incremental: a halving subtracts what the cut text counted (times ``scale``), the whole transcript
    is estimated only to start and to confirm."""
    cut_ids: list[str] = []
    current = estimate()
    while current > budget:
        refs = {(ref.message, ref.block): ref for ref in tool_results(messages) if len(ref.content) > MIN_CUT_CHARS * 2}
        if not refs:
            break
        while current > budget and refs:
            key = max(refs, key=lambda k: len(refs[k].content))
            largest = refs.pop(key)
            keep = max(MIN_CUT_CHARS, len(largest.content) // 2)
            shorter = keep_start(without_marker(largest.content, CUT_MARKER), keep, CUT_MARKER)
            replace_result(messages, largest, shorter)
            cut_ids.append(largest.tool_use_id)
            current -= int((_json_tokens(largest.content) - _json_tokens(shorter)) * scale)
            if len(shorter) > MIN_CUT_CHARS * 2:
                refs[key] = replace(largest, content=shorter)
        current = estimate()
    return cut_ids


def _json_tokens(text: str) -> int:
    return tk.estimate_tokens(json.dumps(text, ensure_ascii=False))


def trim_history(messages: list[dict[str, Any]], question_index: int, fits: Callable[[], bool]) -> tuple[int, int]:
    """Room in the earlier turns, oldest first, until ``fits()``: each cut to HISTORY_TURN_SHORT_CHARS, then whole
    turns dropped. Returns (messages shortened, messages dropped)."""
    shortened, limit = 0, HISTORY_TURN_SHORT_CHARS
    for index in range(question_index):
        if fits():
            return shortened, 0
        message = messages[index]
        if any(b.get("type") == "text" and len(without_marker(b["text"], CUT_MARKER)) > limit
               for b in message["content"]):
            messages[index] = {**message, "content": [
                {**b, "text": keep_start(without_marker(b["text"], CUT_MARKER), limit, CUT_MARKER)}
                if b.get("type") == "text" else b for b in message["content"]]}
            shortened += 1
    dropped = 0
    while not fits() and question_index - dropped >= 2:
        del messages[0:2]
        dropped += 2
    return shortened, dropped
