"""The thread a :help: reaction points at, turned into what the agent is asked: the reacted message as the
question, helpbot's earlier answers as the history, and as context (the model's only, not degraded mode's searches
or the job summary's) where it was asked, its files, the messages it links to and the thread around it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.slack import markers
from agent.slack.readback import read_answer
from mcp_lib.cutting import shorten_at_word
from mcp_lib.redact import redact_secrets

if TYPE_CHECKING:
    from agent.core.run import Turn
    from agent.slack.attachments import Attachments
    from agent.slack.handle import Slack, Thread

CONTEXT_BEFORE, CONTEXT_AFTER = 8, 2  # thread messages around the reacted one given as context
CONTEXT_MESSAGE_CHARS, CONTEXT_CHARS = 600, 6000
MAX_LINKS, LINK_CHARS = 3, 1500
MAX_TURNS = 5  # earlier Q&A pairs of the thread passed as history
_UNANSWERABLE = {"tombstone", "channel_join", "channel_leave", "message_deleted", "bot_add", "bot_remove"}
# Candidate message links in raw text (bare, or <url|label>'s); ASCII only, as Japanese may follow a bare link
_LINK = re.compile(r"https?://[A-Za-z0-9.-]+/archives/[A-Za-z0-9/?#=&%._~-]+")


def answerable(message: Mapping[str, Any], mention: re.Pattern[str] | None = None) -> bool:
    """A person's message with text or files (no join, deletion or tombstone); a ``mention`` of helpbot is no text."""
    text = str(message.get("text") or "")
    text = mention.sub("", text) if mention else text
    return message.get("subtype") not in _UNANSWERABLE and bool(text.strip() or message.get("files"))


def mention_of(me: markers.Me) -> re.Pattern[str] | None:
    """``<@U…>`` (with or without a label) naming helpbot; None when helpbot's user id is not known."""
    ids = [i for i in (me.user_id, me.configured_user_id) if i]
    return re.compile("|".join(rf"<@{re.escape(i)}(?:\|[^>]*)?>" for i in ids)) if ids else None


def mentions_me(message: Mapping[str, Any], me: markers.Me) -> bool:
    """The message @mentions helpbot (always true when helpbot's user id is not known: nothing to check)."""
    pattern = mention_of(me)
    return pattern is None or bool(pattern.search(str(message.get("text") or "")))


def earlier_turns(thread: Thread, question_ts: str, me: markers.Me, plain: Callable[[Mapping[str, Any]], str]
                  ) -> list[Turn]:
    """helpbot's earlier answers in this thread, each with its question: the conversation so far."""
    from agent.core.run import Turn

    by_ts = {str(m.get("ts")): m for m in thread.messages}
    turns: list[Turn] = []
    for marker, _, parts in markers.answers_in_sequence(thread.messages, me):
        asked = marker.question_ts or ""
        if asked == question_ts or asked not in by_ts:
            continue
        answer = read_answer(parts)
        question = plain(by_ts[asked])
        if question.strip() and answer.text:
            turns.append(Turn(question=question, answer=answer.text, sources=answer.sources))
    return turns[-MAX_TURNS:]


def slack_links(text: str) -> list[tuple[str, str]]:
    """Message links (:func:`mcp_lib.ids.parse_permalink`) in raw text as (url, ts), each once, at most MAX_LINKS."""
    from mcp_lib.errors import BadInput
    from mcp_lib.ids import parse_permalink

    links = []
    for url in dict.fromkeys(_LINK.findall(text)):
        with contextlib.suppress(BadInput):
            links.append((url, parse_permalink(url).ts))
    return links[:MAX_LINKS]


@dataclass
class QuestionParts:
    text: str  # the reacted message, as plain text
    attachments: Attachments  # the files as read (blocks, context lines)
    where: str
    files: list[str]  # the message's own, by name
    links: list[str]  # "[n] url — content" or "[n] url — (not readable: why)"
    around: list[str]  # thread messages around it, oldest first

    def question(self) -> str:
        """The reacted message alone: what the model answers, degraded mode searches and the summary shows."""
        return redact_secrets(self.text.strip() or "（本文なし）")

    def context(self) -> str:
        """What helpbot adds around the question (the loop marks it as untrusted context); empty when nothing."""
        lines = [f"質問の場所: {self.where}"]
        if self.attachments.lines:  # a line for every file (the message's own among them)
            lines += ["添付ファイル:", *self.attachments.lines, *self.attachments.texts]
        if self.links:
            lines += ["メッセージ内のリンク先:", *self.links]
        if self.around:
            lines += ["同じスレッドのやり取り（抜粋・古い順。質問は上のメッセージ）:", *self.around]
        return redact_secrets("\n".join(lines))


