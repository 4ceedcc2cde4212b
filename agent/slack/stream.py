"""The answer streamed into the thread (``chat.startStream`` / ``appendStream`` / ``stopStream``): each tool call a
task, the answer's text appended in batches, the stop adding the rest, sources, footer and marker. A refused start
leaves the run on the placeholder path (:mod:`agent.slack.reply`). The text is guarded as a whole so far
(:class:`GuardedText`: a secret split across deltas is caught) and again at the door; appends are best effort.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent import guard
from agent.errors import describe_error, slack_error_code
from agent.slack.blocks import task_title
from agent.slack.post import SlackOut, log, retry_after
from mcp_lib.cutting import MARKDOWN_LIMIT, shorten_at_word, slack_len, squash_whitespace

if TYPE_CHECKING:
    from mcp_lib.clock import Clock

HOLD_CHARS = 48  # a cut is made only this far behind the text received: what could still become a secret
APPEND_INTERVAL_S = 1.0
BATCH_CHARS = 600
MAX_TASKS = 30  # a hostile model's hundredth call is not a hundredth card
MAX_TASK_SOURCES = 5
TITLE_CHARS = 120  # Slack cuts task titles near 256 characters
# Where text may be cut: the start of a word, or after Japanese punctuation (Japanese has no spaces)
_BOUNDARY = re.compile(r"(?<=[\s。、！？」』）])(?=\S)")


class GuardedText:
    """The answer's text as the model streams it, released only as it reads in the whole text guarded: a prefix
    cut at a word start (or after 。、！？) ``hold`` characters back, outside ``<…>`` and ``[…]``, while what follows
    does not change how it reads (a card number still arriving). ``broken``: the guarded whole no longer begins
    with what was released (the message is then rewritten)."""

    def __init__(self, *, hold: int = HOLD_CHARS, limit: int = MARKDOWN_LIMIT):
        self.hold, self.limit = hold, limit
        self.raw = self.sent = ""
        self.broken = False
        self.held = 0  # the text's length when no cut was found: tried again a quarter longer (not every delta)

    def feed(self, delta: str) -> None:
        self.raw += delta if self.raw else delta.lstrip()  # the answer is shown stripped

    def take(self) -> str:
        """What may be shown now (maybe nothing; never past one message): two guard passes, so once per batch."""
        cut = self._cut()
        if cut is None or self.broken or slack_len(self.raw) > self.limit:
            return ""
        guarded = guard.markdown(self.raw[:cut])  # none while what follows still changes how it reads: wait for more
        return self._release(guarded) if guard.markdown(self.raw).startswith(guarded) else ""

    def _cut(self) -> int | None:
        """The last word start before ``end`` with no ``<`` or ``[`` open before it: from a start that has one, the
        next tried is the one before where it opened (trying every start, a copy of the text each, was quadratic)."""
        end = len(self.raw) - self.hold
        if end <= len(self.sent) // 2 or len(self.raw) < self.held + max(self.hold, self.held // 4):
            return None  # nothing new worth a guard pass, or a search that found nothing
        self.held = len(self.raw)
        starts = [m.start() for m in _BOUNDARY.finditer(self.raw, 0, end + 1)]
        while starts:
            cut = starts.pop()
            opened = [at for opener, closer in ("<>", "[]")
                      if (at := self.raw.find(opener, self.raw.rfind(closer, 0, cut) + 1, cut)) >= 0]
            if not opened:
                self.held = 0
                return cut
            del starts[bisect.bisect_right(starts, min(opened)):]  # every start after an open "<" or "[" has it
        return None

    def _release(self, guarded: str) -> str:
        if not guarded.startswith(self.sent):
            self.broken = True
            return ""
        if slack_len(guarded) > self.limit:
            return ""
        new, self.sent = guarded[len(self.sent):], guarded
        return new


class AnswerStream:
    """One streamed reply in a thread, best effort until :meth:`stop`; the model's and the tools' threads call it."""

    def __init__(self, out: SlackOut, *, channel: str, thread_ts: str, recipient_user: str, recipient_team: str,
                 clock: Clock):
        self.out, self.channel, self.thread_ts = out, channel, thread_ts
        self.recipient_user, self.recipient_team, self.clock = recipient_user, recipient_team, clock
        self.ts: str | None = None
        self.text = GuardedText()
        self.dirty = False  # text of a response that was not the answer reached Slack: the answer is rewritten
        self.shown = ""  # the current response's text as appended
        self.pending_text = ""
        self.chunks: list[dict[str, Any]] = []
        self.tasks: dict[str, str] = {}  # the call's id -> our task id
        self.last_append = self.paused_until = float("-inf")
        self.stopped = False
        self.lock = threading.RLock()

    def start(self) -> bool:
        """The streamed reply begins; False (logged) when Slack refuses streaming here (the run does not stream)."""
        try:
            response = self.out.stream_start(self.channel, self.thread_ts, recipient_user_id=self.recipient_user,
                                             recipient_team_id=self.recipient_team)
        except Exception as exc:
            log(f"not streaming the answer ({describe_error(exc)}); updating the placeholder instead")
            return False
        self.ts = str(response["ts"])
        self.last_append = self.clock.monotonic()
        return True

    def stop(self, *, markdown_text: str = "", blocks: Sequence[Mapping[str, Any]] = (),
             metadata: Mapping[str, Any] | None = None) -> bool:
        """The reply finalized with the rest of the text, ``blocks`` and the marker; False when Slack would not."""
        with self.lock:
            self.stopped = True
            chunks, self.chunks = self.chunks, []
            given = {"chunks": chunks, "markdown_text": markdown_text, "metadata": dict(metadata or {})}
            params = {"blocks": list(blocks), **{key: value for key, value in given.items() if value}}
            try:
                assert self.ts is not None
                self.out.stream_stop(self.channel, self.ts, **params)
            except Exception as exc:
                log(f"could not stop the answer's stream ({describe_error(exc)})")
                return False
            return True

    def response_started(self) -> None:
        """A new model request: its text may be the answer; the round's results are shown now."""
        with self.lock:
            self.dirty = self.dirty or bool(self.shown)
            self.text, self.shown, self.pending_text = GuardedText(), "", ""
            self._flush(force=True)

    def on_text(self, delta: str) -> None:
        with self.lock:
            if self.stopped or self.dirty or self.ts is None:
                return
            self.text.feed(delta)
            self._flush()

    def on_event(self, event: Mapping[str, Any]) -> None:
        """A trace event: a tool call becomes a task, its result completes it."""
        kind = event.get("event")
        with self.lock:
            if self.stopped or self.ts is None or kind not in ("tool_call", "tool_result"):
                return
            key = str(event.get("id"))
            if kind == "tool_call":
                self.response_started()  # the text before a call was its preamble, not the answer
                if key in self.tasks or len(self.tasks) >= MAX_TASKS:
                    return
                self.tasks[key] = f"task_{len(self.tasks) + 1}"
                name, arguments = event.get("name"), event.get("input")
                title = task_title(str(name), arguments if isinstance(arguments, Mapping) else {})
                self.chunks.append({"type": "task_update", "id": self.tasks[key], "title": _short(title),
                                    "status": "in_progress"})
                self._flush(force=True)  # shown while it runs (nothing else happens until the round's results)
            elif key in self.tasks:
                self.chunks.append(_result_chunk(self.tasks[key], event))
                self._flush()

    def _flush(self, *, force: bool = False) -> None:
        now = self.clock.monotonic()
        if self.ts is None or self.stopped or now < self.paused_until:
            return
        due = now - self.last_append >= APPEND_INTERVAL_S
        waiting = len(self.text.raw) - len(self.text.sent)
        if due or force or not self.shown or waiting >= BATCH_CHARS + HOLD_CHARS:  # the first words at once
            self.pending_text += self.text.take()
        ready = due or force or (bool(self.pending_text) and not self.shown) or len(self.pending_text) >= BATCH_CHARS
        if not (self.chunks or self.pending_text) or not ready:
            return
        chunks = [*self.chunks, *([{"type": "markdown_text", "text": self.pending_text}] if self.pending_text else [])]
        try:
            self.out.stream_append(self.channel, self.ts, chunks)
        except Exception as exc:
            if (wait := retry_after(exc, self.out.budget)) is not None:
                self.paused_until = now + wait
                return
            if slack_error_code(exc) == "message_not_in_streaming_state":  # Slack ended it (after ~5 minutes)
                log("the answer's stream ended before the answer; it is written whole at the end")
                self.paused_until = float("inf")
            if self.pending_text:  # lost for the stream, or shown after all (a 5xx): the stop rewrites it whole
                self.dirty, self.pending_text = True, ""
            return
        self.shown += self.pending_text
        self.chunks, self.pending_text, self.last_append = [], "", now

    def deliver(self, payload: Mapping[str, Any]) -> str | None:
        """The reply stopped as the answer's first message ``payload``, or rewritten whole when what streamed is not
        how it begins (a preamble, a lost append). Its ts; None (the reply removed) when Slack would do neither."""
        if self.ts is None:
            return None
        blocks = list(payload["blocks"])
        first = blocks[0]["text"]  # every part starts with its markdown block
        with self.lock:  # the stop adds the rest, when what streamed is how the answer begins
            if not (self.dirty or self.text.broken) and first.startswith(self.shown):
                if self.stop(markdown_text=first[len(self.shown):], blocks=blocks[1:], metadata=payload["metadata"]):
                    return self.ts
            else:
                self.stop()
        try:
            self.out.update(self.channel, self.ts, payload)
        except Exception as exc:
            log(f"could not turn the streamed reply into the answer ({describe_error(exc)})")
            self.out.delete(self.channel, self.ts, final=True)
            return None
        return self.ts

    def discard(self) -> None:
        """A reply that will not be the answer (a failure, a cancel, an exit on the way): stopped and removed."""
        if self.ts is not None:
            if not self.stopped:
                self.stop()
            self.out.delete(self.channel, self.ts, final=True)
            self.ts = None


def _result_chunk(task_id: str, event: Mapping[str, Any]) -> dict[str, Any]:
    failed = event.get("is_error") is True
    sources = [s for s in event.get("sources") or [] if isinstance(s, Mapping) and s.get("url")]
    elements = [{"type": "url", "url": str(s["url"]), "text": _short(str(s.get("title") or s["url"]))}
                for s in sources[:MAX_TASK_SOURCES]]
    return {"type": "task_update", "id": task_id, "status": "error" if failed else "complete",
            **({"sources": elements} if elements else {}),
            "output": "失敗しました" if failed else (f"{len(sources)} 件見つかりました" if sources else "完了")}


def _short(text: str) -> str:
    return shorten_at_word(squash_whitespace(text), TITLE_CHARS)
