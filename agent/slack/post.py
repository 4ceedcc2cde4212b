"""Every write ``helpbot answer`` makes to Slack, and what it leaves in the question's thread.

- :class:`SlackOut` is the one door: each payload's text passes :func:`agent.slack.blocks.guard_public`
  (:func:`guard_payload`) and each write is traced. Reactions are a courtesy: their failures are logged, never
  raised. A dry run has no SlackOut at all.
- :class:`ThreadReply` is helpbot's side of one thread: 👀 and the placeholder 「調べています…」 (reusing one an
  earlier run left), progress in it (:class:`ProgressThrottle`), then the answer in its place and ✅ -- or a
  failure notice and ❌. It remembers whether the answer is (partly) in the thread: from then on a notice is a
  new reply, so it never overwrites the answer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agent.errors import RunFailed
from agent.slack import markers
from agent.slack.blocks import (
    POST_OPTIONS,
    answer_payloads,
    failure_payload,
    guard_public,
    placeholder_payload,
    progress_payload,
    question_payload,
)
from agent.slack.trigger import DONE_REACTION, FAILED_REACTION, WORKING_REACTION

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from agent.core.run import Answer, Progress
    from agent.report import Trace


def log(message: str) -> None:
    print(f"helpbot answer: {message}", file=sys.stderr, flush=True)


def one_line(text: str) -> str:
    return " ".join(text.split())


def slack_error_code(exc: BaseException) -> str:
    data = getattr(getattr(exc, "response", None), "data", None)
    return str(data.get("error") or "unknown error") if isinstance(data, dict) else "unknown error"


def error_line(exc: Exception) -> str:
    """An error in one line for people. A Slack error's text is several lines with the API URL: its code is enough."""
    from slack_sdk.errors import SlackApiError

    if isinstance(exc, SlackApiError):
        return f"Slack API エラー（{slack_error_code(exc)}）"
    return one_line(f"{type(exc).__name__}: {exc}")


def guard_payload(value: Any, mask_personal: bool) -> Any:
    """Every ``text`` string in a payload (fallback, markdown, section and context blocks) through guard_public."""
    if isinstance(value, dict):
        return {k: (guard_public(v, mask_personal) if k == "text" and isinstance(v, str)
                    else v if k == "metadata" else guard_payload(v, mask_personal)) for k, v in value.items()}
    if isinstance(value, list):
        return [guard_payload(v, mask_personal) for v in value]
    return value


class SlackOut:
    """All of helpbot's writes to Slack go through here: guarded and traced."""

    def __init__(self, web: WebClient, *, mask_personal: bool, trace: Trace):
        self.web = web
        self.mask_personal = mask_personal
        self.trace = trace

    def post(self, channel: str, payload: Mapping[str, Any], thread_ts: str | None = None) -> str:
        body = guard_payload(dict(payload), self.mask_personal)
        body.update(POST_OPTIONS)
        response = self.web.chat_postMessage(channel=channel, thread_ts=thread_ts, **body)
        ts = str(response["ts"])
        self.trace.front("post", channel=channel, thread_ts=thread_ts, ts=ts, chars=len(json.dumps(body)))
        return ts

    def update(self, channel: str, ts: str, payload: Mapping[str, Any]) -> None:
        body = guard_payload(dict(payload), self.mask_personal)
        self.web.chat_update(channel=channel, ts=ts, **body)
        self.trace.front("update", channel=channel, ts=ts, chars=len(json.dumps(body)))

    def react(self, channel: str, ts: str, name: str, *, remove: bool = False) -> None:
        """Reactions are a courtesy: no failure of theirs (scope missing, already there, Slack down, a bug in the
        client) ever fails the run or hides the real outcome."""
        try:
            if remove:
                self.web.reactions_remove(channel=channel, timestamp=ts, name=name)
            else:
                self.web.reactions_add(channel=channel, timestamp=ts, name=name)
        except Exception as exc:
            code = slack_error_code(exc) if hasattr(exc, "response") else one_line(f"{type(exc).__name__}: {exc}")
            if code not in ("already_reacted", "no_reaction"):
                log(f"could not {'remove' if remove else 'add'} :{name}: ({code})")
        else:
            self.trace.front("reaction", channel=channel, ts=ts, name=name, removed=remove)

    def post_question(self, channel: str, text: str, actor: str | None) -> str:
        """A free question becomes the root of the thread its answer goes to."""
        from slack_sdk.errors import SlackApiError

        try:
            return self.post(channel, question_payload(text, actor))
        except SlackApiError as exc:
            raise RunFailed(f"cannot post the question to {channel}: {slack_error_code(exc)}") from None


