"""``helpbot answer``: from a :help: trigger to an answer in the Slack thread -- and never silence.

This module is the flow: the options, :func:`run`, and :class:`Front`, which decides what a trigger leads to.
What the flow reads and writes lives next door: :mod:`agent.slack.trigger` (the trigger), :mod:`agent.slack.thread` (the
thread and the question), :mod:`agent.slack.post` (every write to Slack), :mod:`agent.report` (summary, trace,
printing).

One run (:meth:`Front.run`), and what happens when a step fails:

1. The trigger (``--event FILE`` | ``--url PERMALINK`` | ``--channel C --ts TS``) is parsed strictly. Malformed:
   one line, exit 2, nothing posted. A deliberate ignore (another reaction, a channel outside the allowlist, a
   direct message, helpbot's own reaction): one log line, exit 0. A free question (workflow_dispatch
   ``question``, :meth:`Front._free_question`) is posted to HELPBOT_QUESTION_CHANNEL and answered in its thread
   from step 4 on -- or, without that channel, answered and printed.
2. Slack (:meth:`Front._reacted`): who helpbot is (``auth.test``), the channel (a group DM is ignored; a private
   channel named by hand through workflow_dispatch is refused unless HELPBOT_CHANNELS lists it), then the reacted
   message and its whole thread. A message helpbot wrote, or one it already answered (``--force`` answers again),
   is ignored: exit 0. Nothing has been posted yet; a Slack failure here is one line and exit 1.
3. The question (:mod:`agent.slack.thread`): the reacted message itself; the thread around it, its files and the
   messages it links to as context; helpbot's earlier answers in the thread as history, so that a follow-up
   builds on them.
4. The answer (:meth:`Front._answer`, :class:`agent.slack.post.ThreadReply`): 👀 and a placeholder
   「調べています…」 showing progress; the answer replaces it and ✅ replaces 👀. A dry run posts nothing. From
   the moment the thread is known, any failure leaves a notice in the thread (❌) -- never over the answer -- and
   exits 1, or 2 for bad configuration, or 130 when cancelled (SIGTERM raises :class:`Terminated`;
   :func:`_classify` words every failure).

Everything posted passes :func:`agent.slack.blocks.guard_public` in one place (:class:`agent.slack.post.SlackOut`).
In GitHub Actions a job summary goes to ``$GITHUB_STEP_SUMMARY``; the trace (front and agent events, JSON lines,
secrets masked) to ``$HELPBOT_TRACE_FILE``.

Private channels: the summary, the trace and the Actions log are read by everyone with access to the repository,
a wider audience than the channel. For a private channel (or one whose privacy cannot be looked up) the summary
holds neither the question, the answer nor the channel's name; the agent's trace events keep their numbers and
names but lose their text (:func:`withhold_private`); and in Actions (``GITHUB_ACTIONS=true``) the answer is
never printed -- a dry run prints ``dry run: answer withheld (private channel)``. Run locally to see it.
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

from agent.errors import BadInput, ConfigError, RunFailed, Terminated, exit_code
from agent.report import Trace, print_answer, summary_markdown, write_summary
from agent.slack.blocks import find_answer, mask_personal_from_env, run_url
from agent.slack.post import ProgressThrottle, SlackOut, ThreadReply, describe, log, one_line
from agent.slack.thread import (
    answerable,
    build_question,
    earlier_turns,
    fetch_thread,
    is_helpbot,
    is_public,
    lookup_channel,
    stale_placeholder,
    who_am_i,
)
from agent.slack.trigger import (
    Trigger,
    TriggerSettings,
    check_ignore,
    from_options,
    is_channel_id,
    is_dm_id,
    load_event,
)
from mcp_lib import Caller
from mcp_lib.config import env_float, env_str

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from agent.core.loop import Agent
    from agent.core.run import Answer, Progress, Turn
    from mcp_lib import Registry
    from mcp_lib.platforms.slack import SlackClients

DEFAULT_PROGRESS_INTERVAL_S = 5.0

AgentFactory = Callable[[Caller, Callable[["Progress"], None], Callable[[dict[str, Any]], None]], "Agent"]
Asked = tuple[str, str, list["Turn"]]  # the question, its context, the conversation before it


# -- the command line -----------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--event", metavar="FILE", help="a trigger: a GitHub event JSON ($GITHUB_EVENT_PATH), a "
                                                       "bare payload or a Slack reaction_added envelope")
    where.add_argument("--url", metavar="PERMALINK", help="answer this Slack message (its link)")
    where.add_argument("--channel", metavar="C", help="answer the message in this channel (with --ts)")
    parser.add_argument("--ts", metavar="TS", help="the message's timestamp (with --channel)")
    parser.add_argument("--dry-run", action="store_true", help="print the answer; post nothing to Slack (in "
                                                               "Actions, not for a private channel)")
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


# -- the run --------------------------------------------------------------------------------------------------------
@dataclass
class Target:
    """Where the answer goes, and who may read what of it."""

    where: str  # for the summary (no name for a private channel)
    caller: Caller
    reply: ThreadReply | None = None  # helpbot's messages in the thread; None: nothing is posted
    public: bool = True  # may the question, the answer and the agent's text appear in summary, log and trace?
    dry_run: bool = False


class Front:
    """Decides what a trigger leads to -- ignored, rejected or answered -- and reports every outcome."""

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
        self.in_actions = env.get("GITHUB_ACTIONS") == "true"

    # -- the run ----------------------------------------------------------------------------------------------------
    def run(self) -> int:
        try:
            return self._run()
        except (Terminated, KeyboardInterrupt):  # before the thread was known (_answer handles it after)
            log("interrupted")
            self.trace.front("interrupted")
            self._summary("interrupted (nothing posted)")
            return 130

    def _run(self) -> int:
        try:
            trigger = self._trigger()
        except BadInput as exc:
            return self._rejected(str(exc))
        self.trace.front("trigger", source=trigger.source, channel=trigger.channel, ts=trigger.ts,
                         user=trigger.user, reaction=trigger.reaction, question=bool(trigger.question))
        try:
            settings = TriggerSettings.from_env(self.env)
            ignore = check_ignore(trigger, settings)
            if ignore:
                return self._ignored(ignore.reason, where=trigger.channel)
            dry_run = self.options.dry_run or trigger.dry_run  # workflow_dispatch's dry_run input counts too
            if trigger.question:
                return self._free_question(trigger.question, dry_run)
            return self._reacted(trigger, settings, dry_run)
        except ConfigError as exc:
            return self._config_error(exc)
        except RunFailed as exc:
            log(str(exc))
            self.trace.front("error", error=str(exc))
            self._summary("failed (nothing posted)", where=trigger.channel, detail=str(exc))
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

    def _reacted(self, trigger: Trigger, settings: TriggerSettings, dry_run: bool) -> int:
        from mcp_lib.platforms import slack

        assert trigger.channel and trigger.ts
        channel, ts = trigger.channel, trigger.ts
        clients, web, variable = self._slack(need_bot=not dry_run)
        me = who_am_i(clients.bot, settings.bot_user_id)
        if trigger.user and trigger.user in (me.user_id, me.configured_user_id):
            return self._ignored("the reaction was added by helpbot itself", channel)
        caller = Caller(user=trigger.user, answer_channel=channel)
        registry = self._registry(clients, caller)
        ctx = registry.context("slack")
        info = lookup_channel(ctx, channel)
        if slack.is_dm(info):  # a group DM (a DM is already ignored by its D id): no history scope, no answers
            return self._ignored(f"{channel} is a group DM; helpbot answers in channels only", channel)
        public = is_public(info)
        if trigger.source == "workflow_dispatch" and not public and channel not in settings.channels:
            return self._rejected(f"{channel} is a private channel (or its privacy cannot be read); a message link "
                                  "given by hand is answered there only when HELPBOT_CHANNELS lists it")
        thread = fetch_thread(web, variable, channel, ts)
        message = thread.target
        if is_helpbot(message, me):
            return self._ignored("the message was written by helpbot itself", channel)
        if not answerable(message):
            return self._ignored(f"message {ts} has nothing to answer ({message.get('subtype') or 'no text'})",
                                 channel)
        if not self.options.force:
            found = find_answer(thread.messages, ts, channel, is_ours=me.wrote)
            if found is not None:
                return self._ignored(f"message {ts} was already answered (answer {found.get('ts')}; --force "
                                     "answers again)", channel)
        where = f"#{info.get('name') or channel} ({channel})" if public else f"private channel {channel}"
        reply = self._reply(None if dry_run else clients.bot, channel, thread.root, ts,
                            stale=stale_placeholder(thread, ts, me))
        target = Target(where=f"{where} message {ts}", caller=caller, reply=reply, public=public, dry_run=dry_run)

        def question() -> Asked:
            history = earlier_turns(thread, ts, me, lambda m: slack.plain(ctx, str(m.get("text") or "")))
            parts = build_question(ctx, registry, thread, me=me)
            self.trace.front("question", chars=len(parts.text), files=len(parts.files), links=len(parts.links),
                             context=len(parts.around), history_turns=len(history))
            return parts.question(), parts.context(), history

        return self._answer(target, question)

    def _free_question(self, text: str, dry_run: bool) -> int:
        """workflow_dispatch ``question``: answered in HELPBOT_QUESTION_CHANNEL when set, else printed."""
        channel = env_str(self.env, "HELPBOT_QUESTION_CHANNEL")
        if channel and (not is_channel_id(channel) or is_dm_id(channel)):
            raise ConfigError("HELPBOT_QUESTION_CHANNEL", f"{channel!r} is not a channel ID (like C0123456789)")
        if not channel or dry_run:
            target = Target(where="(printed: no channel)", caller=Caller(answer_channel=None), dry_run=dry_run)
            return self._answer(target, lambda: (text, "", []), show_answer=True)
        clients, _, _ = self._slack(need_bot=True)
        assert clients.bot is not None
        caller = Caller(answer_channel=channel)
        public = is_public(lookup_channel(self._registry(clients, caller).context("slack"), channel))
        out = SlackOut(clients.bot, mask_personal=self.mask_personal, trace=self.trace)
        root = out.post_question(channel, text, env_str(self.env, "GITHUB_ACTOR"))
        where = f"{channel} (question channel)" if public else f"private channel {channel} (question channel)"
        target = Target(where=where, caller=caller, reply=self._reply(clients.bot, channel, root, root),
                        public=public)
        return self._answer(target, lambda: (text, "", []), show_answer=True)

    # -- answering, with progress and the failure notice ------------------------------------------------------------
    def _answer(self, target: Target, question: Callable[[], Asked], *, show_answer: bool = False) -> int:
        """Show that work started, run the agent, deliver -- or leave a failure notice. Returns the exit code."""
        reply = target.reply
        asked: str | None = None

        def on_progress(progress: Progress) -> None:
            log(progress.describe())
            if reply is not None:
                reply.progress(progress)

        def on_event(event: dict[str, Any]) -> None:
            self.trace.write(event if target.public else withhold_private(event))

        try:
            if reply is not None:
                reply.start()
            asked, context, history = question()
            agent = self.make_agent(target.caller, on_progress, on_event)
            answer = agent.run(asked, history, context=context)
            link = reply.deliver(answer) if reply is not None else None
        except BaseException as exc:
            what, code, reraise = _classify(exc, debug=bool(self.env.get("HELPBOT_DEBUG")))
            self.trace.front("failure", error=what)
            if reply is not None:
                reply.fail(what)
            self._summary("failed", where=target.where, detail=what, question=asked if target.public else None)
            if reraise:
                raise
            if code == 2:
                print(f"helpbot: configuration error: {exc}", file=sys.stderr)
            elif code == 130:
                log("interrupted")
            else:
                log(f"failed: {what}")
            return code
        self.trace.front("done", rounds=answer.rounds, degraded=answer.degraded, stop=answer.stop, link=link)
        self._summary("answered" if reply is not None else "answered (not posted)", where=target.where,
                      question=asked if target.public else None, answer=answer, link=link,
                      show_answer=target.public and (show_answer or reply is None))
        self._print(answer, link, target)
        return 0

    def _print(self, answer: Answer, link: str | None, target: Target) -> None:
        """The answer on stdout (always with --json, else when it was not posted) -- except in Actions for a private
        channel, whose answer must not reach the run log."""
        wanted = self.options.json or link is None
        if wanted and not target.public and self.in_actions:
            log("dry run: answer withheld (private channel)" if target.dry_run
                else "answer withheld from the log (private channel)")
        elif self.options.json:
            print(json.dumps({**answer.to_json(), "permalink": link}, ensure_ascii=False, indent=2))
        elif link is None:
            print_answer(answer)
        if link:
            log(f"answered: {link}")
        elif target.dry_run:
            log("dry run: nothing was posted")

    # -- outcomes without an answer ---------------------------------------------------------------------------------
    def _rejected(self, why: str) -> int:
        log(why)
        self.trace.front("rejected", reason=why)
        self._summary("rejected the trigger (nothing posted)", detail=why)
        return 2

    def _ignored(self, why: str, where: str | None = None) -> int:
        log(f"ignored: {why}")
        self.trace.front("ignored", reason=why)
        self._summary("ignored (nothing posted)", where=where, detail=why)
        return 0

    def _config_error(self, exc: ConfigError) -> int:
        print(f"helpbot: configuration error: {exc}", file=sys.stderr)
        self.trace.front("config_error", error=str(exc))
        self._summary("configuration error", detail=str(exc))
        return 2

    def _summary(self, status: str, *, where: str | None = None, detail: str | None = None,
                 question: str | None = None, answer: Answer | None = None, link: str | None = None,
                 show_answer: bool = False) -> None:
        write_summary(self.env, summary_markdown(status=status, question=question, where=where, answer=answer,
                                                 link=link, detail=detail, show_answer=show_answer))

    # -- clients ----------------------------------------------------------------------------------------------------
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

    def _reply(self, web: WebClient | None, channel: str, root: str, question_ts: str, *,
               stale: str | None = None) -> ThreadReply | None:
        """helpbot's side of the thread (``stale``: a placeholder an earlier run left); None without a client."""
        if web is None:
            return None
        out = SlackOut(web, mask_personal=self.mask_personal, trace=self.trace)
        return ThreadReply(out, channel=channel, root=root, question_ts=question_ts, stale=stale,
                           throttle=ProgressThrottle(self.clock, self.interval), run_link=self.run_link)

    def _build_agent(self, caller: Caller, on_progress: Callable[[Progress], None],
                     on_event: Callable[[dict[str, Any]], None]) -> Agent:
        from agent.build import build_agent

        return build_agent(self.env, caller=caller, on_progress=on_progress, on_event=on_event)


