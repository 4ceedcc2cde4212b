"""``helpbot answer``: from a :help: trigger to an answer in the Slack thread -- and never silence.

One run, and what happens when a step fails:

1. The trigger (``--event FILE`` | ``--url PERMALINK`` | ``--channel C --ts TS``) is parsed strictly by
   :mod:`agent.events`. Malformed: one line, exit 2, nothing posted. A deliberate ignore (another reaction, a
   channel outside the allowlist, helpbot's own reaction): one log line, exit 0.
2. Slack: ``auth.test`` (who helpbot is), then the reacted message and its whole thread, with metadata. A
   message helpbot wrote, or one it already answered (its ``helpbot_answer`` metadata names the message;
   ``--force`` answers again), is ignored: exit 0. Nothing has been posted yet; a Slack failure here is one
   line and exit 1.
3. The question: the reacted message itself (a reply stays the reply), the thread around it (bounded),
   attached file names, and the contents of Slack message links in it, read through the Slack platform's tool
   so the DM / private-channel rules apply. Earlier helpbot answers in the same thread become conversation
   history (``Turn``), so a follow-up builds on them instead of starting over.
4. 👀 on the message and a placeholder 「調べています…」 in the thread, updated as rounds progress (throttled);
   the answer replaces it (extra parts as further replies) and ✅ replaces 👀. From the moment the thread is
   known, any failure leaves a notice in the thread (❌) and exits 1 -- or 2 for bad configuration.

Everything posted passes :func:`agent.slack_format.guard_public` in one place (:class:`SlackOut`). In GitHub
Actions a job summary goes to ``$GITHUB_STEP_SUMMARY``; the trace (front and agent events, JSON lines, secrets
masked) to ``$HELPBOT_TRACE_FILE``. ``helpbot ask --continue/--save`` use the transcript functions at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_lib import Caller
from mcp_lib.config import ConfigError, env_float, env_str
from mcp_lib.redact import redact_deep, redact_secrets

from .events import CHANNEL_RE, BadInput, Trigger, TriggerSettings, check_ignore, from_options, load_event
from .loop import Turn
from .slack_format import (
    FAILURE_EVENT_TYPE,
    METADATA_EVENT_TYPE,
    METADATA_VERSION,
    POST_OPTIONS,
    answer_payloads,
    failure_payload,
    find_answer,
    guard_public,
    mask_personal_from_env,
    placeholder_payload,
    progress_payload,
    run_url,
)

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from mcp_lib import Registry, ToolContext
    from mcp_lib.platforms.slack import SlackClients

    from .loop import Agent, Answer, Progress

PROGRESS_EVENT_TYPE = "helpbot_progress"  # the placeholder; a re-run reuses a stale one instead of adding more
WORKING, DONE, FAILED = "eyes", "white_check_mark", "x"
THREAD_PAGES = 5  # x 200 messages: enough for any real thread, bounded for a runaway one
CONTEXT_BEFORE, CONTEXT_AFTER = 8, 2  # thread messages around the reacted one given as context
CONTEXT_MESSAGE_CHARS, CONTEXT_CHARS = 600, 6000
MAX_LINKS, LINK_CHARS = 3, 1500
MAX_TURNS = 5  # earlier Q&A pairs of the thread passed as history
SUMMARY_QUESTION_CHARS = 300
DEFAULT_PROGRESS_INTERVAL_S = 5.0
_UNANSWERABLE = {"tombstone", "channel_join", "channel_leave", "message_deleted", "bot_add", "bot_remove"}
_SLACK_LINK = re.compile(r"https://[A-Za-z0-9.-]+/archives/[A-Z0-9]+/p\d{16}[^\s|>]*")

AgentFactory = Callable[[Caller, Callable[["Progress"], None], Callable[[dict[str, Any]], None]], "Agent"]


class FrontError(Exception):
    """A failure helpbot can explain in one line (exit 1)."""


class Terminated(BaseException):
    """SIGTERM (a cancelled or timed-out Actions job): still leave a notice in the thread."""


# -- the command line -----------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--event", metavar="FILE", help="a trigger: a GitHub event JSON ($GITHUB_EVENT_PATH), a "
                                                       "bare payload or a Slack reaction_added envelope")
    where.add_argument("--url", metavar="PERMALINK", help="answer this Slack message (its link)")
    where.add_argument("--channel", metavar="C", help="answer the message in this channel (with --ts)")
    parser.add_argument("--ts", metavar="TS", help="the message's timestamp (with --channel)")
    parser.add_argument("--dry-run", action="store_true", help="print the answer; post nothing to Slack")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (as helpbot ask --json)")
    parser.add_argument("--force", action="store_true", help="answer even if helpbot already answered it")


@dataclass
class Options:
    event: str | None = None
    url: str | None = None
    channel: str | None = None
    ts: str | None = None
    dry_run: bool = False
    json: bool = False
    force: bool = False


def main(args: argparse.Namespace) -> int:
    options = Options(event=args.event, url=args.url, channel=args.channel, ts=args.ts, dry_run=args.dry_run,
                      json=args.json, force=args.force)
    return run(options, dict(os.environ))


def run(options: Options, env: Mapping[str, str], *, make_agent: AgentFactory | None = None,
        sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> int:
    """The whole command; returns the exit code. ``make_agent`` and ``sleep`` are the test seams."""
    front = Front(options, env, make_agent=make_agent, sleep=sleep, clock=clock)
    with front.trace, _sigterm_raises():
        return front.run()


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Terminated("the run was cancelled (SIGTERM)")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _log(message: str) -> None:
    print(f"helpbot answer: {message}", file=sys.stderr, flush=True)


# -- trace and job summary ------------------------------------------------------------------------------------------
class Trace:
    """JSON lines to ``HELPBOT_TRACE_FILE`` as they happen (a killed run keeps what it had); secrets masked."""

    def __init__(self, path: str | None, clock: Callable[[], float]):
        self.path = path
        self.clock = clock
        self.started = clock()
        self._file: Any = None
        self._broken = False

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def front(self, kind: str, **data: Any) -> None:
        self.write({"t": round(self.clock() - self.started, 3), "event": f"front.{kind}", **data})

    def write(self, event: Mapping[str, Any]) -> None:
        if not self.path or self._broken:
            return
        try:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 -- held for the whole run
            self._file.write(json.dumps(redact_deep(dict(event)), ensure_ascii=False, default=str) + "\n")
            self._file.flush()
        except OSError as exc:
            self._broken = True
            _log(f"cannot write the trace to {self.path}: {exc.strerror or exc}")


def _md_quote(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat.replace("|", "\\|") or "(empty)"


def write_summary(env: Mapping[str, str], markdown: str) -> None:
    """Append to the Actions job summary (``$GITHUB_STEP_SUMMARY``), when there is one."""
    path = env_str(env, "GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(markdown.rstrip() + "\n")
    except OSError as exc:
        _log(f"cannot write the job summary to {path}: {exc.strerror or exc}")


def tools_line(answer: Answer) -> str:
    used = Counter(call.name for call in answer.tool_calls)
    return ", ".join(f"{name}×{n}" if n > 1 else name for name, n in used.items()) or "none"


def summary_markdown(*, status: str, question: str | None, where: str | None, answer: Answer | None = None,
                     link: str | None = None, detail: str | None = None, show_answer: bool = False) -> str:
    """The job summary: what was asked, what happened, and what it took."""
    lines = [f"## helpbot: {status}", ""]
    if where:
        lines.append(f"- **Where:** {where}")
    if question is not None:
        lines.append(f"- **Question:** {_md_quote(guard_public(question), SUMMARY_QUESTION_CHARS)}")
    if detail:
        lines.append(f"- **Detail:** {_md_quote(guard_public(detail), 500)}")
    if answer is not None:
        u = answer.usage
        lines += [
            f"- **Rounds:** {answer.rounds} · **Tools:** {len(answer.tool_calls)} ({tools_line(answer)})"
            + (f" · **Tags:** {', '.join(answer.tags)}" if answer.tags else "")
            + (" · **degraded** (not AI-generated)" if answer.degraded else ""),
            f"- **Tokens:** in {u.input_tokens:,} · out {u.output_tokens:,} · cache read "
            f"{u.cache_read_input_tokens:,} · cache write {u.cache_creation_input_tokens:,}",
            f"- **Est. cost:** ${answer.cost_usd:.4f} · {answer.seconds:.1f} s · stop: {answer.stop}",
        ]
    if link:
        lines.append(f"- **Answer:** [{link}]({link})")
    if show_answer and answer is not None:
        lines += ["", "### Answer", "", guard_public(answer.text)]
        if answer.sources:
            lines += ["", "Sources:"] + [f"- [{s['title']}]({s['url']})" for s in answer.sources]
    return "\n".join(lines)


# -- every write to Slack -------------------------------------------------------------------------------------------
def guard_payload(value: Any, mask_personal: bool) -> Any:
    """Every ``text`` string in a payload (fallback, markdown, section and context blocks) through guard_public."""
    if isinstance(value, dict):
        return {k: (guard_public(v, mask_personal) if k == "text" and isinstance(v, str)
                    else v if k == "metadata" else guard_payload(v, mask_personal)) for k, v in value.items()}
    if isinstance(value, list):
        return [guard_payload(v, mask_personal) for v in value]
    return value


class SlackOut:
    """All of helpbot's writes to Slack go through here: guarded, traced, and none at all in a dry run."""

    def __init__(self, web: WebClient | None, *, mask_personal: bool, trace: Trace):
        self.web = web
        self.mask_personal = mask_personal
        self.trace = trace

    def post(self, channel: str, payload: Mapping[str, Any], thread_ts: str | None = None) -> str | None:
        if self.web is None:
            return None
        body = guard_payload(dict(payload), self.mask_personal)
        body.update(POST_OPTIONS)
        response = self.web.chat_postMessage(channel=channel, thread_ts=thread_ts, **body)
        ts = str(response["ts"])
        self.trace.front("post", channel=channel, thread_ts=thread_ts, ts=ts, chars=len(json.dumps(body)))
        return ts

    def update(self, channel: str, ts: str, payload: Mapping[str, Any]) -> None:
        if self.web is None:
            return
        body = guard_payload(dict(payload), self.mask_personal)
        self.web.chat_update(channel=channel, ts=ts, **body)
        self.trace.front("update", channel=channel, ts=ts, chars=len(json.dumps(body)))

    def react(self, channel: str, ts: str, name: str, *, remove: bool = False) -> None:
        """Reactions are a courtesy: a failure (scope missing, already there) never fails the run."""
        if self.web is None:
            return
        from slack_sdk.errors import SlackApiError

        try:
            if remove:
                self.web.reactions_remove(channel=channel, timestamp=ts, name=name)
            else:
                self.web.reactions_add(channel=channel, timestamp=ts, name=name)
        except (SlackApiError, OSError) as exc:
            error = getattr(getattr(exc, "response", None), "data", {}) or {}
            code = error.get("error") if isinstance(error, dict) else None
            if code not in ("already_reacted", "no_reaction"):
                _log(f"could not {'remove' if remove else 'add'} :{name}: ({code or exc})")
        else:
            self.trace.front("reaction", channel=channel, ts=ts, name=name, removed=remove)


