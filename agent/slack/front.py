"""``helpbot answer``: from a :help: trigger to an answer in the Slack thread -- and never silence. :class:`Front`
decides what a trigger leads to and runs the agent; a dry run posts nothing."""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from agent import guard
from agent.build import build_agent, check_configuration
from agent.config import env_bool, env_float
from agent.errors import BadInput, ConfigError, RunFailed, Terminated, sigterm_raises
from agent.guard import Guard, host_of
from agent.report import Trace, progress_line
from agent.slack import admission, markers
from agent.slack.admission import TriggerSettings, check_ignore
from agent.slack.blocks import CONFIG_NOTICE, run_url
from agent.slack.handle import Slack, is_public
from agent.slack.outcome import Outcomes, Target, classify
from agent.slack.post import SlackOut, log
from agent.slack.reply import ProgressThrottle, ThreadReply
from agent.slack.stream import AnswerStream
from agent.slack.thread import answerable, build_question, earlier_turns, mention_of, mentions_me
from agent.slack.trigger import Trigger, from_options, load_event
from mcp_lib import ids
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import env_str
from mcp_lib.logs import debugging

if TYPE_CHECKING:
    from agent.core.loop import Agent
    from agent.core.run import Progress, Turn
    from mcp_lib import Registry


AgentFactory = Callable[["Registry", Callable[["Progress"], None], Callable[[dict[str, Any]], None]], "Agent"]


class Asked(NamedTuple):
    """What the agent is asked: the question, its context, the conversation before it, the attachments' blocks."""

    question: str
    context: str = ""
    history: Sequence[Turn] = ()
    attachments: Sequence[dict[str, Any]] = ()


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
    return run(Options(**{f.name: getattr(args, f.name) for f in fields(Options)}), dict(os.environ))


def run(options: Options, env: Mapping[str, str], *, make_agent: AgentFactory | None = None,
        clock: Clock = SYSTEM_CLOCK) -> int:
    """The whole command; returns the exit code. ``make_agent`` and ``clock`` are the test seams."""
    front = Front(options, env, make_agent=make_agent, clock=clock)
    with guard.installed(Guard.from_env(env)), sigterm_raises():
        return front.run()


