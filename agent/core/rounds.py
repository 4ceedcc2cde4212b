"""One round of tools: run the calls the model asked for -- all at once, or one after another when the round
writes -- reuse identical earlier reads, and answer every tool_use with a tool_result, in the model's order."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agent.core.digest import digest
from agent.core.run import Run, ToolCall
from agent.core.settings import Settings
from agent.core.tools import ThreadWait, ToolOutcome, join_until, run_concurrently
from agent.core.transcript import CUT_MARKER, valid_text
from mcp_lib.clock import Clock
from mcp_lib.cutting import keep_start
from mcp_lib.media import MAX_RUN_IMAGE_BYTES, MAX_RUN_IMAGES

NOT_RUN_LATE = "[helpbot] Not run: the time for tools is up."
NOT_RUN_AFTER_WRITE_TIMEOUT = "[helpbot] Not run: an earlier write in this round timed out (it may still be running)."
Outcomes = dict[str, tuple[ToolOutcome, float]]  # call id -> (outcome, seconds)
Reused = dict[str, tuple[int, str]]  # call id -> (round, id) of the identical earlier call it is answered from


class ToolRound:
    """The loop's tool rounds: what is run, with which timeout, and what each call is answered with."""

    def __init__(self, settings: Settings, clock: Clock, event: Callable[..., None], wait: ThreadWait | None = None):
        self.settings, self.clock = settings, clock
        self.wait = wait or functools.partial(join_until, clock=clock)  # how a batch of tool threads is waited for
        self.event = event  # event(run, kind, **data): the loop's trace

    def run(self, r: Run, calls: list[dict[str, Any]], refused: dict[str, str]) -> list[dict[str, Any]]:
        """A tool_result for every call, in the model's order; a ``refused`` one says why it was not run."""
        fresh, reused, writes = self._schedule(r, [call for call in calls if call["id"] not in refused])
        outcomes = self._execute(r, fresh, writes)
        outcomes.update({i: (ToolOutcome.error(why), 0.0) for i, why in refused.items()})
        return [self._result_block(r, call, reused, outcomes) for call in calls]

    def _schedule(self, r: Run, calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Reused, bool]:
        """(the calls to run, those answered from an identical earlier read, whether the round writes). A write
        (a tool not read-only) makes every earlier read stale: none is reused across it, and its round runs in order."""
        fresh: list[dict[str, Any]] = []
        reused: Reused = {}
        writes = False
        first: dict[str, str] = {}  # call key -> the id of the call that runs it in this round
        for call in calls:
            key = _call_key(call)
            write = not r.plan.tools.is_read_only(call["name"])
            if write:
                writes, first = True, {}
            if key in first:
                earlier: tuple[int, str] | None = (r.rounds, first[key])  # the same call, earlier in this round
            elif writes:
                earlier = None  # after a write, what was read before may be stale
            else:
                earlier = r.seen.get(key)
            if earlier is None or write:
                first[key] = call["id"]
                fresh.append(call)
            else:
                reused[call["id"]] = earlier
                if r.economy.bring_back(earlier[1]):  # the whole copy is back: later repeats point to this call,
                    first[key] = call["id"]  # and it is never cleared again (no digest): back once per result
                    r.seen[key] = (r.rounds, call["id"])
                    r.add_sources(call["id"], r.sources_by_id.get(earlier[1], []))
            self.event(r, "tool_call", round=r.rounds, id=call["id"], name=call["name"], input=call.get("input"),
                       reused=call["id"] in reused)
        return fresh, reused, writes

    def _execute(self, r: Run, fresh: list[dict[str, Any]], writes: bool) -> Outcomes:
        """The fresh calls all at once, or one by one when the round writes, each batch with the time left; once
        the time is up, or after a write that timed out (it may still be running), nothing more starts."""
        batches = [[call] for call in fresh] if writes else [fresh]
        done: list[tuple[ToolOutcome, float]] = []
        stopped: str | None = None
        for batch in batches:
            timeout = min(self.settings.tool_timeout_s, r.plan.soft_deadline - self.clock.monotonic())
            if stopped is None and timeout <= 0:
                stopped = NOT_RUN_LATE
            if stopped:
                done += [(ToolOutcome.error(stopped), 0.0) for _ in batch]
                continue
            ran = self.run_batch(r, batch, timeout)
            done += ran
            if any(outcome.timed_out and not r.plan.tools.is_read_only(call["name"])
                   for call, (outcome, _) in zip(batch, ran, strict=True)):
                stopped = NOT_RUN_AFTER_WRITE_TIMEOUT
        return dict(zip([c["id"] for c in fresh], done, strict=True))

    def run_batch(self, r: Run, batch: list[dict[str, Any]], timeout: float) -> list[tuple[ToolOutcome, float]]:
        """The calls at once, each (outcome, seconds); one still running after ``timeout`` has timed out."""
        jobs = [functools.partial(self._call_tool, r, call) for call in batch]
        return run_concurrently(jobs, timeout, wait=self.wait, on_timeout=lambda i: (ToolOutcome(
            f"{batch[i]['name']} timed out after {timeout:.1f} s", is_error=True, timed_out=True), timeout))

    def _call_tool(self, r: Run, call: dict[str, Any]) -> tuple[ToolOutcome, float]:
        began = self.clock.monotonic()
        try:
            outcome = r.plan.tools.call(call["name"], dict(call.get("input") or {}))
        except Exception as exc:  # a provider that raises is still only a failed call
            outcome = ToolOutcome.error(f"{type(exc).__name__}: {exc}")
        outcome = replace(outcome, content=valid_text(outcome.content), sources=valid_text(outcome.sources))
        return outcome, self.clock.monotonic() - began

    def _result_block(self, r: Run, call: dict[str, Any], reused: Reused, outcomes: Outcomes) -> dict[str, Any]:
        """The call's tool_result: its own outcome, or a note pointing to the identical call it reuses."""
        if call["id"] in outcomes:
            outcome, seconds = outcomes[call["id"]]
            images, content = _admit_images(r, outcome.images, self._record_outcome(r, call, outcome))
            is_error = outcome.is_error
        else:
            images, seconds = [], 0.0
            content, is_error = self._reuse_note(r, reused[call["id"]], outcomes)
        again = call["id"] not in outcomes
        r.calls.append(ToolCall(call["name"], call.get("input") or {}, is_error, r.rounds, again))
        self.event(r, "tool_result", round=r.rounds, id=call["id"], name=call["name"], is_error=is_error,
                   reused=again, chars=len(content), seconds=round(seconds, 3), preview=content[:300],
                   sources=[{"title": s.get("title", ""), "url": s["url"]}  # the task view's (agent.slack.stream)
                            for s in r.sources_by_id.get(call["id"], [])[:5] if s.get("url")])
        shown = [{"type": "text", "text": content}, *images] if images else content
        return {"type": "tool_result", "tool_use_id": call["id"], "content": shown,
                **({"is_error": True} if is_error else {})}

    def _record_outcome(self, r: Run, call: dict[str, Any], outcome: ToolOutcome) -> str:
        """Keep the outcome's sources and what later calls may reuse; returns the content the model reads."""
        r.add_sources(call["id"], outcome.sources)
        kept: str | None = None  # what clearing leaves of it
        if not r.plan.tools.is_read_only(call["name"]):
            if not outcome.is_error or outcome.timed_out:  # it wrote, or may still be writing
                r.seen.clear()  # what was read before may have changed
        elif not outcome.is_error:  # only successful reads are reused; a failed call may be tried again
            r.seen[_call_key(call)] = (r.rounds, call["id"])
            kept = digest(call["name"], outcome.content, outcome.sources)
        content = keep_start(outcome.content or "(empty result)", self.settings.tool_result_max_chars, CUT_MARKER)
        return r.economy.admit(call["id"], content, kept)

    def _reuse_note(self, r: Run, earlier: tuple[int, str], outcomes: Outcomes) -> tuple[str, bool]:
        """What an identical call is answered with instead of running again: where the earlier result is."""
        earlier_round, earlier_id = earlier
        fate = r.economy.fate(earlier_id)
        if fate == "cleared":  # read again: the run's copy, whole (no platform is asked twice)
            return (f"[helpbot] Identical to call {earlier_id} in round {earlier_round}, whose result was shortened "
                    f"there; here it is whole again:\n{r.economy.copies[earlier_id]}"), False
        where = {"summarized": "its result was summarized into the 調査メモ notes",
                 "cut": "its result is above, shortened to fit the request budget",
                 "unchanged": "its result is above, unchanged"}[fate]
        failed = earlier_id in outcomes and outcomes[earlier_id][0].is_error  # the same call, failed this round
        return f"[helpbot] Not run again: identical to call {earlier_id} in round {earlier_round}; {where}.", failed


def _admit_images(r: Run, images: list[dict[str, Any]], content: str) -> tuple[list[dict[str, Any]], str]:
    """The images a result may show within the run's room for tool images (each later request sends them again,
    ``mcp_lib.media``), and the content with a note for the others."""
    shown = []
    for block in images:
        size = len(block["source"]["data"]) * 3 // 4
        if len(r.tool_images) < MAX_RUN_IMAGES and sum(r.tool_images) + size <= MAX_RUN_IMAGE_BYTES:
            r.tool_images.append(size)
            shown.append(block)
    if left := len(images) - len(shown):
        content += (f"\n[helpbot] {left} image(s) of this result not shown: the run's room for tool images "
                    f"({MAX_RUN_IMAGES} images, {MAX_RUN_IMAGE_BYTES / 1e6:.2f} MB) is used up.")
    return shown, content


def _call_key(call: dict[str, Any]) -> str:
    return call["name"] + json.dumps(call.get("input") or {}, sort_keys=True, ensure_ascii=False)