# -- reading Slack --------------------------------------------------------------------------------------------------
@dataclass
class Thread:
    channel: str
    root: str
    target: dict[str, Any]  # the reacted message
    messages: list[dict[str, Any]]  # parent first, then replies, with metadata


@dataclass(frozen=True)
class Me:
    user_id: str | None
    bot_id: str | None


def slack_call(web: WebClient, api: str, variable: str, **params: Any) -> dict[str, Any]:
    """One read; rejected credentials are ConfigError (exit 2), anything else a one-line FrontError."""
    from slack_sdk.errors import SlackApiError

    from mcp_lib.platforms.slack import _AUTH_ERRORS, _explain

    try:
        response = getattr(web, api.replace(".", "_"))(**{k: v for k, v in params.items() if v is not None})
    except SlackApiError as exc:
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        if data.get("error") in _AUTH_ERRORS:
            raise ConfigError(variable, f"Slack rejected the token ({data.get('error')})") from None
        raise FrontError(_explain(exc, api, variable)) from None
    except OSError as exc:
        raise FrontError(f"cannot reach Slack ({api}): {getattr(exc, 'reason', exc)}") from None
    return dict(response.data) if isinstance(response.data, dict) else {}


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
        raise FrontError(f"message {channel}/{ts} not found (deleted, or not visible to helpbot)")
    root = str(target.get("thread_ts") or ts)
    if root != ts and (not messages or messages[0].get("ts") != root):  # asked by a reply ts: read from the root
        messages = replies(root)
    return Thread(channel=channel, root=root, target=target, messages=messages)


