"""``helpbot answer``: from a :help: trigger to an answer in the Slack thread -- and never silence.

One run, and what happens when a step fails:

1. The trigger (``--event FILE`` | ``--url PERMALINK`` | ``--channel C --ts TS``) is parsed strictly by
   :mod:`agent.events`. Malformed: one line, exit 2, nothing posted. A deliberate ignore (another reaction, a
   channel outside the allowlist, helpbot's own reaction): one log line, exit 0.
2. Slack: ``auth.test`` (who helpbot is), then the reacted message and its whole thread, with metadata. A
   message helpbot wrote, or one it already answered (its ``helpbot_answer`` metadata names the message;
   ``--force`` answers again), is ignored: exit 0. Nothing has been posted yet; a Slack failure here is one
   line and exit 1.
3. The question (:mod:`agent.thread`): the reacted message itself (a reply stays the reply); as context the
   thread around it (bounded), attached file names, and the contents of Slack message links in it, read through
   the Slack platform's tool so the DM / private-channel rules apply. Earlier helpbot answers in the same thread
   become conversation history (``Turn``), so a follow-up builds on them instead of starting over.
4. 👀 on the message and a placeholder 「調べています…」 in the thread, updated as rounds progress (throttled);
   the answer replaces it (extra parts as further replies) and ✅ replaces 👀. From the moment the thread is
   known, any failure leaves a notice in the thread (❌) and exits 1 -- or 2 for bad configuration.

Everything posted passes :func:`agent.slack_format.guard_public` in one place (:class:`SlackOut`). In GitHub
Actions a job summary goes to ``$GITHUB_STEP_SUMMARY``; the trace (front and agent events, JSON lines, secrets
masked) to ``$HELPBOT_TRACE_FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_lib import Caller
from mcp_lib.config import ConfigError, env_float, env_str

from .events import CHANNEL_RE, BadInput, Trigger, TriggerSettings, check_ignore, from_options, load_event
from .report import Trace, print_answer, summary_markdown, write_summary
from .slack_format import (
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
from .thread import (
    PROGRESS_EVENT_TYPE,
    FrontError,
    Me,
    answerable,
    build_question,
    earlier_turns,
    fetch_thread,
    is_helpbot,
    lookup_channel,
    slack_call,
    stale_placeholder,
)

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from mcp_lib import Registry
    from mcp_lib.platforms.slack import SlackClients

    from .loop import Agent, Answer, Progress, Turn

WORKING, DONE, FAILED = "eyes", "white_check_mark", "x"
SUMMARY_QUESTION_CHARS = 300
DEFAULT_PROGRESS_INTERVAL_S = 5.0

AgentFactory = Callable[[Caller, Callable[["Progress"], None], Callable[[dict[str, Any]], None]], "Agent"]
Asked = tuple[str, str, list["Turn"]]  # the question, its context, the conversation before it


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
        from mcp_lib.platforms import slack

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
        if not answerable(message):
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
        info = lookup_channel(ctx, channel)
        target = Target(channel=channel, root=thread.root, question_ts=ts, caller=caller,
                        where=f"#{info.get('name') or channel} ({channel}) message {ts}",
                        public=not (slack.is_dm(info) or slack.is_private(info)),
                        placeholder=stale_placeholder(thread, ts))
        out = SlackOut(None if self.dry_run else clients.bot, mask_personal=self.mask_personal, trace=self.trace)

        def question() -> Asked:
            history = earlier_turns(thread, ts, me, settings.bot_user_id,
                                    lambda m: slack.plain(ctx, str(m.get("text") or "")))
            parts = build_question(ctx, registry, thread, me=me, bot_user_id=settings.bot_user_id)
            self.trace.front("question", chars=len(parts.text), files=len(parts.files), links=len(parts.links),
                             context=len(parts.around), history_turns=len(history))
            return parts.question(), parts.context(), history

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
                                lambda: (text, "", []), show_answer=True)
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
        return self._answer(target, out, lambda: (text, "", []), show_answer=True)

    # -- answering, with progress and the failure notice ---------------------------------------------------------
    def _answer(self, target: Target, out: SlackOut, question: Callable[[], Asked], *,
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
            asked, context, history = question()
            agent = self.make_agent(target.caller, on_progress, self.trace.write)
            answer = agent.run(asked, history, context=context)
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
        if self.options.json:
            print(json.dumps({**answer.to_json(), "permalink": link}, ensure_ascii=False, indent=2))
        elif link is None:
            print_answer(answer)
        if link:
            _log(f"answered: {link}")
        elif self.dry_run:
            _log("dry run: nothing was posted")