def build_question(slack: Slack, thread: Thread, *, mention: bool = False) -> QuestionParts:
    """The reacted message, or for a ``mention`` its instruction (:func:`_mention_question`), with its context."""
    from agent.slack.attachments import read_attachments
    from mcp_lib.platforms.slack import message_item

    info = slack.channel(thread.channel)
    target = thread.target
    item = message_item(slack.ctx, info, target)
    is_reply = str(target.get("ts")) != thread.root
    text, subject = (_mention_question(slack, thread, is_reply) if mention else (item["text"], None))
    how = "（スレッドの返信）" if is_reply else ""
    if mention:
        how = "（スレッド内での @helpbot への依頼）" if is_reply else "（@helpbot への質問）"
    links = []
    for number, (url, ts) in enumerate(slack_links(str(target.get("text") or "")), 1):
        result = slack.registry.call("slack_getThreadMessages", {"url": url})
        if result.is_error:
            links.append(f"[{number}] {url} — （読めません: {shorten_at_word(result.message or '', 200)}）")
            continue
        linked = [i for i in result.items if i.get("ts") == ts] or result.items[:1]
        links += [f"[{number}] {url} — {hit.get('channel')} @{hit.get('author')} {hit.get('time')}: "
                  f"{shorten_at_word(str(hit.get('text') or ''), LINK_CHARS)}" for hit in linked]
    return QuestionParts(text=text, where=f"{item['channel']}{how} / 投稿者 @{item['author']} / {item['time']}",
                         files=list(item.get("files") or []), links=links,
                         around=_around(slack, info, thread, skip=subject), attachments=read_attachments(slack, thread))


def _mention_question(slack: Slack, thread: Thread, is_reply: bool) -> tuple[str, str | None]:
    """An @helpbot mention's text is the asker's instruction (「英語で」): with the thread's first message as the
    question when it replies in a thread helpbot has not answered, alone as a follow-up when it has, and as the
    question when it starts its own thread. Returns the question and the ts it was taken from, if not the mention."""
    pattern = mention_of(slack.me)
    raw = str(thread.target.get("text") or "")
    instruction = slack.plain({"text": pattern.sub(" ", raw) if pattern else raw}).strip()
    if not is_reply or not thread.messages:
        return instruction, None
    root = thread.messages[0]  # the thread's first message
    asked = slack.plain(root).strip()
    if markers.answers_in_sequence(thread.messages, slack.me):
        return instruction or asked, None  # a follow-up: it builds on helpbot's earlier answers (the history)
    return (f"{asked}\n\n（@helpbot への依頼: {instruction}）" if instruction else asked), str(root.get("ts"))


def _around(slack: Slack, info: Mapping[str, Any], thread: Thread, *, skip: str | None = None) -> list[str]:
    """The thread's first message and the ones just before and after the question, within CONTEXT_CHARS; without
    questions helpbot answered (they are in the history) and ``skip`` (where a mention's question was taken from)."""
    from mcp_lib.platforms.slack import message_item

    target = str(thread.target["ts"])
    answered = {str(marker.question_ts) for marker, _, _ in markers.answers_in_sequence(thread.messages, slack.me)}
    skipped = answered | {target} | ({skip} if skip else set())
    others = [m for m in thread.messages if str(m.get("ts")) not in skipped and not slack.me.wrote(m)
              and m.get("subtype") not in _UNANSWERABLE]
    before = [m for m in others if float(m["ts"]) < float(target)]
    after = [m for m in others if float(m["ts"]) > float(target)]
    chosen = before[:1] + before[1:][-CONTEXT_BEFORE:] + after[:CONTEXT_AFTER]
    lines: list[str] = []
    for message in chosen:
        item = message_item(slack.ctx, info, message)
        files = f" [添付: {', '.join(item['files'])}]" if item.get("files") else ""
        line = f"- @{item['author']} {item['time']}: {shorten_at_word(item['text'], CONTEXT_MESSAGE_CHARS)}{files}"
        if sum(map(len, lines)) + len(line) > CONTEXT_CHARS:
            lines.append("- …（以降省略）")
            break
        lines.append(line)
    return lines
