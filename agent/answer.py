"""``helpbot answer``: from a :help: trigger to an answer in the Slack thread -- and never silence.

One run, and what happens when a step fails:

1. The trigger (``--event FILE`` | ``--url PERMALINK`` | ``--channel C --ts TS``) is parsed strictly by
   :mod:`agent.events`. Malformed: one line, exit 2, nothing posted. A deliberate ignore (another reaction, a
   channel outside the allowlist, a direct message, helpbot's own reaction): one log line, exit 0.
2. Slack: ``auth.test`` (who helpbot is), the channel (a group DM is ignored; a private channel named by hand
   through workflow_dispatch is refused unless it is in HELPBOT_CHANNELS), then the reacted message and its whole
   thread, with metadata. A message helpbot wrote, or one it already answered (helpbot's own message with
   ``helpbot_answer`` metadata names it; ``--force`` answers again), is ignored: exit 0. Nothing has been posted
   yet; a Slack failure here is one line and exit 1.
3. The question (:mod:`agent.thread`): the reacted message itself (a reply stays the reply); as context the
   thread around it (bounded), attached file names, and the contents of Slack message links in it, read through
   the Slack platform's tool so the DM / private-channel rules apply. Earlier helpbot answers in the same thread
   become conversation history (``Turn``), so a follow-up builds on them instead of starting over.
4. 👀 on the message and a placeholder 「調べています…」 in the thread, updated as rounds progress (throttled);
   the answer replaces it (extra parts as further replies) and ✅ replaces 👀. From the moment the thread is
   known, any failure leaves a notice in the thread (❌) and exits 1 -- or 2 for bad configuration. Once part of
   the answer is in the thread the notice is a new reply: it never overwrites the answer.

Everything posted passes :func:`agent.slack_format.guard_public` in one place (:class:`SlackOut`). In GitHub
Actions a job summary goes to ``$GITHUB_STEP_SUMMARY``; the trace (front and agent events, JSON lines, secrets
masked) to ``$HELPBOT_TRACE_FILE``.

Private channels: the summary, the trace and the Actions log are read by everyone with access to the repository,
a wider audience than the channel. For a private channel (or one whose privacy cannot be looked up) the summary
holds neither the question, the answer nor the channel's name; the agent's trace events keep their numbers and
names but lose their text (question, tool inputs, result previews); and in Actions (``GITHUB_ACTIONS=true``) the
answer is never printed -- a dry run prints ``dry run: answer withheld (private channel)``. Run locally to see it.
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

from .events import (
    DONE_REACTION,
    FAILED_REACTION,
    WORKING_REACTION,
    BadInput,
    Trigger,
    TriggerSettings,
    check_ignore,
    from_options,
    is_channel_id,
    is_dm_id,
    load_event,
)
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
    question_payload,
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

DEFAULT_PROGRESS_INTERVAL_S = 5.0
WITHHELD = "[withheld: private channel]"
# Agent trace fields kept as they are for a private channel: names and identifiers, never text from Slack or tools.
_PRIVATE_SAFE_FIELDS = frozenset({
    "event", "id", "name", "model", "stop", "stop_reason", "method", "callback", "reason", "tools", "tool_uses",
    "searches", "tags", "faq_tags", "tool_use_ids", "usage",
})

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


def _log(message: str) -> None:
    print(f"helpbot answer: {message}", file=sys.stderr, flush=True)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _slack_error_code(exc: BaseException) -> str:
    data = getattr(getattr(exc, "response", None), "data", None)
    return str(data.get("error") or "unknown error") if isinstance(data, dict) else "unknown error"


def _classify(exc: BaseException, *, debug: bool = False) -> tuple[str, int, bool]:
    """A failure -> (what to tell people, in one line; the exit code; re-raise it?)."""
    from slack_sdk.errors import SlackApiError

    from .model import ModelRequestError

    if isinstance(exc, ConfigError):
        return f"設定エラー: {exc}", 2, False
    if isinstance(exc, Terminated | KeyboardInterrupt):
        return "実行が中断されました", 130, False
    if isinstance(exc, ModelRequestError):
        return _one_line(f"AI モデルがリクエストを受け付けませんでした: {exc}"), 1, debug
    if isinstance(exc, SlackApiError):  # its text is several lines with the API URL: the error code is enough
        return f"Slack API エラー（{_slack_error_code(exc)}）", 1, debug
    if isinstance(exc, Exception):
        return _one_line(f"{type(exc).__name__}: {exc}"), 1, debug
    return type(exc).__name__, 1, True  # SystemExit and friends: noted, then on their way


def withhold_private(event: Mapping[str, Any]) -> dict[str, Any]:
    """An agent trace event for a private channel: numbers, flags and names stay; any text is withheld."""
    out: dict[str, Any] = {}
    for key, value in event.items():
        keep = key in _PRIVATE_SAFE_FIELDS or value is None or isinstance(value, bool | int | float)
        out[key] = value if keep else WITHHELD
    return out


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
        """Reactions are a courtesy: no failure of theirs (scope missing, already there, Slack down, a bug in the
        client) ever fails the run or hides the real outcome."""
        if self.web is None:
            return
        try:
            if remove:
                self.web.reactions_remove(channel=channel, timestamp=ts, name=name)
            else:
                self.web.reactions_add(channel=channel, timestamp=ts, name=name)
        except Exception as exc:
            code = _slack_error_code(exc) if hasattr(exc, "response") else _one_line(f"{type(exc).__name__}: {exc}")
            if code not in ("already_reacted", "no_reaction"):
                _log(f"could not {'remove' if remove else 'add'} :{name}: ({code})")
        else:
            self.trace.front("reaction", channel=channel, ts=ts, name=name, removed=remove)


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


# -- the run --------------------------------------------------------------------------------------------------------
@dataclass
class Target:
    """Where the answer goes (None: print only) and what it answers."""

    channel: str | None
    root: str | None  # thread to answer in
    question_ts: str | None  # the message the answer's metadata names
    where: str  # for the summary (no name for a private channel)
    caller: Caller
    public: bool = True  # may the question, the answer and the agent's text appear in summary, log and trace?
    placeholder: str | None = None  # a stale one to reuse
    dry_run: bool = False


@dataclass
class Delivery:
    """What is in the thread so far: the placeholder, and whether the answer has (partly) replaced it."""

    placeholder: str | None
    delivered: bool = False  # from now on a failure notice is a new reply: it must not overwrite the answer


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
        self.in_actions = env.get("GITHUB_ACTIONS") == "true"

    def _build_agent(self, caller: Caller, on_progress: Callable[[Progress], None],
                     on_event: Callable[[dict[str, Any]], None]) -> Agent:
        from .cli import build_agent

        return build_agent(self.env, caller=caller, on_progress=on_progress, on_event=on_event)

    def _summary(self, status: str, *, where: str | None = None, detail: str | None = None,
                 question: str | None = None, answer: Answer | None = None, link: str | None = None,
                 show_answer: bool = False) -> None:
        write_summary(self.env, summary_markdown(status=status, question=question, where=where, answer=answer,
                                                 link=link, detail=detail, show_answer=show_answer))

    # -- outcomes without an answer -------------------------------------------------------------------------
    def _rejected(self, why: str) -> int:
        _log(why)
        self.trace.front("rejected", reason=why)
        self._summary("rejected the trigger (nothing posted)", detail=why)
        return 2

    def _ignored(self, why: str, where: str | None = None) -> int:
        _log(f"ignored: {why}")
        self.trace.front("ignored", reason=why)
        self._summary("ignored (nothing posted)", where=where, detail=why)
        return 0

    def _config_error(self, exc: ConfigError) -> int:
        print(f"helpbot: configuration error: {exc}", file=sys.stderr)
        self.trace.front("config_error", error=str(exc))
        self._summary("configuration error", detail=str(exc))
        return 2

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self) -> int:
        try:
            return self._run()
        except (Terminated, KeyboardInterrupt):  # before the thread was known (_answer handles it after)
            _log("interrupted")
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
        except FrontError as exc:
            _log(str(exc))
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

    @staticmethod
    def _is_public(info: Mapping[str, Any]) -> bool:
        """Public only when Slack said so: a channel whose info could not be read counts as private."""
        from mcp_lib.platforms import slack

        return "is_private" in info and not (slack.is_dm(info) or slack.is_private(info))

    def _reacted(self, trigger: Trigger, settings: TriggerSettings, dry_run: bool) -> int:
        from mcp_lib.platforms import slack

        assert trigger.channel and trigger.ts
        channel, ts = trigger.channel, trigger.ts
        clients, web, variable = self._slack(need_bot=not dry_run)
        me = Me(None, None, settings.bot_user_id)
        if clients.bot is not None:
            who = slack_call(web, "auth.test", variable)
            me = Me(who.get("user_id"), who.get("bot_id"), settings.bot_user_id)
        if trigger.user and trigger.user in (me.user_id, me.configured_user_id):
            return self._ignored("the reaction was added by helpbot itself", channel)
        caller = Caller(user=trigger.user, answer_channel=channel)
        registry = self._registry(clients, caller)
        ctx = registry.context("slack")
        info = lookup_channel(ctx, channel)
        if slack.is_dm(info):  # a group DM (a DM is already ignored by its D id): no history scope, no answers
            return self._ignored(f"{channel} is a group DM; helpbot answers in channels only", channel)
        public = self._is_public(info)
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
        target = Target(channel=channel, root=thread.root, question_ts=ts, caller=caller,
                        where=f"{where} message {ts}", public=public, placeholder=stale_placeholder(thread, ts, me),
                        dry_run=dry_run)
        out = SlackOut(None if dry_run else clients.bot, mask_personal=self.mask_personal, trace=self.trace)

        def question() -> Asked:
            history = earlier_turns(thread, ts, me, lambda m: slack.plain(ctx, str(m.get("text") or "")))
            parts = build_question(ctx, registry, thread, me=me)
            self.trace.front("question", chars=len(parts.text), files=len(parts.files), links=len(parts.links),
                             context=len(parts.around), history_turns=len(history))
            return parts.question(), parts.context(), history

        return self._answer(target, out, question)

    def _free_question(self, text: str, dry_run: bool) -> int:
        """workflow_dispatch ``question``: answered in HELPBOT_QUESTION_CHANNEL when set, else printed."""
        channel = env_str(self.env, "HELPBOT_QUESTION_CHANNEL")
        if channel and (not is_channel_id(channel) or is_dm_id(channel)):
            raise ConfigError("HELPBOT_QUESTION_CHANNEL", f"{channel!r} is not a channel ID (like C0123456789)")
        if not channel or dry_run:
            target = Target(channel=None, root=None, question_ts=None, where="(printed: no channel)",
                            caller=Caller(answer_channel=None), dry_run=dry_run)
            return self._answer(target, SlackOut(None, mask_personal=self.mask_personal, trace=self.trace),
                                lambda: (text, "", []), show_answer=True)
        from slack_sdk.errors import SlackApiError

        clients, _, _ = self._slack(need_bot=True)
        caller = Caller(answer_channel=channel)
        public = self._is_public(lookup_channel(self._registry(clients, caller).context("slack"), channel))
        out = SlackOut(clients.bot, mask_personal=self.mask_personal, trace=self.trace)
        try:
            root = out.post(channel, question_payload(text, env_str(self.env, "GITHUB_ACTOR")))
        except SlackApiError as exc:
            raise FrontError(f"cannot post the question to {channel}: {_slack_error_code(exc)}") from None
        assert root is not None
        target = Target(channel=channel, root=root, question_ts=root, caller=caller, public=public,
                        where=f"{channel} (question channel)" if public else f"private channel {channel} "
                                                                             "(question channel)")
        return self._answer(target, out, lambda: (text, "", []), show_answer=True)

    # -- answering, with progress and the failure notice ---------------------------------------------------------
    def _answer(self, target: Target, out: SlackOut, question: Callable[[], Asked], *,
                show_answer: bool = False) -> int:
        """Show that work started, run the agent, deliver -- or leave a failure notice. Returns the exit code."""
        state = Delivery(target.placeholder)
        posting = out.web is not None and target.channel is not None and target.root is not None
        throttle = ProgressThrottle(self.clock, self.interval)
        asked: str | None = None

        def on_progress(progress: Progress) -> None:
            _log(progress.describe())
            if not posting or state.placeholder is None:
                return
            assert target.channel
            tools = progress.tools if progress.phase in ("tools", "degraded") else []
            payload = progress_payload(max(1, progress.round), progress.max_rounds, tools)
            if throttle.due(payload["text"]):
                out.update(target.channel, state.placeholder,
                           {**payload, "metadata": self._progress_metadata(target)})

        def on_event(event: dict[str, Any]) -> None:
            self.trace.write(event if target.public else withhold_private(event))

        try:
            if posting:  # first, so people see at once that helpbot is on it
                assert target.channel and target.root and target.question_ts
                out.react(target.channel, target.question_ts, WORKING_REACTION)
                if state.placeholder is not None:  # an earlier run left its notice (and ❌): this run takes over
                    out.react(target.channel, target.question_ts, FAILED_REACTION, remove=True)
                state.placeholder = self._placeholder(out, target, state.placeholder)
                throttle.restart()
            asked, context, history = question()
            agent = self.make_agent(target.caller, on_progress, on_event)
            answer = agent.run(asked, history, context=context)
            link = self._deliver(out, target, state, answer) if posting else None
        except BaseException as exc:
            what, code, reraise = _classify(exc, debug=bool(self.env.get("HELPBOT_DEBUG")))
            self.trace.front("failure", error=what)
            if posting:
                self._notify_failure(out, target, state, what)
            self._summary("failed", where=target.where, detail=what, question=asked if target.public else None)
            if reraise:
                raise
            if code == 2:
                print(f"helpbot: configuration error: {exc}", file=sys.stderr)
            elif code == 130:
                _log("interrupted")
            else:
                _log(f"failed: {what}")
            return code
        self.trace.front("done", rounds=answer.rounds, degraded=answer.degraded, stop=answer.stop, link=link)
        self._summary("answered" if posting else "answered (not posted)", where=target.where,
                      question=asked if target.public else None, answer=answer, link=link,
                      show_answer=target.public and (show_answer or not posting))
        self._print(answer, link, target)
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

    def _deliver(self, out: SlackOut, target: Target, state: Delivery, answer: Answer) -> str | None:
        """The answer replaces the placeholder; further parts follow in the thread; ✅ replaces 👀."""
        from slack_sdk.errors import SlackApiError

        assert target.channel and target.root and target.question_ts
        payloads = answer_payloads(answer.to_json(), channel=target.channel, question_ts=target.question_ts,
                                   run_link=self.run_link, mask_personal=self.mask_personal)
        first = None
        if state.placeholder is not None:
            try:
                out.update(target.channel, state.placeholder, payloads[0])
                first = state.placeholder
            except SlackApiError as exc:
                _log(f"could not replace the placeholder ({_slack_error_code(exc)}); posting the answer anew")
        if first is None:
            first = out.post(target.channel, payloads[0], thread_ts=target.root)
        state.delivered = True
        for payload in payloads[1:]:
            out.post(target.channel, payload, thread_ts=target.root)
        out.react(target.channel, target.question_ts, WORKING_REACTION, remove=True)
        out.react(target.channel, target.question_ts, DONE_REACTION)
        assert out.web is not None and first is not None
        try:
            return str(out.web.chat_getPermalink(channel=target.channel, message_ts=first)["permalink"])
        except (SlackApiError, OSError, KeyError):
            return None

    def _notify_failure(self, out: SlackOut, target: Target, state: Delivery, what: str) -> None:
        """Never silence: the notice replaces the placeholder -- or, once (part of) the answer is in the thread, is
        a reply of its own -- and ❌ replaces 👀. Nothing here may raise: the outcome is already decided."""
        assert target.channel and target.root
        payload = failure_payload(what, self.run_link, channel=target.channel, question_ts=target.question_ts)
        replaced = False
        if state.placeholder is not None and not state.delivered:
            try:
                out.update(target.channel, state.placeholder, payload)
                replaced = True
            except Exception:
                pass  # the placeholder is gone: post the notice instead
        if not replaced:
            try:
                out.post(target.channel, payload, thread_ts=target.root)
            except Exception as exc:  # Slack itself is down: the log and the summary are all that is left
                _log(f"could not post the failure notice: {_classify(exc)[0]}")
        if target.question_ts:
            out.react(target.channel, target.question_ts, WORKING_REACTION, remove=True)
            out.react(target.channel, target.question_ts, FAILED_REACTION)

    def _print(self, answer: Answer, link: str | None, target: Target) -> None:
        """The answer on stdout (always with --json, else when it was not posted) -- except in Actions for a private
        channel, whose answer must not reach the run log."""
        wanted = self.options.json or link is None
        if wanted and not target.public and self.in_actions:
            _log("dry run: answer withheld (private channel)" if target.dry_run
                 else "answer withheld from the log (private channel)")
        elif self.options.json:
            print(json.dumps({**answer.to_json(), "permalink": link}, ensure_ascii=False, indent=2))
        elif link is None:
            print_answer(answer)
        if link:
            _log(f"answered: {link}")
        elif target.dry_run:
            _log("dry run: nothing was posted")