class Front:
    def __init__(self, options: Options, env: Mapping[str, str], *, make_agent: AgentFactory | None, clock: Clock):
        self.options = options
        self.env = dict(env)
        self.clock = clock
        self.trace = Trace(env_str(env, "HELPBOT_TRACE_FILE"), clock)
        self.make_agent = make_agent or (lambda registry, on_progress, on_event: build_agent(
            self.env, registry=registry, on_progress=on_progress, on_event=on_event))
        self.run_link, self.buttons = run_url(env), env_bool(env, "HELPBOT_FEEDBACK_BUTTONS")
        self.interval = env_float(env, "HELPBOT_PROGRESS_INTERVAL_S")
        self.tell = Outcomes(self.env, self.trace, json_output=options.json)
        # this run's name in its placeholder's marker, for people (the claim goes by ts)
        self.run_id = env_str(env, "GITHUB_RUN_ID") or uuid.uuid4().hex[:12]
        self._slack_out: SlackOut | None = None

    def run(self) -> int:
        try:
            return self._run()
        except (Terminated, KeyboardInterrupt):  # before the thread was known (_answer handles it after)
            return self.tell.interrupted()

    def _run(self) -> int:
        try:
            trigger = trigger_of(self.options)
        except BadInput as exc:
            return self.tell.rejected(str(exc))
        self.trace.front("trigger", source=trigger.source, channel=trigger.channel, ts=trigger.ts,
                         user=trigger.user, reaction=trigger.reaction, mention=trigger.mention,
                         question=bool(trigger.question))
        if trigger.ignored:  # an outside payload grows keys over time: said, and never a reason to drop the question
            log(f"ignored unknown key(s) in the payload: {', '.join(trigger.ignored)}")
        dry_run = self.options.dry_run or trigger.dry_run  # workflow_dispatch's dry_run input counts too
        try:
            settings = TriggerSettings.from_env(self.env)
            check_configuration(self.env)  # all of it before anything is read or posted: exit 2, nothing posted
            if ignore := check_ignore(trigger, settings):
                return self.tell.ignored(ignore.reason, where=trigger.channel)
            if trigger.question:
                return self._free_question(trigger.question, settings, dry_run)
            return self._reacted(trigger, settings, dry_run)
        except ConfigError as exc:
            if not dry_run:
                self._tell_asker(trigger, exc)
            return self.tell.config_error(exc)
        except RunFailed as exc:
            return self.tell.failed_before_reply(str(exc), trigger.channel)

    def _reacted(self, trigger: Trigger, settings: TriggerSettings, dry_run: bool) -> int:
        from mcp_lib.platforms.slack import names_ahead

        assert trigger.channel and trigger.ts
        channel, ts = trigger.channel, trigger.ts
        slack = Slack(self.env, answer_channel=channel, need_bot=not dry_run, clock=self.clock,
                      configured_user_id=settings.bot_user_id)
        slack.read_ahead(channel, ts, thread_if=lambda info: admission.unread(trigger, info, settings) is None)
        if slack.me.is_me(trigger.user):
            return self.tell.ignored(f"the {'mention' if trigger.mention else 'reaction'} was added by helpbot itself",
                                 channel)
        info = slack.channel(channel)
        if (unread := admission.unread(trigger, info, settings)) is not None:
            return (self.tell.rejected(unread.reason) if unread.verdict == "refuse"
                    else self.tell.ignored(unread.reason, channel))
        public = is_public(info)
        thread = slack.thread(channel, ts)
        message = thread.target
        if slack.me.wrote(message):
            return self.tell.ignored("the message was written by helpbot itself", channel)
        if trigger.mention and not mentions_me(message, slack.me):
            return self.tell.ignored(f"message {ts} does not mention helpbot", channel)
        decision = admission.decide(slack, trigger, message, info, settings, env_str(self.env, "GITHUB_ACTOR"))
        if decision.verdict != "answer":  # a person is told, ephemerally and before any 👀; the run is ignored
            if decision.notify and not dry_run and slack.writer is not None:
                self._out(slack).ephemeral(channel, decision.notify, admission.NOTICE, thread_ts=thread.root)
            return self.tell.ignored(decision.reason, channel)
        slack.registry = slack.registry.narrowed(decision.sources)  # the question's links read it too
        if not answerable(message, mention_of(slack.me) if trigger.mention and ts == thread.root else None):
            return self.tell.ignored(f"message {ts} has nothing to answer ({message.get('subtype') or 'no text'})",
                                 channel)
        found = None if self.options.force else markers.find_answer(thread.messages, ts, channel, me=slack.me)
        if found is not None:
            return self.tell.ignored(f"message {ts} was already answered (answer {found.get('ts')}; --force answers "
                                     "again)", channel)
        names_ahead(slack.ctx, thread.messages)  # the question's names come while the placeholder and 👀 are posted
        where = f"#{info.get('name') or channel} ({channel})" if public else f"private channel {channel}"
        reply = None if dry_run else self._reply(slack, channel, thread.root, ts,
                                                 reread=lambda: slack.thread(channel, ts).messages,
                                                 asker=trigger.user or message.get("user"))
        target = Target(where=f"{where} message {ts}", slack=slack, reply=reply, public=public, dry_run=dry_run)

        def question() -> Asked:
            history = earlier_turns(thread, ts, slack.me, slack.plain)
            parts = build_question(slack, thread, mention=trigger.mention)
            self.trace.front("question", chars=len(parts.text), files=len(parts.files), links=len(parts.links),
                             context=len(parts.around), history_turns=len(history),
                             media_blocks=sum(b.get("type") != "text" for b in parts.attachments.blocks))
            return Asked(parts.question(), parts.context(), history, parts.attachments.blocks)

        return self._answer(target, question)

    def _free_question(self, text: str, settings: TriggerSettings, dry_run: bool) -> int:
        """workflow_dispatch ``question``: answered in HELPBOT_QUESTION_CHANNEL when set, else printed."""
        channel = env_str(self.env, "HELPBOT_QUESTION_CHANNEL")
        if channel and (not ids.is_channel_id(channel) or ids.is_dm_id(channel)):
            raise ConfigError("HELPBOT_QUESTION_CHANNEL", f"{channel!r} is not a channel ID (like C0123456789)")
        if not channel or dry_run:
            target = Target(where="(printed: no channel)", dry_run=dry_run)
            return self._answer(target, lambda: Asked(text), show_answer=True)
        slack = Slack(self.env, answer_channel=channel, need_bot=True, clock=self.clock)
        info = slack.channel(channel)
        decision = admission.admit(admission.manual_asker(env_str(self.env, "GITHUB_ACTOR")), channel, info, settings)
        if decision.verdict != "answer":
            return self.tell.ignored(decision.reason, channel)
        slack.registry = slack.registry.narrowed(decision.sources)
        public = is_public(info)
        root = self._out(slack).post_question(channel, text, env_str(self.env, "GITHUB_ACTOR"))
        where = f"{channel} (question channel)" if public else f"private channel {channel} (question channel)"
        target = Target(where=where, slack=slack, reply=self._reply(slack, channel, root, root), public=public)
        return self._answer(target, lambda: Asked(text), show_answer=True)

    def _answer(self, target: Target, question: Callable[[], Asked], *, show_answer: bool = False) -> int:
        """Show that work started, run the agent, deliver -- or leave a failure notice. Returns the exit code."""
        reply = target.reply
        asked: str | None = None
        registry: Registry | None = None

        def on_progress(progress: Progress) -> None:
            if line := progress_line(progress):  # registered names; nothing in a private run
                log(line)
            progress = replace(progress, tools=[guard.current().name(t) for t in progress.tools])  # defined names
            if reply is not None:
                reply.progress(progress)

        def on_event(event: dict[str, Any]) -> None:
            self.trace.write(event)  # through the guard: private text withheld for a private channel
            if reply is not None and reply.stream is not None:
                reply.stream.on_event(event)  # tool calls become the streamed reply's tasks

        try:
            if reply is not None and not reply.start():
                return self.tell.ignored(reply.yielded_because, target.where)
            log("started: reading the question, then the rounds (one line each)")  # the log moves from here on
            from agent.slack.attachments import ask_with_attachments
            from mcp_lib import Registry
            from mcp_lib.platforms.faq.semantic import prefetch as prefetch_encoder

            prefetch_encoder(self.env)  # after 👀: the FAQ's encoder loads while the question is built and asked
            # the tools read with the front's own Slack clients; a printed question has none
            registry = target.slack.registry if target.slack is not None else Registry(
                self.env, clock=self.clock, server_log=guard.server_err)
            guard.narrow(private=not target.public)  # first: listing the tools starts in-house servers
            guard.narrow(names=guard.registry_names(registry))
            what = question()
            asked = what.question
            agent = self.make_agent(registry, on_progress, on_event)
            if reply is not None and reply.stream is not None:
                agent.on_text = reply.stream.on_text  # the answer streams as it is written
            answer = ask_with_attachments(lambda blocks, note: agent.run(
                what.question, what.history, context=what.context + note, attachments=blocks), what.attachments)
            guard.narrow(hosts=[h for s in answer.consulted if (h := host_of(str(s.get("url") or "")))])
            link = reply.deliver(answer) if reply is not None else None
            guard.narrow(hosts=[host_of(link or "") or ""])  # the answer's permalink keeps its thread, consulted or not
        except BaseException as exc:
            failure = classify(exc, debug=debugging(self.env))
            self.trace.front("failure", error=failure.what)
            if reply is not None:
                reply.fail(failure.what, cancelled=isinstance(exc, Terminated | KeyboardInterrupt))
                if reply.state == "yielded":  # another run answers after all: its outcome is the thread's
                    return self.tell.ignored(reply.yielded_because, target.where)
            self.tell.failed(exc, failure.what, target, asked)
            if failure.reraise:
                raise
            return failure.code
        finally:
            if reply is not None:
                reply.close()
            if registry is not None:
                registry.close()  # in-house MCP servers (and their processes) end with the run
        if reply is not None and reply.state == "yielded":
            return self.tell.ignored(reply.yielded_because, target.where)
        return self.tell.answered(answer, link, target, asked, show_answer)

    def _reply(self, slack: Slack, channel: str, root: str, question_ts: str, *,
               reread: Callable[[], list[dict[str, Any]]] | None = None, asker: str | None = None
               ) -> ThreadReply | None:
        """helpbot's side of the thread, the answer streamed to ``asker`` when Slack lets it; None without a bot."""
        if slack.writer is None:
            return None
        stream = AnswerStream(self._out(slack), channel=channel, thread_ts=root, recipient_user=asker,
                              recipient_team=slack.me.team_id, clock=self.clock) if asker and slack.me.team_id else None
        return ThreadReply(self._out(slack), channel=channel, root=root, question_ts=question_ts, run=self.run_id,
                           throttle=ProgressThrottle(self.clock, self.interval), run_link=self.run_link, me=slack.me,
                           reread=reread, force=self.options.force, stream=stream, buttons=self.buttons)

    def _out(self, slack: Slack) -> SlackOut:
        """The one door for this run's Slack writes (one write budget for the whole run)."""
        if self._slack_out is None:
            assert slack.writer is not None
            self._slack_out = SlackOut(slack.writer, trace=self.trace, clock=self.clock)
        return self._slack_out

    def _tell_asker(self, trigger: Trigger, exc: ConfigError) -> None:
        """A configuration mistake told to the asker, ephemerally (nothing else shows in Slack), unless Slack's is."""
        if not (trigger.channel and trigger.ts and trigger.user):
            return
        try:
            slack = Slack(self.env, answer_channel=trigger.channel, need_bot=True, clock=self.clock)
        except ConfigError:
            return
        notice = CONFIG_NOTICE.format(variable=exc.variable, link=f": {self.run_link}" if self.run_link else "")
        self._out(slack).ephemeral(trigger.channel, trigger.user, notice, thread_ts=trigger.thread_ts or trigger.ts)


def trigger_of(o: Options) -> Trigger:
    """The trigger the options name: an event file, a message link, or channel + ts (bad input: one line)."""
    if o.ts and (o.event or o.url):
        raise BadInput(f"--ts goes with --channel, not with {'--event' if o.event else '--url'}")
    if o.event:
        return load_event(o.event)
    if o.url or o.channel or o.ts:
        if not o.url and not (o.channel and o.ts):
            raise BadInput("--channel and --ts go together")
        return from_options(url=o.url, channel=o.channel, ts=o.ts)
    raise BadInput("give one of --event FILE, --url PERMALINK, or --channel C --ts TS")

