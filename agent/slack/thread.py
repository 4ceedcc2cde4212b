"""The Slack thread a :help: reaction points at, read and turned into what the agent is asked.

- :func:`fetch_thread`: the reacted message and its whole thread, with metadata (helpbot's answers, placeholders
  and failure notices carry metadata naming the message they belong to).
- :func:`earlier_turns`: helpbot's earlier answers in the thread, each with its question, become conversation
  history (``Turn``), so that a follow-up builds on them instead of starting over.
- Which messages are helpbot's is decided by their author (:meth:`Me.wrote`), never by metadata alone: any app
  can post a message carrying ``helpbot_answer`` metadata. :func:`answers_in_sequence` and :func:`read_answer`
  are shared with ``helpbot feedback``.
- :func:`build_question`: the reacted message itself is the question (a reply stays the reply). Where it was
  asked, its files, the messages it links to (read through the Slack platform's tool, so the DM / private-channel
  rules apply) and the thread around it (bounded) are the *context*: the model sees it, degraded mode's searches
  and the job summary do not.

Reading Slack reuses the Slack platform (:mod:`mcp_lib.platforms.slack`: plain text, message items, channel
lookups, error messages). It is imported inside the functions, so ``helpbot answer --help`` never loads slack-sdk.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.core.run import Turn
from agent.errors import ConfigError, RunFailed
from agent.slack.blocks import FAILURE_EVENT_TYPE, METADATA_EVENT_TYPE, SOURCES_TITLE
from mcp_lib.redact import redact_secrets

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from mcp_lib import Registry, ToolContext

PROGRESS_EVENT_TYPE = "helpbot_progress"  # the placeholder; a re-run reuses a stale one instead of adding more
THREAD_PAGES = 5  # x 200 messages: enough for any real thread, bounded for a runaway one
CONTEXT_BEFORE, CONTEXT_AFTER = 8, 2  # thread messages around the reacted one given as context
CONTEXT_MESSAGE_CHARS, CONTEXT_CHARS = 600, 6000
MAX_LINKS, LINK_CHARS = 3, 1500
MAX_TURNS = 5  # earlier Q&A pairs of the thread passed as history
_UNANSWERABLE = {"tombstone", "channel_join", "channel_leave", "message_deleted", "bot_add", "bot_remove"}
# Candidate message links in raw text (bare, or the url of <url|label>); ASCII only, as Japanese text may follow
# a bare link without a space. Whether one really is a message link is parse_permalink's to say.
_LINK = re.compile(r"https?://[A-Za-z0-9.-]+/archives/[A-Za-z0-9/?#=&%._~-]+")


@dataclass
class Thread:
    channel: str
    root: str
    target: dict[str, Any]  # the reacted message
    messages: list[dict[str, Any]]  # parent first, then replies, with metadata


@dataclass(frozen=True)
class Me:
    """Who helpbot is (auth.test, plus HELPBOT_BOT_USER_ID): its own messages are never a question or its
    context, and only its own messages count as its answers, placeholders and notices."""

    user_id: str | None
    bot_id: str | None
    configured_user_id: str | None = None  # HELPBOT_BOT_USER_ID (a dry run may have no bot token to ask)

    def wrote(self, message: Mapping[str, Any]) -> bool:
        user = message.get("user")
        return bool((self.bot_id and message.get("bot_id") == self.bot_id)
                    or (user and user in (self.user_id, self.configured_user_id)))


# -- reading Slack --------------------------------------------------------------------------------------------------
def slack_call(web: WebClient, api: str, variable: str, **params: Any) -> dict[str, Any]:
    """One read; rejected credentials are ConfigError (exit 2), anything else a one-line RunFailed."""
    from slack_sdk.errors import SlackApiError

    from mcp_lib.platforms.slack import AUTH_ERRORS, explain

    try:
        response = getattr(web, api.replace(".", "_"))(**{k: v for k, v in params.items() if v is not None})
    except SlackApiError as exc:
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        if data.get("error") in AUTH_ERRORS:
            raise ConfigError(variable, f"Slack rejected the token ({data.get('error')})") from None
        raise RunFailed(explain(exc, api, variable)) from None
    except OSError as exc:
        raise RunFailed(f"cannot reach Slack ({api}): {getattr(exc, 'reason', exc)}") from None
    return dict(response.data) if isinstance(response.data, dict) else {}


def who_am_i(bot: WebClient | None, configured_user_id: str | None) -> Me:
    """helpbot's identity from ``auth.test``; a dry run without a bot token has only HELPBOT_BOT_USER_ID."""
    if bot is None:
        return Me(None, None, configured_user_id)
    who = slack_call(bot, "auth.test", "SLACK_BOT_TOKEN")
    return Me(who.get("user_id"), who.get("bot_id"), configured_user_id)


