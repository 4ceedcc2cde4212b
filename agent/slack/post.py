"""Every write ``helpbot answer`` makes to Slack goes through :class:`SlackOut`: guarded, traced, retried.

A patient write (the answer, the notice, reactions, deleting a placeholder) is retried on 429, 5xx and resets
within the run's :class:`WriteBudget`; an impatient one (a progress update) is tried once. A post that may have
gone through is looked for in the thread before it is tried again; reactions never fail a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agent import guard
from agent.errors import RunFailed, describe_error, slack_error_code
from agent.slack.blocks import POST_OPTIONS, question_payload
from mcp_lib import ids, retry
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.errors import GaveUp
from mcp_lib.retry import Budget, Policy, server_wait

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from agent.report import Trace


def log(message: str) -> None:
    guard.err(f"helpbot answer: {message}")


MAX_WAIT_S = 30.0  # a longer Retry-After is not waited for: the write gives up (and the state machine goes on)
MAX_ATTEMPTS = 4  # per write
WRITE_BUDGET_S = 60.0  # all patient writes of one run together may wait this long
FINAL_RESERVE_S = 20.0  # ... of which this much only the final transitions may spend (✅/❌, 👀 off, cleanup)

# Retry-After (+ up to 0.5 s, as slack-sdk's handlers do), else 1, 2, 4 s.
WRITE_POLICY = Policy(attempts=MAX_ATTEMPTS, base_s=1.0, max_backoff_s=8.0, max_server_wait_s=MAX_WAIT_S,
                      server_jitter_s=0.5)
# A final transition keeps trying while its reserve lasts: nothing comes after it that could do it instead.
FINAL_POLICY = replace(WRITE_POLICY, attempts=3 * MAX_ATTEMPTS)


class WriteBudget:
    """The clock of one run's writes: only their waits move it, so a write's Budget is what is left of the run's
    waiting; the last FINAL_RESERVE_S are the final transitions' (a storm cannot leave the thread without ✅)."""

    def __init__(self, clock: Clock):
        self.clock, self.waited = clock, 0.0

    def monotonic(self) -> float:
        return self.waited

    def wall(self) -> float:
        return self.clock.wall()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)
        self.waited += seconds


def retry_after(exc: BaseException, clock: Clock) -> float | None:
    """The wait a 429 asked for (1 s when it is unreadable), None for any other failure; a date on ``clock``."""
    response = getattr(exc, "response", None)
    if getattr(response, "status_code", None) != 429:
        return None
    asked = server_wait(getattr(response, "headers", None) or {}, clock)
    return 1.0 if asked is None else asked


def may_have_succeeded(exc: BaseException) -> bool:
    """A failure after which Slack may have done the work all the same: a 5xx, a reset, a timeout (not a 429, not
    an ``ok: false`` refusal). These and a 429 are worth another try."""
    from slack_sdk.errors import SlackApiError

    return exc.response.status_code >= 500 if isinstance(exc, SlackApiError) else isinstance(exc, OSError)


