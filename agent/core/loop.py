"""The agent loop: tag the question, ask the model, run the tools it asks for, repeat -- and always end with an answer.
Every tool_use gets a tool_result. At the round limit, the soft deadline or the spend cap a final request answers from
what was gathered, asked once more if it still calls tools; without a usable model the run degrades to direct searches
(``agent.core.degraded``). ``economy`` fits each request, ``rounds`` runs each round of tools."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import unquote

from agent.core.degraded import DEGRADED_QUERY_CHARS, Why, best_hits, degraded_text
from agent.core.economy import Economy
from agent.core.model import Model, ModelResponse, Request
from agent.core.prompt import build_system_prompt
from agent.core.rounds import ToolRound
from agent.core.run import Answer, Phase, Plan, Progress, Run, Stop, ToolCall, Turn, model_stop
from agent.core.settings import Settings
from agent.core.tags import TagConfig, Tagging, tag_question, with_faq_tags
from agent.core.tools import ThreadWait, ToolExecutor, ToolOutcome, vet_tool_uses
from agent.core.transcript import CUT_MARKER, earlier_turn, user_message, valid_text, with_context
from agent.errors import ModelRequestError, ModelUnavailable
from mcp_lib.clock import SYSTEM_CLOCK, Clock, now
from mcp_lib.cutting import keep_start
from mcp_lib.redact import redact_deep

Forced = Literal["round_limit", "deadline", "cost_limit"]
_ANSWER_NOW = " Answer now from the information above, without calling tools; say what remains unknown."
FORCED_NOTES: dict[Forced, str] = {
    "round_limit": "[helpbot] The tool rounds are used up." + _ANSWER_NOW,
    "deadline": "[helpbot] The time for this investigation is up." + _ANSWER_NOW,
    "cost_limit": "[helpbot] The spending limit for this question is reached." + _ANSWER_NOW}
NOT_RUN_FINAL = "[helpbot] Not run: no more tool calls. "  # a call in the final request: its is_error result


class Agent:
    def __init__(self, model: Model | None, tools: ToolExecutor, settings: Settings | None = None, *,
                 clock: Clock = SYSTEM_CLOCK, on_progress: Callable[[Progress], None] | None = None,
                 on_event: Callable[[dict[str, Any]], None] | None = None, tool_wait: ThreadWait | None = None,
                 on_text: Callable[[str], None] | None = None, tags: TagConfig | None = None):
        self.model, self.tools, self.settings, self.clock = model, tools, settings or Settings(), clock
        self.on_progress, self.on_event = on_progress, on_event
        self.on_text = on_text  # each response's text as it streams (the Slack front shows the final answer's)
        self.tags = tags  # helpbot.toml's [[tags]]: each question is tagged before its run (agent.core.tags)
        self.tool_round = ToolRound(self.settings, clock, self._event, tool_wait)

    def run(self, question: str, history: Sequence[Turn] = (), context: str = "", *,
            tools: ToolExecutor | None = None, attachments: Sequence[dict[str, Any]] = ()) -> Answer:
        """Answer ``question``, building on ``history``; ``context`` is shown to the model only. ``tools`` replace
        the agent's; ``attachments`` (image and document blocks) go before the question text, as Anthropic advises."""
        r = self._start(question, history, context, tools or self.tools, attachments)
        if self.model is None:
            return self._degraded(r, "no model credentials are configured", "no_model")
        try:
            return self._investigate(r)
        except (ModelUnavailable, ModelRequestError) as exc:
            rejected = isinstance(exc, ModelRequestError)
            if rejected and not r.rounds:  # a rejected first request is a failure (usually configuration)
                raise
            self._event(r, "model_rejected" if rejected else "model_unavailable", error=str(exc))
            return self._degraded(r, str(exc))

    def _investigate(self, r: Run) -> Answer:
        while True:
            forced = must_answer(self.settings, self.clock.monotonic(), r)
            if forced:
                return self._final_answer(r, forced)
            self._progress(r, "thinking")
            try:
                response = self._request(r, final=False)
            except ModelUnavailable as exc:
                if not exc.out_of_time:
                    raise
                return self._final_answer(r, "deadline")  # its retries ran into the time kept for the answer
            calls, refused = self._calls(r, response)
            if not calls:
                return self._finish(r, response.text, model_stop(response.stop_reason))
            r.rounds += 1
            self._progress(r, "tools", [c["name"] for c in calls])
            r.messages.append({"role": "user", "content": self.tool_round.run(r, calls, refused)})

    def _start(self, question: str, history: Sequence[Turn], context: str, tools: ToolExecutor,
               attachments: Sequence[dict[str, Any]]) -> Run:
        s, mask = self.settings, tools.mask  # the question, its thread or an attached log is anyone's text
        started, tagging = self.clock.monotonic(), Tagging([], {}, "none")  # the tagging's time counts in the run
        question, context = mask(valid_text(question)), mask(valid_text(context))
        history = [Turn(mask(valid_text(t.question)), mask(valid_text(t.answer)), valid_text(t.sources))
                   for t in history]
        if self.tags is not None:  # a follow-up inherits its thread's topic: the earlier questions and the context
            text = "\n".join(part for part in (*(turn.question for turn in history), question, context) if part)
            tagging = tag_question(self.tags, text, model=self.model, settings=s, clock=self.clock)  # masked, too
        attachments = [{**b, "text": mask(b["text"])} if isinstance(b.get("text"), str) else b for b in attachments]
        query = question.strip()[:DEGRADED_QUERY_CHARS]
        question = keep_start(question.strip(), s.max_question_chars, CUT_MARKER)
        context = keep_start(context.strip(), s.max_question_chars, CUT_MARKER)
        schemas = tools.schemas()
        system = build_system_prompt(now=(s.now or now(self.clock, s.tz())).astimezone(s.tz()), guide=tools.guide(),
                                     max_rounds=s.max_rounds, extra=[tagging.prompt_part([t["name"] for t in schemas])])
        messages = [m for turn in history for m in earlier_turn(turn.question, turn.answer, turn.sources)]
        opening = user_message(with_context(question, context))
        messages.append({**opening, "content": [*attachments, *opening["content"]]})
        plan = Plan(question=question, query=query, started=started,
                    soft_deadline=started + s.deadline_s - s.final_reserve_s, hard_deadline=started + s.deadline_s,
                    system=system, tools=tools, schemas=schemas, tags=tuple(tagging.names),
                    faq_tags=tuple(tagging.faq_tags))
        economy = Economy(self.model, s, self.clock, len(messages) - 1, system=system, schemas=schemas,
                          question=question, event=self._event, progress=self._progress)
        r = Run(plan, messages=messages, economy=economy,
                trace=[self._publish({"t": 0.0, **tagging.event()})] if self.tags is not None else [])
        if tagging.consulted:  # the tagging request counts in the run's usage and cost
            r.tally(tagging.model, tagging.usage)
        r.add_sources("history", [src for turn in history for src in turn.sources])
        self._event(r, "run_start", question=question[:500], model=s.model if self.model else None,
                    max_rounds=s.max_rounds, deadline_s=s.deadline_s, tools=[t["name"] for t in schemas],
                    history_turns=len(history), context_chars=len(context), attachments=len(attachments))
        return r

    def _final_answer(self, r: Run, reason: Forced) -> Answer:
        """One more request, the note saying so, with the tools and ``tool_choice: auto`` (another tool_choice
        misses every cached message). Calls it still makes are refused and it is asked again the same way; a
        model that calls tools yet again ignores the limit (broken or prompt-injected): no third request, the
        answer is the sources gathered, labelled -- never the text beside its calls (a preamble)."""
        self._event(r, "forced_final", reason=reason, rounds=r.rounds)
        self._progress(r, "answering")
        last = r.messages[-1]  # the question or the last round's results: the note joins that user message
        r.messages[-1] = {**last, "content": [*last["content"], {"type": "text", "text": FORCED_NOTES[reason]}]}
        response = self._request(r, final=True)
        if response.tool_uses:  # each answered with the note again as an ``is_error`` result; none runs
            calls, _ = self._calls(r, response)
            self._event(r, "forced_final_refused", tool_uses=[c["name"] for c in calls])
            why = NOT_RUN_FINAL + FORCED_NOTES[reason].removeprefix("[helpbot] ")
            r.messages.append({"role": "user", "content": self.tool_round.run(r, calls, {c["id"]: why for c in calls})})
            response = self._request(r, final=True)
        if response.tool_uses:  # not added to the transcript: no call is left open
            self._event(r, "forced_final_ignored", tool_uses=[c["name"] for c in response.tool_uses])
            return self._degraded(r, "the model asked for tools again after the limit", "no_answer", reason)
        r.messages.append({"role": "assistant", "content": response.content})
        return self._finish(r, response.text, reason)

    def _calls(self, r: Run, response: ModelResponse) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The response joins the transcript with its calls vetted: (the calls, why those that must not run)."""
        content, refused = vet_tool_uses(response.content, {t["name"] for t in r.plan.schemas}, r.tool_use_ids)
        r.messages.append({"role": "assistant", "content": content})
        return [block for block in content if block.get("type") == "tool_use"], refused

    def _request(self, r: Run, *, final: bool) -> ModelResponse:
        """The transcript, made to fit, sent by the soft deadline, a final answer by the hard one -- with
        ``tool_choice: none`` when it answers the question alone (no cached message it would miss)."""
        assert self.model is not None
        deadline = r.plan.hard_deadline if final else r.plan.soft_deadline
        estimate, system, tools, messages = r.economy.prepare(r, deadline, final=final)
        self._event(r, "model_request", round=r.rounds + 1, forced=final, estimated_tokens=estimate,
                    messages=len(messages))
        began = self.clock.monotonic()
        choice = {"type": "none" if final and len(r.messages) == 1 else "auto"} if tools else None
        response = self.model.create(Request(system, messages, tools, choice, self.settings.max_tokens,
                                             self.settings.model, deadline, self.clock, on_text=self.on_text))
        response = replace(response, content=valid_text(response.content))  # untrusted text, made valid UTF-8
        r.tally(self.settings.model, response.usage)
        r.economy.calibrate(r, response.usage)
        for line in response.retries:
            self._event(r, "model_retry", detail=line)
        self._event(r, "model_response", round=r.rounds + 1, stop_reason=response.stop_reason,
                    usage=response.usage.to_dict(), tool_uses=[c["name"] for c in response.tool_uses],
                    text_chars=len(response.text), seconds=round(self.clock.monotonic() - began, 3))
        return response

    def _finish(self, r: Run, text: str, stop: Stop) -> Answer:
        if not text:
            return self._degraded(r, f"the model gave an empty answer (stop: {stop})", "no_answer", stop)
        plain = unquote(text)  # once: unquoting it again for each of thousands of sources took seconds
        cited = [src for url, src in r.sources.items() if _cites(plain, url)]
        self._event(r, "answer", chars=len(text), stop=stop, cited=len(cited), consulted=len(r.sources))
        return self._answer(r, text, cited, stop)

    def _degraded(self, r: Run, error: str, why: Why = "unavailable", stop: Stop = "degraded") -> Answer:
        """Not the model's answer: sources, clearly labelled. Without a usable model the search tools run on the
        question first; when the model gave no answer nothing more is asked or searched."""
        searches = [] if why == "no_answer" else with_faq_tags(r.plan.tools.search_calls(r.plan.query),
                                                              r.plan.schemas, r.plan.faq_tags)
        outcomes: list[ToolOutcome] = []
        if why != "no_answer":  # all at once, with the time left (at least 10 s)
            self._progress(r, "degraded", [name for name, _ in searches])
            timeout = min(self.settings.tool_timeout_s, max(10.0, r.plan.hard_deadline - self.clock.monotonic()))
            calls = [{"id": f"degraded-{i}", "name": name, "input": args} for i, (name, args) in enumerate(searches)]
            outcomes = [outcome for outcome, _ in self.tool_round.run_batch(r, calls, timeout)]
            r.calls += [ToolCall(n, args, o.is_error, 0) for (n, args), o in zip(searches, outcomes, strict=True)]
        ranked, picked = best_hits(outcomes, list(r.sources.values()))
        r.add_sources("degraded", ranked)
        self._event(r, "degraded", reason=error, searches=[n for n, _ in searches], sources=len(picked))
        return self._answer(r, degraded_text(r.plan.question, why, picked), picked, stop, error)

    def _answer(self, r: Run, text: str, cited: list[dict[str, str]], stop: Stop, error: str | None = None) -> Answer:
        """The run's answer; one with an ``error`` (why) is not the model's: degraded."""
        return Answer(text=text, sources=cited, consulted=list(r.sources.values()), rounds=r.rounds,
                      tool_calls=r.calls, usage_by_model=dict(r.usage), cost_usd=self.settings.cost(r.usage),
                      degraded=error is not None, seconds=self.clock.monotonic() - r.plan.started, stop=stop,
                      tags=list(r.plan.tags), error=error, trace=r.trace, messages=r.messages)

    def _progress(self, r: Run, phase: Phase, tools: list[str] | None = None) -> None:
        if self.on_progress is None:
            return
        upcoming = phase in ("thinking", "summarizing")  # before a request: the round about to happen
        progress = Progress(r.rounds + 1 if upcoming else r.rounds, self.settings.max_rounds, phase, tools or [])
        try:
            self.on_progress(progress)
        except Exception as exc:  # a failing Slack update must not end the run
            self._event(r, "callback_error", callback="on_progress", error=f"{type(exc).__name__}: {exc}")

    def _event(self, r: Run, kind: str, **data: Any) -> None:
        r.trace.append(self._publish({"t": round(self.clock.monotonic() - r.plan.started, 3), "event": kind, **data}))

    def _publish(self, event: dict[str, Any]) -> dict[str, Any]:
        """Mask secrets and hand the event to ``on_event``; returns the masked event for the trace."""
        masked = redact_deep(event)
        if self.on_event is not None:
            with contextlib.suppress(Exception):  # the trace is best effort; the answer is not
                self.on_event(masked)
        return masked


def must_answer(s: Settings, now: float, r: Run) -> Forced | None:
    """Why the next request must be the final answer, if it must: the rounds, the time or the money are spent."""
    if r.rounds >= s.max_rounds:
        return "round_limit"
    if now >= r.plan.soft_deadline:
        return "deadline"
    if s.max_cost_usd is not None and s.cost(r.usage) >= s.max_cost_usd:
        return "cost_limit"
    return None


def _cites(plain: str, url: str) -> bool:
    """The answer (``plain``: unquoted) contains this URL as a whole (…/issues/1 is not cited by …/issues/10, but
    is by …/issues/1を); most sources are not cited: no pattern is compiled for them."""
    literal, text = unquote(url).rstrip("/"), plain
    return literal in text and re.search(re.escape(literal) + r"/?(?![A-Za-z0-9_\-/?#=&%~+])", text) is not None