def fetch_thread(web: WebClient, variable: str, channel: str, ts: str) -> Thread:
    """The reacted message and its whole thread (parent first), metadata included, pagination bounded."""

    def replies(of: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        cursor = None
        for _ in range(THREAD_PAGES):
            data = slack_call(web, "conversations.replies", variable, channel=channel, ts=of, limit=200,
                              include_all_metadata=True, cursor=cursor)
            messages += data.get("messages") or []
            cursor = (data.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                break
        return messages

    messages = replies(ts)
    target = next((m for m in messages if m.get("ts") == ts), None)
    if target is None:
        raise RunFailed(f"message {channel}/{ts} not found (deleted, or not visible to helpbot)")
    root = str(target.get("thread_ts") or ts)
    if root != ts and (not messages or messages[0].get("ts") != root):  # asked by a reply ts: read from the root
        messages = replies(root)
    return Thread(channel=channel, root=root, target=target, messages=messages)


def lookup_channel(ctx: ToolContext, channel: str) -> dict[str, Any]:
    """The channel's info (name, privacy); only its id when it cannot be looked up -- the message still can be."""
    from mcp_lib.core import ToolError
    from mcp_lib.platforms import slack

    try:
        return slack.channel_info(ctx, channel)
    except ToolError:
        return {"id": channel, "name": channel}


def is_public(info: Mapping[str, Any]) -> bool:
    """Public only when Slack said so: a channel whose info could not be read counts as private."""
    from mcp_lib.platforms import slack

    return "is_private" in info and not (slack.is_dm(info) or slack.is_private(info))


# -- which messages are what ----------------------------------------------------------------------------------------
def is_helpbot(message: Mapping[str, Any], me: Me) -> bool:
    """Written by helpbot (its bot id or user). helpbot's metadata on someone else's message proves nothing."""
    return me.wrote(message)


def answerable(message: Mapping[str, Any]) -> bool:
    """Something a person wrote, with text or files (not a join, a deletion or a tombstone)."""
    return message.get("subtype") not in _UNANSWERABLE and bool(str(message.get("text") or "").strip()
                                                                  or message.get("files"))


def _metadata_for(message: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    metadata = message.get("metadata")
    if not isinstance(metadata, dict):
        return "", {}
    payload = metadata.get("event_payload")
    return str(metadata.get("event_type") or ""), payload if isinstance(payload, dict) else {}


def stale_placeholder(thread: Thread, question_ts: str, me: Me) -> str | None:
    """A placeholder or failure notice an earlier run left for this message: reused, so re-runs don't pile up.
    Only helpbot's own: another app's look-alike would be "updated" (and fail) instead of a real placeholder."""
    found = None
    for message in thread.messages:
        kind, payload = _metadata_for(message)
        if (kind in (PROGRESS_EVENT_TYPE, FAILURE_EVENT_TYPE) and payload.get("question_ts") == question_ts
                and me.wrote(message)):
            found = str(message["ts"])
    return found


def answers_in_sequence(messages: Sequence[Mapping[str, Any]], is_ours: Callable[[Mapping[str, Any]], bool]
                        ) -> list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]]:
    """helpbot's answers among thread messages, each with the messages that make it up (itself first).

    An answer is helpbot's message with ``helpbot_answer`` metadata; its further parts are helpbot's next
    messages without metadata (people may reply in between), up to the ``parts`` its metadata names.
    """
    found = []
    for index, message in enumerate(messages):
        kind, payload = _metadata_for(message)
        if kind != METADATA_EVENT_TYPE or not is_ours(message):
            continue
        try:
            wanted = max(1, int(payload.get("parts") or 1))
        except (TypeError, ValueError):
            wanted = 1
        parts = [message]
        for later in messages[index + 1:]:
            if len(parts) >= wanted:
                break
            if not is_ours(later):
                continue  # people may reply between the parts
            if _metadata_for(later)[0]:
                break  # helpbot's next answer, placeholder or failure notice
            parts.append(later)
        found.append((message, parts))
    return found


# -- earlier answers in the thread (follow-ups) ---------------------------------------------------------------------
_SOURCES_HEAD = re.compile(rf"\s*[*_]*{re.escape(SOURCES_TITLE)}[*_]*\s*")
_SOURCE_MD = re.compile(r"\s*[-•*]\s*\[(?P<title>[^\]\n]*)\]\((?P<url>[^)\s]+)\)\s*")
_SOURCE_MRKDWN = re.compile(r"\s*[-•*]\s*<(?P<url>https?://[^|>\s]+)\|(?P<title>[^>]*)>\s*")
_SOURCE_MORE = re.compile(r"\s*[-•*]\s*ほか\s*(?P<n>\d+)\s*件\s*")  # sources_markdown's "- ほか N 件"
_SOURCE_PLAIN = re.compile(r"\s*[-•*]\s+(?P<title>\S.*?)\s*")  # a source without a URL


def _rich_elements(elements: Sequence[Mapping[str, Any]]) -> str:
    out = []
    for element in elements:
        kind = element.get("type")
        if kind == "text":
            text = str(element.get("text") or "")
            style = element.get("style") or {}
            if style.get("code"):
                text = f"`{text}`"
            if style.get("bold"):
                text = f"**{text}**"
            out.append(text)
        elif kind == "link":
            url = str(element.get("url") or "")
            out.append(f"[{element.get('text') or url}]({url})")
        elif kind == "emoji":
            out.append(f":{element.get('name')}:")
        elif kind in ("user", "channel", "usergroup"):
            out.append(f"<@{element.get('user_id') or element.get('channel_id') or element.get('usergroup_id')}>")
        elif "elements" in element:
            out.append(_rich_elements(element["elements"]))
    return "".join(out)


def block_text(block: Mapping[str, Any]) -> str | None:
    """The text of one block as markdown (Slack may hand a posted markdown block back as rich_text/sections)."""
    kind = block.get("type")
    if kind == "markdown":
        return str(block.get("text") or "")
    if kind in ("section", "header"):
        text = block.get("text") or {}
        return str(text.get("text") or "") if isinstance(text, dict) else str(text)
    if kind != "rich_text":
        return None  # context (the footer), dividers, images: not part of the answer
    parts = []
    for element in block.get("elements") or []:
        sub = element.get("type")
        if sub == "rich_text_list":
            ordered = element.get("style") == "ordered"
            parts.append("\n".join(f"{f'{n}.' if ordered else '-'} {_rich_elements(item.get('elements') or [])}"
                                   for n, item in enumerate(element.get("elements") or [], 1)))
        elif sub == "rich_text_preformatted":
            parts.append(f"```\n{_rich_elements(element.get('elements') or [])}\n```")
        elif sub == "rich_text_quote":
            parts.append("> " + _rich_elements(element.get("elements") or []))
        else:
            parts.append(_rich_elements(element.get("elements") or []))
    return "\n".join(parts)


def message_markdown(message: Mapping[str, Any]) -> str:
    """A posted answer as markdown again: its blocks when it has any, else its fallback text."""
    texts = [t for b in message.get("blocks") or [] if isinstance(b, dict) and (t := block_text(b)) is not None]
    return "\n\n".join(t for t in texts if t.strip()) if texts else str(message.get("text") or "")


@dataclass
class ReadAnswer:
    """A posted answer read back: its text and what its 参照元 section lists."""

    text: str
    sources: list[dict[str, str]]  # {title, url}: the linked ones
    unlinked: list[str] = field(default_factory=list)  # titles listed without a URL
    left_out: int = 0  # "ほか N 件": sources the section had no room for


def read_answer(markdown: str) -> ReadAnswer:
    """Split an answer (markdown, or rich_text read back as markdown) at its last 参照元 heading."""
    lines = markdown.split("\n")
    head = next((i for i in range(len(lines) - 1, -1, -1) if _SOURCES_HEAD.fullmatch(lines[i])), None)
    if head is None:
        return ReadAnswer(markdown.strip(), [])
    read = ReadAnswer("\n".join(lines[:head]).strip(), [])
    for line in lines[head + 1:]:
        if match := _SOURCE_MD.fullmatch(line) or _SOURCE_MRKDWN.fullmatch(line):
            read.sources.append({"title": match.group("title").strip(), "url": match.group("url")})
        elif more := _SOURCE_MORE.fullmatch(line):
            read.left_out += int(more.group("n"))
        elif plain := _SOURCE_PLAIN.fullmatch(line):
            read.unlinked.append(plain.group("title"))
    return read


def split_sources(markdown: str) -> tuple[str, list[dict[str, str]]]:
    """An answer's text and the (linked) sources listed in its 参照元 section."""
    read = read_answer(markdown)
    return read.text, read.sources


def earlier_turns(thread: Thread, question_ts: str, me: Me, plain: Callable[[Mapping[str, Any]], str]) -> list[Turn]:
    """helpbot's earlier answers in this thread, each with its question: the conversation so far."""
    by_ts = {str(m.get("ts")): m for m in thread.messages}
    turns: list[Turn] = []
    for message, parts in answers_in_sequence(thread.messages, me.wrote):
        asked = str(_metadata_for(message)[1].get("question_ts") or "")
        if asked == question_ts or asked not in by_ts:
            continue
        answer, sources = split_sources("\n\n".join(message_markdown(part) for part in parts))
        question = plain(by_ts[asked])
        if question.strip() and answer:
            turns.append(Turn(question=question, answer=answer, sources=sources))
    return turns[-MAX_TURNS:]


# -- the question and its context -----------------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        if self.files:
            lines.append("添付ファイル: " + ", ".join(self.files))
        if self.links:
            lines += ["メッセージ内のリンク先:", *self.links]
        if self.around:
            lines += ["同じスレッドのやり取り（抜粋・古い順。質問は上のメッセージ）:", *self.around]
        return redact_secrets("\n".join(lines))


def build_question(ctx: ToolContext, registry: Registry, thread: Thread, *, me: Me) -> QuestionParts:
    """The reacted message, its files, the messages it links to (tool rules apply), and the thread around it."""
    from mcp_lib.platforms import slack

    info = lookup_channel(ctx, thread.channel)
    target = thread.target
    item = slack.message_item(ctx, info, target)
    is_reply = str(target.get("ts")) != thread.root
    parts = QuestionParts(text=item["text"], files=list(item.get("files") or []),
                          where=f"{item['channel']}{'（スレッドの返信）' if is_reply else ''} / 投稿者 "
                                f"@{item['author']} / {item['time']}")
    for number, (url, ts) in enumerate(slack_links(str(target.get("text") or "")), 1):
        result = registry.call("slack_getThreadMessages", {"url": url})
        if result.is_error:
            parts.links.append(f"[{number}] {url} — （読めません: {_cut(result.message or '', 200)}）")
            continue
        linked = [i for i in result.items if i.get("ts") == ts] or result.items[:1]
        for hit in linked:
            parts.links.append(f"[{number}] {url} — {hit.get('channel')} @{hit.get('author')} {hit.get('time')}: "
                               f"{_cut(str(hit.get('text') or ''), LINK_CHARS)}")
    parts.around = _around(ctx, info, thread, me)
    return parts


def _around(ctx: ToolContext, info: Mapping[str, Any], thread: Thread, me: Me) -> list[str]:
    """The thread's first message and the ones just before and after the question, within CONTEXT_CHARS.
    Questions helpbot answered earlier are left out: they are in the history already."""
    from mcp_lib.platforms import slack

    target = str(thread.target["ts"])
    answered = {str(_metadata_for(m)[1].get("question_ts")) for m, _ in answers_in_sequence(thread.messages, me.wrote)}
    others = [m for m in thread.messages
              if str(m.get("ts")) not in answered and str(m.get("ts")) != target
              and not is_helpbot(m, me) and m.get("subtype") not in _UNANSWERABLE]
    before = [m for m in others if float(m["ts"]) < float(target)]
    after = [m for m in others if float(m["ts"]) > float(target)]
    chosen = before[:1] + before[1:][-CONTEXT_BEFORE:] if before else []
    chosen += after[:CONTEXT_AFTER]
    lines: list[str] = []
    used = 0
    for message in chosen:
        item = slack.message_item(ctx, info, message)
        files = f" [添付: {', '.join(item['files'])}]" if item.get("files") else ""
        line = f"- @{item['author']} {item['time']}: {_cut(item['text'], CONTEXT_MESSAGE_CHARS)}{files}"
        if used + len(line) > CONTEXT_CHARS:
            lines.append("- …（以降省略）")
            break
        lines.append(line)
        used += len(line)
    return lines