class SlackOut:
    def __init__(self, web: WebClient, *, trace: Trace, clock: Clock = SYSTEM_CLOCK):
        self.web, self.trace = web, trace
        self.budget = WriteBudget(clock)

    def _call(self, api: str, *, patient: bool = True, final: bool = False,
              adopt: Callable[[], str | None] | None = None, **params: Any) -> Any:
        """One write through the guard's Slack door, retried within the budget (a ``final`` one also its reserve);
        ``adopt``, before a retry: the message a lost attempt posted after all. Raises what Slack gave."""
        uncertain = False  # the last attempt may have done its work (a timeout, a 5xx), not been refused

        def write(_left: float) -> Any:
            if uncertain and adopt is not None and (found := _adopted(adopt)) is not None:
                return {"ts": found}
            return guard.slack(self.web, api, **params)

        budget = Budget(deadline=WRITE_BUDGET_S if final else WRITE_BUDGET_S - FINAL_RESERVE_S, clock=self.budget)
        if not patient or budget.left() <= 0:
            return write(0.0)

        def waited(attempt: int, exc: BaseException, wait: float) -> None:
            nonlocal uncertain
            uncertain = may_have_succeeded(exc)
            self.trace.front("write_retry", method=api, attempt=attempt, wait_s=round(wait, 2))

        try:
            return retry.call(write, policy=FINAL_POLICY if final else WRITE_POLICY, budget=budget, on_retry=waited,
                              retry=lambda exc: retry_after(exc, self.budget) is not None or may_have_succeeded(exc),
                              asked=lambda exc: retry_after(exc, self.budget))
        except GaveUp as gave_up:  # what Slack gave, else (no time left for an attempt) the GaveUp
            raise gave_up.last or gave_up from None

    def post(self, channel: str, payload: Mapping[str, Any], thread_ts: str | None = None, *,
             adopt: Callable[[], str | None] | None = None) -> str:
        """A new message; its ts. ``adopt`` finds it when an attempt that seemed to fail did post it: no double post."""
        body = {**payload, **POST_OPTIONS}
        try:
            answer = self._call("chat.postMessage", channel=channel, thread_ts=thread_ts, adopt=adopt, **body)
            if not ids.is_ts(ts := str(answer.get("ts"))):  # a proxy's: lost, as after a reset (the post may be in)
                raise OSError(f"Slack's answer to chat.postMessage names no message (ts {ts[:40]!r})")
        except Exception as exc:
            found = _adopted(adopt) if adopt is not None and may_have_succeeded(exc) else None
            if found is None:
                raise
            ts = found
        self.trace.front("post", channel=channel, thread_ts=thread_ts, ts=ts, chars=len(json.dumps(body)))
        return ts

    def update(self, channel: str, ts: str, payload: Mapping[str, Any], *, patient: bool = True) -> None:
        self._call("chat.update", patient=patient, channel=channel, ts=ts, **payload)
        self.trace.front("update", channel=channel, ts=ts, chars=len(json.dumps(payload)))

    def stream_start(self, channel: str, thread_ts: str, *, recipient_user_id: str, recipient_team_id: str) -> Any:
        """``chat.startStream``, tried once (a retry after a timeout could start a second stream)."""
        response = self._call("chat.startStream", patient=False, channel=channel, thread_ts=thread_ts,
                              recipient_user_id=recipient_user_id, recipient_team_id=recipient_team_id)
        if not ids.is_ts(ts := str(response.get("ts"))):  # a proxy's: the stream is not ours to append to
            raise OSError(f"Slack's answer to chat.startStream names no message (ts {ts[:40]!r})")
        self.trace.front("stream_start", channel=channel, thread_ts=thread_ts, ts=ts)
        return response

    def stream_append(self, channel: str, ts: str, chunks: list[dict[str, Any]]) -> None:
        """``chat.appendStream``: best effort, like a progress update."""
        self._call("chat.appendStream", patient=False, channel=channel, ts=ts, chunks=chunks)
        self.trace.front("stream_append", channel=channel, ts=ts, chunks=len(chunks), chars=len(json.dumps(chunks)))

    def stream_stop(self, channel: str, ts: str, **params: Any) -> None:  # the answer's own write: patient
        self._call("chat.stopStream", channel=channel, ts=ts, **params)
        self.trace.front("stream_stop", channel=channel, ts=ts, chars=len(json.dumps(params)))

    def delete(self, channel: str, ts: str, *, final: bool = False) -> bool:
        """Remove one of helpbot's messages (a placeholder); False, logged, when Slack would not."""
        try:
            self._call("chat.delete", final=final, channel=channel, ts=ts)
        except Exception as exc:
            if slack_error_code(exc) != "message_not_found":
                log(f"could not delete message {ts} ({_code(exc)})")
                return False
        self.trace.front("delete", channel=channel, ts=ts)
        return True

    def react(self, channel: str, ts: str, name: str, *, remove: bool = False, final: bool = False) -> bool:
        """A courtesy that never fails the run; True when the reaction is (or was) as asked."""
        try:
            self._call("reactions.remove" if remove else "reactions.add", final=final, channel=channel,
                       timestamp=ts, name=name)
        except Exception as exc:
            code = _code(exc)
            if code in ("already_reacted", "no_reaction"):
                return True
            log(f"could not {'remove' if remove else 'add'} :{name}: ({code})")
            return False
        self.trace.front("reaction", channel=channel, ts=ts, reaction=name, removed=remove)
        return True

    def ephemeral(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> bool:
        """A notice only ``user`` sees (``chat.postEphemeral``), tried once; False, logged, when Slack would not."""
        try:
            self._call("chat.postEphemeral", patient=False, channel=channel, user=user, text=text, thread_ts=thread_ts)
        except Exception as exc:
            log(f"could not post the notice ({_code(exc)})")
            return False
        self.trace.front("ephemeral", channel=channel, user=user)
        return True

    def permalink(self, channel: str, ts: str) -> str | None:
        try:
            return str(self._call("chat.getPermalink", patient=False, channel=channel, message_ts=ts)["permalink"])
        except Exception:
            return None

    def post_question(self, channel: str, text: str, actor: str | None) -> str:
        """A free question becomes the root of the thread its answer goes to."""
        try:
            return self.post(channel, question_payload(text, actor))
        except Exception as exc:
            raise RunFailed(f"cannot post the question to {channel}: {_code(exc)}") from None


def _adopted(adopt: Callable[[], str | None]) -> str | None:
    """What ``adopt`` found; None also when the thread cannot be read (then posting again is the lesser harm)."""
    try:
        return adopt()
    except Exception as exc:
        log(f"could not read the thread back before a retry ({_code(exc)})")
        return None


def _code(exc: BaseException) -> str:
    return slack_error_code(exc) if hasattr(exc, "response") else describe_error(exc)
