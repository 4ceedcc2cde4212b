"""The thread a :help: reaction points at, turned into what the agent is asked.

- :func:`earlier_turns`: helpbot's earlier answers in the thread, each with its question, become conversation
  history (``Turn``), so that a follow-up builds on them instead of starting over.
- :func:`build_question`: the reacted message itself is the question (a reply stays the reply). Where it was
  asked, its files and the thread's (:mod:`~agent.slack.attachments`: images and PDFs as blocks for the model,
  text files as text), the messages it links to (read through the Slack platform's tool, so the DM / private-channel
  rules apply) and the thread around it (bounded) are the *context*: the model sees it, degraded mode's searches
  and the job summary do not.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.core.run import Turn
from agent.slack import markers
from agent.slack.attachments import Attachments, read_attachments
from agent.slack.readback import message_markdown, split_sources
from agent.slack.split import cut
from mcp_lib.redact import redact_secrets

if TYPE_CHECKING:
    from agent.slack.handle import Slack, Thread

CONTEXT_BEFORE, CONTEXT_AFTER = 8, 2  # thread messages around the reacted one given as context
CONTEXT_MESSAGE_CHARS, CONTEXT_CHARS = 600, 6000
MAX_LINKS, LINK_CHARS = 3, 1500
MAX_TURNS = 5  # earlier Q&A pairs of the thread passed as history
_UNANSWERABLE = {"tombstone", "channel_join", "channel_leave", "message_deleted", "bot_add", "bot_remove"}
# Candidate message links in raw text (bare, or the url of <url|label>); ASCII only, as Japanese text may follow
# a bare link without a space. Whether one really is a message link is parse_permalink's to say.
_LINK = re.compile(r"https?://[A-Za-z0-9.-]+/archives/[A-Za-z0-9/?#=&%._~-]+")


# -- which messages are what ----------------------------------------------------------------------------------------
def answerable(message: Mapping[str, Any]) -> bool:
    """Something a person wrote, with text or files (not a join, a deletion or a tombstone)."""
    return message.get("subtype") not in _UNANSWERABLE and bool(str(message.get("text") or "").strip()
                                                                  or message.get("files"))


def earlier_turns(thread: Thread, question_ts: str, me: markers.Me, plain: Callable[[Mapping[str, Any]], str]
                  ) -> list[Turn]:
    """helpbot's earlier answers in this thread, each with its question: the conversation so far."""
    by_ts = {str(m.get("ts")): m for m in thread.messages}
    turns: list[Turn] = []
    for marker, _, parts in markers.answers_in_sequence(thread.messages, me):
        asked = marker.question_ts or ""
        if asked == question_ts or asked not in by_ts:
            continue
        answer, sources = split_sources("\n\n".join(message_markdown(part) for part in parts))
        question = plain(by_ts[asked])
        if question.strip() and answer:
            turns.append(Turn(question=question, answer=answer, sources=sources))
    return turns[-MAX_TURNS:]


# -- the question and its context -----------------------------------------------------------------------------------
def slack_links(text: str) -> list[tuple[str, str]]:
    """Slack message links in raw message text, as (url, ts): de-duplicated, at most MAX_LINKS. What counts as a
    message link is the Slack platform's :func:`~mcp_lib.platforms.slack.parse_permalink`."""
    from mcp_lib.core import ToolError
    from mcp_lib.platforms.slack import parse_permalink

    links = []
    for url in dict.fromkeys(_LINK.findall(text)):
        with contextlib.suppress(ToolError):
            links.append((url, parse_permalink(url)[1]))
    return links[:MAX_LINKS]


@dataclass
class QuestionParts:
    text: str  # the reacted message, as plain text
    where: str = ""
    files: list[str] = field(default_factory=list)
    attachments: Attachments = field(default_factory=Attachments)  # the files as read (blocks, context lines)
    links: list[str] = field(default_factory=list)  # "[n] url — content" or "[n] url — (not readable: why)"
    around: list[str] = field(default_factory=list)  # thread messages around it, oldest first

    def question(self) -> str:
        """The reacted message alone: what the model answers, degraded mode searches and the summary shows."""
        return redact_secrets(self.text.strip() or "（本文なし）")

    def context(self) -> str:
        """What helpbot adds around the question (the loop marks it as untrusted context); empty when nothing."""
        lines: list[str] = []
        if self.where:
            lines.append(f"質問の場所: {self.where}")
        if self.attachments.lines:
            lines += self.attachments.context()
        elif self.files:
            lines.append("添付ファイル: " + ", ".join(self.files))
        if self.links:
            lines += ["メッセージ内のリンク先:", *self.links]
        if self.around:
            lines += ["同じスレッドのやり取り（抜粋・古い順。質問は上のメッセージ）:", *self.around]
        return redact_secrets("\n".join(lines))


def build_question(slack: Slack, thread: Thread) -> QuestionParts:
    """The reacted message, its files, the messages it links to (tool rules apply), and the thread around it."""
    from mcp_lib.platforms.slack import message_item

    info = slack.channel(thread.channel)
    target = thread.target
    item = message_item(slack.ctx, info, target)
    is_reply = str(target.get("ts")) != thread.root
    parts = QuestionParts(text=item["text"], files=list(item.get("files") or []),
                          where=f"{item['channel']}{'（スレッドの返信）' if is_reply else ''} / 投稿者 "
                                f"@{item['author']} / {item['time']}")
    for number, (url, ts) in enumerate(slack_links(str(target.get("text") or "")), 1):
        result = slack.registry.call("slack_getThreadMessages", {"url": url})
        if result.is_error:
            parts.links.append(f"[{number}] {url} — （読めません: {cut(result.message or '', 200)}）")
            continue
        linked = [i for i in result.items if i.get("ts") == ts] or result.items[:1]
        for hit in linked:
            parts.links.append(f"[{number}] {url} — {hit.get('channel')} @{hit.get('author')} {hit.get('time')}: "
                               f"{cut(str(hit.get('text') or ''), LINK_CHARS)}")
    parts.around = _around(slack, info, thread)
    parts.attachments = read_attachments(slack, thread)
    return parts


def _around(slack: Slack, info: Mapping[str, Any], thread: Thread) -> list[str]:
    """The thread's first message and the ones just before and after the question, within CONTEXT_CHARS.
    Questions helpbot answered earlier are left out: they are in the history already."""
    from mcp_lib.platforms.slack import message_item

    target = str(thread.target["ts"])
    answered = {str(marker.question_ts) for marker, _, _ in markers.answers_in_sequence(thread.messages, slack.me)}
    others = [m for m in thread.messages
              if str(m.get("ts")) not in answered and str(m.get("ts")) != target
              and not slack.me.wrote(m) and m.get("subtype") not in _UNANSWERABLE]
    before = [m for m in others if float(m["ts"]) < float(target)]
    after = [m for m in others if float(m["ts"]) > float(target)]
    chosen = before[:1] + before[1:][-CONTEXT_BEFORE:] if before else []
    chosen += after[:CONTEXT_AFTER]
    lines: list[str] = []
    used = 0
    for message in chosen:
        item = message_item(slack.ctx, info, message)
        files = f" [添付: {', '.join(item['files'])}]" if item.get("files") else ""
        line = f"- @{item['author']} {item['time']}: {cut(item['text'], CONTEXT_MESSAGE_CHARS)}{files}"
        if used + len(line) > CONTEXT_CHARS:
            lines.append("- …（以降省略）")
            break
        lines.append(line)
        used += len(line)
    return lines