class ProgressThrottle:
    """chat.update is rate limited, and nobody reads faster than this: a progress text is shown only when it is
    new and at least ``interval`` seconds after the last one (or after the placeholder)."""

    def __init__(self, clock: Callable[[], float], interval: float):
        self.clock = clock
        self.interval = interval
        self.last_text = ""
        self.last_at = clock()

    def restart(self) -> None:
        self.last_at = self.clock()

    def due(self, text: str) -> bool:
        now = self.clock()
        if text == self.last_text or now - self.last_at < self.interval:
            return False
        self.last_text, self.last_at = text, now
        return True


class ThreadReply:
    """helpbot's messages in the thread of one question (``question_ts``), from 👀 to ✅ or ❌."""

    def __init__(self, out: SlackOut, *, channel: str, root: str, question_ts: str, stale: str | None,
                 throttle: ProgressThrottle, run_link: str | None):
        self.out = out
        self.channel, self.root, self.question_ts = channel, root, question_ts
        self.placeholder = stale  # a placeholder or notice an earlier run left, until start() takes it over
        self.delivered = False  # (part of) the answer is in the thread: a notice must not overwrite it
        self.throttle = throttle
        self.run_link = run_link

    def start(self) -> None:
        """👀 and the placeholder, first, so people see at once that helpbot is on it."""
        self.out.react(self.channel, self.question_ts, WORKING_REACTION)
        if self.placeholder is not None:  # an earlier run left its notice (and ❌): this run takes over
            self.out.react(self.channel, self.question_ts, FAILED_REACTION, remove=True)
        self.placeholder = self._placeholder(self.placeholder)
        self.throttle.restart()

    def progress(self, progress: Progress) -> None:
        if self.placeholder is None:
            return
        tools = progress.tools if progress.phase in ("tools", "degraded") else []
        payload = progress_payload(max(1, progress.round), progress.max_rounds, tools)
        if self.throttle.due(payload["text"]):
            self.out.update(self.channel, self.placeholder, {**payload, "metadata": self._progress_metadata()})

    def deliver(self, answer: Answer) -> str | None:
        """The answer replaces the placeholder; further parts follow in the thread; ✅ replaces 👀. Returns the
        answer's permalink (None when Slack would not give it)."""
        from slack_sdk.errors import SlackApiError

        payloads = answer_payloads(answer.to_json(), channel=self.channel, question_ts=self.question_ts,
                                   run_link=self.run_link, mask_personal=self.out.mask_personal)
        first = None
        if self.placeholder is not None:
            try:
                self.out.update(self.channel, self.placeholder, payloads[0])
                first = self.placeholder
            except SlackApiError as exc:
                log(f"could not replace the placeholder ({slack_error_code(exc)}); posting the answer anew")
        if first is None:
            first = self.out.post(self.channel, payloads[0], thread_ts=self.root)
        self.delivered = True
        for payload in payloads[1:]:
            self.out.post(self.channel, payload, thread_ts=self.root)
        self.out.react(self.channel, self.question_ts, WORKING_REACTION, remove=True)
        self.out.react(self.channel, self.question_ts, DONE_REACTION)
        try:
            return str(self.out.web.chat_getPermalink(channel=self.channel, message_ts=first)["permalink"])
        except (SlackApiError, OSError, KeyError):
            return None

    def fail(self, what: str) -> None:
        """Never silence: the notice replaces the placeholder -- or, once (part of) the answer is in the thread, is
        a reply of its own -- and ❌ replaces 👀. Nothing here may raise: the outcome is already decided."""
        payload = failure_payload(what, self.run_link, channel=self.channel, question_ts=self.question_ts)
        replaced = False
        if self.placeholder is not None and not self.delivered:
            try:
                self.out.update(self.channel, self.placeholder, payload)
                replaced = True
            except Exception:
                pass  # the placeholder is gone: post the notice instead
        if not replaced:
            try:
                self.out.post(self.channel, payload, thread_ts=self.root)
            except Exception as exc:  # Slack itself is down: the log and the summary are all that is left
                log(f"could not post the failure notice: {error_line(exc)}")
        self.out.react(self.channel, self.question_ts, WORKING_REACTION, remove=True)
        self.out.react(self.channel, self.question_ts, FAILED_REACTION)

    def _progress_metadata(self) -> dict[str, Any]:
        return markers.metadata("progress", channel=self.channel, question_ts=self.question_ts)

    def _placeholder(self, stale: str | None) -> str:
        """The stale placeholder updated (re-runs don't pile up), else a new one."""
        from slack_sdk.errors import SlackApiError

        payload = {**placeholder_payload(), "metadata": self._progress_metadata()}
        if stale:
            try:
                self.out.update(self.channel, stale, payload)
                return stale
            except SlackApiError:
                pass  # deleted meanwhile: post a new one
        return self.out.post(self.channel, payload, thread_ts=self.root)