# -- failures and private channels ----------------------------------------------------------------------------------
@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` once; a second one (while the notice is posted) is ignored."""
    fired = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
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


def _classify(exc: BaseException, *, debug: bool = False) -> tuple[str, int, bool]:
    """A failure -> (what to tell people, in one line; the exit code; re-raise it?)."""
    from agent.core.model import ModelRequestError

    code = exit_code(exc)
    if isinstance(exc, ConfigError):
        return f"設定エラー: {exc}", code, False
    if isinstance(exc, Terminated | KeyboardInterrupt):
        return "実行が中断されました", code, False
    if isinstance(exc, ModelRequestError):
        return one_line(f"AI モデルがリクエストを受け付けませんでした: {exc}"), code, debug
    if isinstance(exc, Exception):
        return describe(exc), code, debug
    return type(exc).__name__, code, True  # SystemExit and friends: noted, then on their way


WITHHELD = "[withheld: private channel]"
# Agent trace fields kept as they are for a private channel: names and identifiers, never text from Slack or tools.
_PRIVATE_SAFE_FIELDS = frozenset({
    "event", "id", "name", "model", "stop", "stop_reason", "method", "callback", "reason", "tools", "tool_uses",
    "searches", "tags", "faq_tags", "tool_use_ids", "usage",
})


def withhold_private(event: Mapping[str, Any]) -> dict[str, Any]:
    """An agent trace event for a private channel: numbers, flags and names stay; any text is withheld."""
    out: dict[str, Any] = {}
    for key, value in event.items():
        keep = key in _PRIVATE_SAFE_FIELDS or value is None or isinstance(value, bool | int | float)
        out[key] = value if keep else WITHHELD
    return out