def is_helpbot(message: Mapping[str, Any], me: Me, bot_user_id: str | None = None) -> bool:
    """Written by helpbot: its bot id or user, or helpbot's own metadata on it."""
    event_type = str((message.get("metadata") or {}).get("event_type") or "")
    return bool(
        (me.bot_id and message.get("bot_id") == me.bot_id)
        or (message.get("user") and message.get("user") in {me.user_id, bot_user_id} - {None})
        or event_type in (METADATA_EVENT_TYPE, FAILURE_EVENT_TYPE, PROGRESS_EVENT_TYPE)
    )


def _metadata_for(message: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    metadata = message.get("metadata") or {}
    return str(metadata.get("event_type") or ""), metadata.get("event_payload") or {}


def stale_placeholder(thread: Thread, question_ts: str) -> str | None:
    """A placeholder or failure notice an earlier run left for this message: reused, so re-runs don't pile up."""
    found = None
    for message in thread.messages:
        kind, payload = _metadata_for(message)
        if kind in (PROGRESS_EVENT_TYPE, FAILURE_EVENT_TYPE) and payload.get("question_ts") == question_ts:
            found = str(message["ts"])
    return found


# -- earlier answers in the thread (follow-ups) ---------------------------------------------------------------------
_SOURCES_HEAD = re.compile(r"^\s*[*_]*参照元[*_]*\s*$")
_SOURCE_MD = re.compile(r"^\s*[-•*]\s*\[(?P<title>[^\]\n]*)\]\((?P<url>[^)\s]+)\)\s*$")
_SOURCE_MRKDWN = re.compile(r"^\s*[-•*]\s*<(?P<url>https?://[^|>\s]+)\|(?P<title>[^>]*)>\s*$")


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
    texts = [t for b in message.get("blocks") or [] if isinstance(b, dict) and (t := block_text(b)) is not None]
    return "\n\n".join(t for t in texts if t.strip()) if texts else str(message.get("text") or "")


def split_sources(markdown: str) -> tuple[str, list[dict[str, str]]]:
    """An answer's text and the sources listed in its 参照元 section."""
    lines = markdown.split("\n")
    head = next((i for i, line in enumerate(lines) if _SOURCES_HEAD.match(line)), None)
    if head is None:
        return markdown.strip(), []
    sources = []
    for line in lines[head + 1:]:
        match = _SOURCE_MD.match(line) or _SOURCE_MRKDWN.match(line)
        if match:
            sources.append({"title": match.group("title").strip(), "url": match.group("url")})
    return "\n".join(lines[:head]).strip(), sources


def earlier_turns(thread: Thread, question_ts: str, me: Me, bot_user_id: str | None,
                  plain: Callable[[Mapping[str, Any]], str]) -> list[Turn]:
    """helpbot's earlier answers in this thread, each with its question: the conversation so far."""
    by_ts = {str(m.get("ts")): m for m in thread.messages}
    turns: list[Turn] = []
    for index, message in enumerate(thread.messages):
        kind, payload = _metadata_for(message)
        asked = str(payload.get("question_ts") or "")
        if kind != METADATA_EVENT_TYPE or asked == question_ts or asked not in by_ts:
            continue
        parts = [message_markdown(message)]
        wanted = int(payload.get("parts") or 1) - 1
        for later in thread.messages[index + 1:]:  # the answer's further parts: helpbot's next plain messages
            if len(parts) > wanted or later.get("metadata"):
                break
            if is_helpbot(later, me, bot_user_id):
                parts.append(message_markdown(later))
        answer, sources = split_sources("\n\n".join(parts))
        question = plain(by_ts[asked])
        if question.strip() and answer:
            turns.append(Turn(question=question, answer=answer, sources=sources))
    return turns[-MAX_TURNS:]


# -- the question ---------------------------------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_links(text: str) -> list[str]:
    """Slack message links in raw message text (``<url|label>`` or bare), de-duplicated, at most MAX_LINKS."""
    return list(dict.fromkeys(_SLACK_LINK.findall(text)))[:MAX_LINKS]


@dataclass
class QuestionParts:
    text: str
    where: str = ""
    files: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # "[n] url — content" or "[n] url — (not readable: why)"
    context: list[str] = field(default_factory=list)

    def render(self) -> str:
        """The reacted message first (what the model answers, what degraded mode searches), then the extras."""
        lines = [self.text.strip() or "（本文なし）"]
        extras: list[str] = []
        if self.where:
            extras.append(f"質問の場所: {self.where}")
        if self.files:
            extras.append("添付ファイル: " + ", ".join(self.files))
        if self.links:
            extras += ["メッセージ内のリンク先:", *self.links]
        if self.context:
            extras += ["同じスレッドのやり取り（抜粋・古い順。質問は上のメッセージ）:", *self.context]
        if extras:
            lines += ["", "---", "（以下は helpbot が添えた参考情報です）", *extras]
        return redact_secrets("\n".join(lines))


def build_question(ctx: ToolContext, registry: Registry, thread: Thread, *, skip: set[str],
                   me: Me, bot_user_id: str | None) -> QuestionParts:
    """The reacted message, its files, the messages it links to (tool rules apply), and the thread around it."""
    from mcp_lib.platforms import slack

    info = _channel(ctx, thread.channel)
    target = thread.target
    item = slack._message_item(ctx, info, target)
    is_reply = str(target.get("ts")) != thread.root
    parts = QuestionParts(text=item["text"], files=list(item.get("files") or []),
                          where=f"{item['channel']}{'（スレッドの返信）' if is_reply else ''} / 投稿者 "
                                f"@{item['author']} / {item['time']}")
    for number, url in enumerate(slack_links(str(target.get("text") or "")), 1):
        result = registry.call("slack_getThreadMessages", {"url": url})
        if result.is_error:
            parts.links.append(f"[{number}] {url} — （読めません: {_cut(result.message or '', 200)}）")
            continue
        _, ts, _ = slack.parse_permalink(url)
        linked = [i for i in result.items if i.get("ts") == ts] or result.items[:1]
        for hit in linked:
            parts.links.append(f"[{number}] {url} — {hit.get('channel')} @{hit.get('author')} {hit.get('time')}: "
                               f"{_cut(str(hit.get('text') or ''), LINK_CHARS)}")
    others = [m for m in thread.messages
              if str(m.get("ts")) not in skip and str(m.get("ts")) != str(target.get("ts"))
              and not is_helpbot(m, me, bot_user_id) and m.get("subtype") not in _UNANSWERABLE]
    before = [m for m in others if float(m["ts"]) < float(target["ts"])]
    after = [m for m in others if float(m["ts"]) > float(target["ts"])]
    chosen = before[:1] + before[1:][-CONTEXT_BEFORE:] if before else []
    chosen += after[:CONTEXT_AFTER]
    used = 0
    for message in chosen:
        line_item = slack._message_item(ctx, info, message)
        files = f" [添付: {', '.join(line_item['files'])}]" if line_item.get("files") else ""
        line = f"- @{line_item['author']} {line_item['time']}: {_cut(line_item['text'], CONTEXT_MESSAGE_CHARS)}{files}"
        if used + len(line) > CONTEXT_CHARS:
            parts.context.append("- …（以降省略）")
            break
        parts.context.append(line)
        used += len(line)
    return parts


def _channel(ctx: ToolContext, channel: str) -> dict[str, Any]:
    from mcp_lib.core import ToolError
    from mcp_lib.platforms import slack

    try:
        return slack._channel_info(ctx, channel)
    except ToolError:
        return {"id": channel, "name": channel}


def _is_private(info: Mapping[str, Any]) -> bool:
    return bool(info.get("is_private") or info.get("is_im") or info.get("is_mpim") or info.get("is_group")
                or str(info.get("id", "")).startswith(("G", "D")))


# -- the run --------------------------------------------------------------------------------------------------------
@dataclass
class Target:
    """Where the answer goes (None: print only) and what it answers."""

    channel: str | None
    root: str | None  # thread to answer in
    question_ts: str | None  # the message the answer's metadata names
    where: str  # for the summary
    caller: Caller
    public: bool = True  # may the question appear in the job summary?
    placeholder: str | None = None  # a stale one to reuse


class Front:
    def __init__(self, options: Options, env: Mapping[str, str], *, make_agent: AgentFactory | None,
                 sleep: Callable[[float], None], clock: Callable[[], float]):
        self.options = options
        self.env = dict(env)
        self.sleep = sleep
        self.clock = clock
        self.trace = Trace(env_str(env, "HELPBOT_TRACE_FILE"), clock)
        self.make_agent = make_agent or self._build_agent
        self.mask_personal = mask_personal_from_env(env)
        self.run_link = run_url(env)
        self.interval = env_float(env, "HELPBOT_PROGRESS_INTERVAL_S", DEFAULT_PROGRESS_INTERVAL_S)
        self.trigger_dry_run = False  # workflow_dispatch's dry_run input counts like --dry-run

    def _build_agent(self, caller: Caller, on_progress: Callable[[Progress], None],
                     on_event: Callable[[dict[str, Any]], None]) -> Agent:
        from .cli import build_agent

        return build_agent(self.env, caller=caller, on_progress=on_progress, on_event=on_event)

    # -- outcomes without an answer -------------------------------------------------------------------------
    def _rejected(self, why: str) -> int:
        print(f"helpbot answer: {why}", file=sys.stderr)
        self.trace.front("rejected", reason=why)
        write_summary(self.env, summary_markdown(status="rejected the trigger (nothing posted)", question=None,
                                                 where=None, detail=why))
        return 2

    def _ignored(self, why: str, where: str | None = None) -> int:
        _log(f"ignored: {why}")
        self.trace.front("ignored", reason=why)
        write_summary(self.env, summary_markdown(status="ignored (nothing posted)", question=None, where=where,
                                                 detail=why))
        return 0

    def _config_error(self, exc: ConfigError) -> int:
        print(f"helpbot: configuration error: {exc}", file=sys.stderr)
        self.trace.front("config_error", error=str(exc))
        write_summary(self.env, summary_markdown(status="configuration error", question=None, where=None,
                                                 detail=str(exc)))
        return 2

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self) -> int:
        try:
            trigger = self._trigger()
        except BadInput as exc:
            return self._rejected(str(exc))
        self.trigger_dry_run = trigger.dry_run
        self.trace.front("trigger", source=trigger.source, channel=trigger.channel, ts=trigger.ts,
                         user=trigger.user, reaction=trigger.reaction, question=bool(trigger.question))
        try:
            ignore = check_ignore(trigger, TriggerSettings.from_env(self.env))
            if ignore:
                return self._ignored(ignore.reason, where=trigger.channel)
            if trigger.question:
                return self._free_question(trigger)
            return self._reacted(trigger)
        except ConfigError as exc:
            return self._config_error(exc)
        except FrontError as exc:
            print(f"helpbot answer: {exc}", file=sys.stderr)
            self.trace.front("error", error=str(exc))
            write_summary(self.env, summary_markdown(status="failed (nothing posted)", question=None,
                                                     where=trigger.channel, detail=str(exc)))
            return 1

    def _trigger(self) -> Trigger:
        o = self.options
        if o.event:
            if o.ts:
                raise BadInput("--ts goes with --channel, not with --event")
            return load_event(o.event)
        if o.url or o.channel or o.ts:
            if o.url and o.ts:
                raise BadInput("--ts goes with --channel, not with --url")
            if not o.url and not (o.channel and o.ts):
                raise BadInput("--channel and --ts go together")
            return from_options(url=o.url, channel=o.channel, ts=o.ts)
        raise BadInput("give one of --event FILE, --url PERMALINK, or --channel C --ts TS")

    @property
    def dry_run(self) -> bool:
        return self.options.dry_run or self.trigger_dry_run

    def _slack(self, *, need_bot: bool) -> tuple[SlackClients, WebClient, str]:
        from mcp_lib.platforms import slack

        config = slack.load_config(self.env)
        if config is None or (need_bot and config.bot_token is None):
            raise ConfigError("SLACK_BOT_TOKEN", "not set; helpbot answer reads the thread and posts with the "
                                                 "bot token (xoxb-)")
        clients = slack.make_client(config, sleep=self.sleep)
        web, variable = clients.reader()
        return clients, web, variable

    def _registry(self, clients: SlackClients, caller: Caller) -> Registry:
        from mcp_lib import Registry

        return Registry(self.env, caller=caller, clients={"slack": clients}, sleep=self.sleep)

    def _reacted(self, trigger: Trigger) -> int:
        assert trigger.channel and trigger.ts
        channel, ts = trigger.channel, trigger.ts
        settings = TriggerSettings.from_env(self.env)
        clients, web, variable = self._slack(need_bot=not self.dry_run)
        me = Me(None, None)
        if clients.bot is not None:
            who = slack_call(web, "auth.test", variable)
            me = Me(who.get("user_id"), who.get("bot_id"))
        if trigger.user and trigger.user == me.user_id:
            return self._ignored("the reaction was added by helpbot itself", channel)
        thread = fetch_thread(web, variable, channel, ts)
        message = thread.target
        if is_helpbot(message, me, settings.bot_user_id):
            return self._ignored("the message was written by helpbot itself", channel)
        if message.get("subtype") in _UNANSWERABLE or not (str(message.get("text") or "").strip()
                                                              or message.get("files")):
            return self._ignored(f"message {ts} has nothing to answer ({message.get('subtype') or 'no text'})",
                                 channel)
        if not self.options.force:
            found = find_answer(thread.messages, ts, channel)
            if found is not None:
                return self._ignored(f"message {ts} was already answered (answer {found.get('ts')}; --force "
                                     "answers again)", channel)
        caller = Caller(user=trigger.user, answer_channel=channel)
        registry = self._registry(clients, caller)
        ctx = registry.context("slack")
        info = _channel(ctx, channel)
        target = Target(channel=channel, root=thread.root, question_ts=ts, caller=caller,
                        where=f"#{info.get('name') or channel} ({channel}) message {ts}", public=not _is_private(info),
                        placeholder=stale_placeholder(thread, ts))
        out = SlackOut(None if self.dry_run else clients.bot, mask_personal=self.mask_personal, trace=self.trace)

        def question() -> tuple[str, list[Turn], str]:
            from mcp_lib.platforms import slack

            history = earlier_turns(thread, ts, me, settings.bot_user_id,
                                    lambda m: slack._plain(ctx, str(m.get("text") or "")))
            skip = {str(_metadata_for(m)[1].get("question_ts")) for m in thread.messages
                    if _metadata_for(m)[0] == METADATA_EVENT_TYPE}  # earlier questions are in the history
            parts = build_question(ctx, registry, thread, skip=skip, me=me, bot_user_id=settings.bot_user_id)
            self.trace.front("question", chars=len(parts.text), files=len(parts.files), links=len(parts.links),
                             context=len(parts.context), history_turns=len(history))
            return parts.render(), history, parts.text

        return self._answer(target, out, question)

    def _free_question(self, trigger: Trigger) -> int:
        """workflow_dispatch ``question``: answered in HELPBOT_QUESTION_CHANNEL when set, else printed."""
        assert trigger.question
        text = trigger.question
        channel = env_str(self.env, "HELPBOT_QUESTION_CHANNEL")
        if channel and not CHANNEL_RE.match(channel):
            raise ConfigError("HELPBOT_QUESTION_CHANNEL", f"{channel!r} is not a channel ID (like C0123456789)")
        if not channel or self.dry_run:
            target = Target(channel=None, root=None, question_ts=None, where="(printed: no channel)",
                            caller=Caller(answer_channel=None))
            return self._answer(target, SlackOut(None, mask_personal=self.mask_personal, trace=self.trace),
                                lambda: (text, [], text), show_answer=True)
        clients, _, _ = self._slack(need_bot=True)
        out = SlackOut(clients.bot, mask_personal=self.mask_personal, trace=self.trace)
        actor = env_str(self.env, "GITHUB_ACTOR")
        asked = f"❓ *質問*（GitHub Actions から{f'・{actor}' if actor else ''}）\n>{' '.join(text.split())}"
        from slack_sdk.errors import SlackApiError

        try:
            root = out.post(channel, {"text": asked, "blocks": [{"type": "section",
                                                                   "text": {"type": "mrkdwn", "text": asked}}]})
        except SlackApiError as exc:
            raise FrontError(f"cannot post the question to {channel}: {exc.response.get('error')}") from None
        assert root is not None
        target = Target(channel=channel, root=root, question_ts=root, where=f"{channel} (question channel)",
                        caller=Caller(answer_channel=channel))
        return self._answer(target, out, lambda: (text, [], text), show_answer=True)

    # -- answering, with progress and the failure notice ---------------------------------------------------------
    def _answer(self, target: Target, out: SlackOut, question: Callable[[], tuple[str, list[Turn], str]], *,
                show_answer: bool = False) -> int:
        """Show that work started, run the agent, deliver -- or leave a failure notice. Returns the exit code."""
        from .model import ModelRequestError

        placeholder = target.placeholder
        posting = out.web is not None and target.channel is not None and target.root is not None
        asked: str | None = None
        last_text, last_at = "", self.clock()

        def on_progress(progress: Progress) -> None:
            nonlocal last_text, last_at
            _log(progress.describe())
            if not posting or placeholder is None:
                return
            assert target.channel
            tools = progress.tools if progress.phase in ("tools", "degraded") else []
            payload = progress_payload(max(1, progress.round), progress.max_rounds, tools)
            now = self.clock()
            if payload["text"] == last_text or now - last_at < self.interval:
                return  # throttled: chat.update is rate limited, and nobody reads faster than this
            out.update(target.channel, placeholder, {**payload, "metadata": self._progress_metadata(target)})
            last_text, last_at = payload["text"], now

        try:
            if posting:  # first, so people see at once that helpbot is on it
                assert target.channel and target.root and target.question_ts
                out.react(target.channel, target.question_ts, WORKING)
                placeholder = self._placeholder(out, target, placeholder)
                last_at = self.clock()
            text, history, asked = question()
            agent = self.make_agent(target.caller, on_progress, self.trace.write)
            answer = agent.run(text, history)
            link = self._deliver(out, target, placeholder, answer) if posting else None
        except BaseException as exc:
            if isinstance(exc, ConfigError):
                what = f"設定エラー: {exc}"
            elif isinstance(exc, ModelRequestError):
                what = f"AI モデルがリクエストを受け付けませんでした: {exc}"
            elif isinstance(exc, Terminated | KeyboardInterrupt):
                what = "実行が中断されました"
            else:
                what = f"{type(exc).__name__}: {exc}"
            self.trace.front("failure", error=what)
            if posting:
                self._notify_failure(out, target, placeholder, what)
            write_summary(self.env, summary_markdown(status="failed", where=target.where, detail=what,
                                                     question=asked if target.public else None))
            if isinstance(exc, ConfigError):
                print(f"helpbot: configuration error: {exc}", file=sys.stderr)
                return 2
            if isinstance(exc, Terminated | KeyboardInterrupt):
                print("helpbot answer: interrupted", file=sys.stderr)
                return 130
            if not isinstance(exc, Exception):
                raise
            if self.env.get("HELPBOT_DEBUG"):
                raise
            print(f"helpbot answer: failed: {' '.join(what.split())}", file=sys.stderr)
            return 1
        self.trace.front("done", rounds=answer.rounds, degraded=answer.degraded, stop=answer.stop, link=link)
        write_summary(self.env, summary_markdown(
            status="answered" if posting else "answered (not posted)", where=target.where,
            question=asked if target.public else None, answer=answer, link=link,
            show_answer=show_answer or not posting))
        self._print(answer, link)
        return 0

    def _progress_metadata(self, target: Target) -> dict[str, Any]:
        return {"event_type": PROGRESS_EVENT_TYPE,
                "event_payload": {"question_channel": target.channel, "question_ts": target.question_ts,
                                  "version": METADATA_VERSION}}

    def _placeholder(self, out: SlackOut, target: Target, stale: str | None) -> str | None:
        from slack_sdk.errors import SlackApiError

        assert target.channel and target.root
        payload = {**placeholder_payload(), "metadata": self._progress_metadata(target)}
        if stale:
            try:
                out.update(target.channel, stale, payload)
                return stale
            except SlackApiError:
                pass  # deleted meanwhile: post a new one
        return out.post(target.channel, payload, thread_ts=target.root)

    def _deliver(self, out: SlackOut, target: Target, placeholder: str | None, answer: Answer) -> str | None:
        """The answer replaces the placeholder; further parts follow in the thread; ✅ replaces 👀."""
        from slack_sdk.errors import SlackApiError

        assert target.channel and target.root and target.question_ts
        payloads = answer_payloads(answer.to_json(), channel=target.channel, question_ts=target.question_ts,
                                   run_link=self.run_link, mask_personal=self.mask_personal)
        first = None
        if placeholder is not None:
            try:
                out.update(target.channel, placeholder, payloads[0])
                first = placeholder
            except SlackApiError as exc:
                _log(f"could not replace the placeholder ({exc.response.get('error')}); posting the answer anew")
        if first is None:
            first = out.post(target.channel, payloads[0], thread_ts=target.root)
        for payload in payloads[1:]:
            out.post(target.channel, payload, thread_ts=target.root)
        out.react(target.channel, target.question_ts, WORKING, remove=True)
        out.react(target.channel, target.question_ts, DONE)
        assert out.web is not None and first is not None
        try:
            return str(out.web.chat_getPermalink(channel=target.channel, message_ts=first)["permalink"])
        except (SlackApiError, OSError, KeyError):
            return None

    def _notify_failure(self, out: SlackOut, target: Target, placeholder: str | None, what: str) -> None:
        """Never silence: the notice replaces the placeholder (or is posted), ❌ replaces 👀."""
        assert target.channel and target.root
        payload = failure_payload(what, self.run_link, channel=target.channel, question_ts=target.question_ts)
        try:
            if placeholder is not None:
                try:
                    out.update(target.channel, placeholder, payload)
                except Exception:
                    out.post(target.channel, payload, thread_ts=target.root)
            else:
                out.post(target.channel, payload, thread_ts=target.root)
        except Exception as exc:  # Slack itself is down: the log and the summary are all that is left
            _log(f"could not post the failure notice: {type(exc).__name__}: {exc}")
        if target.question_ts:
            out.react(target.channel, target.question_ts, WORKING, remove=True)
            out.react(target.channel, target.question_ts, FAILED)

    def _print(self, answer: Answer, link: str | None) -> None:
        from .cli import footer

        if self.options.json:
            print(json.dumps({**answer.to_json(), "permalink": link}, ensure_ascii=False, indent=2))
        elif link is None:
            print(answer.text)
            if answer.sources:
                print("\nSources:")
                for number, source in enumerate(answer.sources, 1):
                    print(f"  {number}. {source['title']}\n     {source['url']}")
            print(f"\n— {footer(answer)}")
        if link:
            _log(f"answered: {link}")
        elif self.dry_run:
            _log("dry run: nothing was posted")


