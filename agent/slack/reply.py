"""helpbot's side of one question's thread, a small state machine that always ends in a final state.

    none --start--> working (placeholder 「調べています…」 + 👀) --deliver--> done (the answer + ✅)
                                                                 --fail-----> failed (a notice + ❌)
                    --start, another run is older--> yielded (our placeholder removed, nothing else touched)

The final state is reached even when writes keep failing; progress updates never wait on Slack. The thread is the
lock between racing runs (:func:`agent.slack.markers.claim`), and every message names its ``run``, so a write whose
answer was lost is adopted, never made twice. A streamed answer is a reply beside the placeholder, the lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from agent.errors import Terminated, describe_error
from agent.slack import markers
from agent.slack.blocks import answer_payloads, failure_payload, placeholder_payload, progress_payload
from agent.slack.post import SlackOut, log, retry_after
from agent.slack.stream import AnswerStream
from agent.slack.trigger import DONE_REACTION, FAILED_REACTION, WORKING_REACTION
from mcp_lib.clock import Clock

if TYPE_CHECKING:
    from agent.core.run import Answer, Progress


class ProgressThrottle:
    """A progress text is shown when new, ``interval`` s after the last, and not while Slack asked to wait."""

    def __init__(self, clock: Clock, interval: float):
        self.clock, self.interval = clock, interval
        self.last_text = ""
        self.last_at = clock.monotonic()
        self.paused_until = float("-inf")

    def restart(self) -> None:
        self.last_at = self.clock.monotonic()

    def pause(self, seconds: float) -> None:
        self.paused_until = self.clock.monotonic() + seconds

    def due(self, text: str) -> bool:
        now = self.clock.monotonic()
        if text == self.last_text or now - self.last_at < self.interval or now < self.paused_until:
            return False
        self.last_text, self.last_at = text, now
        return True


class ThreadReply:
    """helpbot's messages in the thread of one question (``question_ts``), from 👀 to ✅ or ❌. ``reread`` reads the
    thread again for the claim (None: no race, helpbot posted the root); ``force``: an earlier answer does not win."""

    def __init__(self, out: SlackOut, *, channel: str, root: str, question_ts: str, throttle: ProgressThrottle,
                 run_link: str | None, me: markers.Me, run: str,
                 reread: Callable[[], Sequence[Mapping[str, Any]]] | None = None, force: bool = False,
                 stream: AnswerStream | None = None, buttons: bool = False):
        self.out = out
        self.channel, self.root, self.question_ts = channel, root, question_ts
        self.throttle, self.run_link = throttle, run_link
        self.me, self.run, self.reread, self.force = me, run, reread, force
        self.state: Literal["none", "working", "done", "failed", "yielded"] = "none"
        self.placeholder: str | None = None  # our placeholder while it is one
        self.delivered = False  # (part of) the answer is in the thread: a notice must not overwrite it
        self.parts, self.complete = 0, False  # the answer's messages (0: not being delivered); all are in the thread
        self.eyes = False  # our 👀 is (probably) on the question
        self.unclaimed = False  # the claim is still to be made (with the placeholder, else the answer or notice)
        self.yielded_because = ""
        self.stream = stream  # the streamed reply while there is one (None: the run does not stream)
        self.buttons = buttons  # 👍/👎 buttons under the answer (HELPBOT_FEEDBACK_BUTTONS)

    def start(self) -> bool:
        """The placeholder, the claim, then 👀. False: another run answers this question (ours is removed). A
        placeholder that cannot be posted defers the claim to the answer or notice (:meth:`_claimed`)."""
        try:
            self.placeholder = self.out.post(self.channel, {**placeholder_payload(), "metadata": self._marker()},
                                             thread_ts=self.root, adopt=lambda: self._own("progress"))
        except Exception as exc:  # the answer will be posted anew at the end
            log(f"could not post the placeholder ({describe_error(exc)})")
        if self.reread is not None:
            self.unclaimed = True
            if self.placeholder is not None and not self._claimed(self.placeholder):
                return False
        self.eyes = True  # before the call: a cancel while Slack adds it must still take it off
        self.eyes = self.out.react(self.channel, self.question_ts, WORKING_REACTION)
        self.state = "working"
        self.throttle.restart()
        if self.stream is not None and (self.placeholder is None or not self.stream.start()):
            self.stream = None  # no lock to stream beside, or Slack refused: the placeholder shows the progress
        return True

    def progress(self, progress: Progress) -> None:
        """Best effort: one try, no waiting; a rate limit pauses further updates for as long as Slack asked."""
        if self.state != "working" or self.placeholder is None:
            return
        if self.stream is not None:  # it shows the tasks; a new request's text may be the answer
            return self.stream.response_started() if progress.phase in ("thinking", "answering") else None
        tools = progress.tools if progress.phase in ("tools", "degraded") else []
        payload = progress_payload(max(1, progress.round), progress.max_rounds, tools)
        if not self.throttle.due(payload["text"]):
            return
        try:
            self.out.update(self.channel, self.placeholder, {**payload, "metadata": self._marker()}, patient=False)
        except Exception as exc:
            if (wait := retry_after(exc, self.out.budget)) is not None:
                self.throttle.pause(wait)

    def deliver(self, answer: Answer) -> str | None:
        """The answer replaces the placeholder (or is posted anew), further parts follow, ✅ replaces 👀. Its
        permalink; None also when another run turned out to answer (ours removed, ``yielded``)."""
        payloads = answer_payloads(answer, channel=self.channel, question_ts=self.question_ts,
                                   run_link=self.run_link, buttons=self.buttons)
        self.parts = len(payloads)
        head = markers.stamped(payloads[0], self.run)
        stream, self.stream = self.stream, None  # the streamed reply, when there is one, becomes the first message
        streamed = stream.deliver(head) if stream is not None else None
        first = self._settle(streamed) if streamed is not None else self._final(head, "answer")
        if not self._claimed(first):
            return None
        self.delivered = True
        for payload in payloads[1:]:
            self.out.post(self.channel, payload, thread_ts=self.root, adopt=partial(self._own_part, payload))
        self.complete = True
        self._end("done")
        return self.out.permalink(self.channel, first)

    def fail(self, what: str, *, cancelled: bool = False) -> None:
        """Never silence: the notice replaces the placeholder -- or, once (part of) the answer is in the thread, is
        a reply of its own -- and ❌ replaces 👀 (✅ if a cancel cut off an answer that is there). Never raises."""
        if self.stream is not None:
            self.stream.discard()
        # a SIGTERM that cut the delivery off after the whole answer was in: the run ends with ✅ after all
        if cancelled and not self.complete and not self.delivered and self.parts and (found := self._own("answer")):
            self.delivered, self.complete = True, self.parts == 1
            if not self._claimed(self._settle(found)):
                return
        if self.complete:
            self._end("done")
            return
        payload = markers.stamped(failure_payload(what, self.run_link, channel=self.channel,
                                                  question_ts=self.question_ts), self.run)
        if self.placeholder is None and not self.delivered:  # a placeholder whose post's answer was lost is ours
            placeholders = self._all_own("progress")
            for ts in placeholders[1:]:
                self.out.delete(self.channel, ts)
            self.placeholder = placeholders[0] if placeholders else None
        try:
            try:
                notice = self._final(payload, "failure")
            except (Terminated, KeyboardInterrupt):  # a cancel while the notice was written: it may be there
                notice = self._settle(found) if (found := self._own("failure")) else self._final(payload, "failure")
        except Exception as exc:  # Slack itself is down: the log and the summary are all that is left
            log(f"could not post the failure notice: {describe_error(exc)}")
            self._drop_placeholder()
        else:
            if not self._claimed(notice):
                return
        self._end("failed")

    def close(self) -> None:
        """On the way out, whatever happened: no 👀 and no placeholder are left behind."""
        if self.stream is not None:
            self.stream.discard()
        if self.state == "working":  # neither delivered nor failed (a bug, or an exit on the way)
            self._drop_placeholder()
        self._eyes_off()

    def _end(self, state: Literal["done", "failed"]) -> None:  # ✅ or ❌ replaces 👀
        self._eyes_off()
        reaction = DONE_REACTION if state == "done" else FAILED_REACTION
        self.out.react(self.channel, self.question_ts, reaction, final=True)
        self.state = state

    def _settle(self, ts: str) -> str:  # ts is this run's answer or notice: the placeholder, unless it is ts, goes
        if ts == self.placeholder:
            self.placeholder = None
        self._drop_placeholder()
        return ts

    def _claimed(self, mine: str) -> bool:
        """The claim, once per run, with ``mine`` (our placeholder, else the answer or notice): True when this run
        answers; the loser removes ``mine`` and its 👀, the winner cleans up. An unreadable thread fails the start
        (no model is paid for a duplicate) and counts as won once the answer or notice is posted."""
        if not self.unclaimed or self.reread is None:
            return True
        self.unclaimed = False
        try:
            messages = self.reread()
        except Exception as exc:
            if mine == self.placeholder:
                raise
            log(f"could not read the thread back for the claim ({describe_error(exc)})")
            return True
        verdict = markers.claim(messages, self.question_ts, mine, self.me, run=self.run, count_answers=not self.force)
        if not verdict.won:
            self.out.delete(self.channel, mine, final=True)
            if mine == self.placeholder:
                self.placeholder = None
            self.state, self.yielded_because = "yielded", verdict.reason
            self._eyes_off()
            return False
        for ts in verdict.earlier:  # a dead run's placeholder, earlier notices: re-runs don't pile up
            self.out.delete(self.channel, ts)
        if verdict.earlier:
            self.out.react(self.channel, self.question_ts, FAILED_REACTION, remove=True)
        return True

    def _final(self, payload: Mapping[str, Any], kind: markers.MarkerKind) -> str:
        """The answer's first message or the notice, once: the placeholder turned into it, else what a lost write of
        ours left after all, else posted anew (the placeholder deleted). Raises when it cannot be posted."""
        if self.placeholder is not None and not self.delivered:
            try:
                self.out.update(self.channel, self.placeholder, payload)
            except Exception as exc:
                log(f"could not replace the placeholder ({describe_error(exc)}); posting anew")
            else:
                replaced, self.placeholder = self.placeholder, None
                return replaced
        found = self._own(kind) if self.placeholder is not None else None  # an update that went through
        return self._settle(found or self.out.post(self.channel, payload, thread_ts=self.root,
                                                   adopt=lambda: self._own(kind)))

    def _drop_placeholder(self) -> None:
        if self.placeholder is not None and self.out.delete(self.channel, self.placeholder, final=True):
            self.placeholder = None

    def _eyes_off(self) -> None:
        if self.eyes and self.out.react(self.channel, self.question_ts, WORKING_REACTION, remove=True, final=True):
            self.eyes = False

    def _marker(self) -> dict[str, Any]:
        return markers.metadata("progress", channel=self.channel, question_ts=self.question_ts, run=self.run)

    def _own(self, kind: markers.MarkerKind) -> str | None:
        """This run's message of ``kind`` for the question, when the thread (read again) has one."""
        return next(iter(self._all_own(kind)), None)

    def _all_own(self, kind: markers.MarkerKind) -> list[str]:
        if self.reread is None:
            return []
        try:
            return markers.of_run(self.reread(), self.question_ts, self.run, kind, me=self.me)
        except Exception as exc:
            log(f"could not read the thread back ({describe_error(exc)})")
            return []

    def _own_part(self, payload: Mapping[str, Any]) -> str | None:
        """A further part of the answer (no marker) that an attempt posted after all: our message with its text."""
        messages = self.reread() if self.reread is not None else []
        return next((str(m.get("ts")) for m in messages if self.me.wrote(m) and m.get("text") == payload.get("text")
                     and markers.read(m) is None), None)