# -- transcripts for ``helpbot ask --continue / --save`` -------------------------------------------------------------
TRANSCRIPT_VERSION = 1
MAX_TRANSCRIPT_TURNS = 10


class TranscriptError(Exception):
    """A transcript file that cannot be used (one line, exit 2)."""


def _turn(data: Any, where: str) -> Turn:
    if not isinstance(data, dict):
        raise TranscriptError(f"{where} must be an object with question, answer and sources")
    for key in ("question", "answer"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise TranscriptError(f"{where}.{key} must be a non-empty string")
    sources = data.get("sources", [])
    if not isinstance(sources, list) or not all(
            isinstance(s, dict) and isinstance(s.get("url"), str) and isinstance(s.get("title", ""), str)
            for s in sources):
        raise TranscriptError(f"{where}.sources must be a list of {{title, url}} objects")
    return Turn(question=data["question"], answer=data["answer"],
                sources=[{"title": str(s.get("title") or s["url"]), "url": s["url"]} for s in sources])


def load_transcript(path: str | os.PathLike[str]) -> list[Turn]:
    """The conversation so far from a file written by ``helpbot ask --save``: earlier turns, then the last one."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TranscriptError(f"cannot read {os.fspath(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TranscriptError(f"{os.fspath(path)!r} is not UTF-8 text") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"{os.fspath(path)!r} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or data.get("helpbot_transcript") != TRANSCRIPT_VERSION:
        raise TranscriptError(f"{os.fspath(path)!r} is not a helpbot transcript (written by helpbot ask --save)")
    history = data.get("history", [])
    if not isinstance(history, list):
        raise TranscriptError("history must be a list of turns")
    turns = [_turn(item, f"history[{i}]") for i, item in enumerate(history)]
    turns.append(_turn(data, "transcript"))
    return turns[-MAX_TRANSCRIPT_TURNS:]


def save_transcript(path: str | os.PathLike[str], question: str, answer: Answer, history: Sequence[Turn]) -> None:
    """Question, answer, its sources and the turns before it: what ``--continue`` reads back."""
    data = {
        "helpbot_transcript": TRANSCRIPT_VERSION,
        "question": question,
        "answer": answer.text,
        "sources": [{"title": s["title"], "url": s["url"]} for s in answer.sources],
        "history": [{"question": t.question, "answer": t.answer, "sources": t.sources} for t in history],
        "degraded": answer.degraded,
    }
    try:
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TranscriptError(f"cannot write {os.fspath(path)!r}: {exc.strerror or exc}") from None
