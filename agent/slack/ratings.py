"""helpbot's answers in Slack and how people rated them: the scan of ``helpbot feedback``, faq-draft and vote.

One ``conversations.history`` pass per channel, all of it (an answer in the window may be in the thread of a
question of any age), then ``conversations.replies`` only for threads helpbot may have replied in since. Each
person counts once per emoji over all of an answer's parts, helpbot never.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from agent import guard
from agent.errors import UsageError
from agent.slack.admission import Home, configured_bot_user
from agent.slack.handle import is_public, pages
from agent.slack.markers import VOTES, Marker, Me, answers_in_sequence
from agent.slack.readback import read_answer
from agent.slack.trigger import canonical_reaction, env_channels
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.clock import now as clock_now
from mcp_lib.config import ConfigError
from mcp_lib.core import CredentialsError, ToolContext, ToolError
from mcp_lib.ids import is_channel_id
from mcp_lib.payload import count
from mcp_lib.platforms import slack as slack_platform

PAGE_SIZE = 200  # Slack's recommended maximum for history and replies
SCAN_MAX_RETRIES = 5  # a weekly batch can wait out rate limits longer than an answer can
POSITIVE, NEGATIVE = VOTES  # 👍 and 👎: the reactions, and the feedback buttons' votes
_DURATION = re.compile(r"(\d{1,6})\s*([hdw])", re.I)


@dataclass
class RatedAnswer:
    """One helpbot answer with what its metadata says and how people reacted to it."""

    channel: str
    ts: str
    thread_ts: str | None
    question_ts: str | None
    rounds: int
    tool_calls: int
    tools: list[str]
    sources_count: int
    sources: list[dict[str, str]]
    cost_usd: float | None
    degraded: bool
    parts: int
    reactions: dict[str, int] = field(default_factory=dict)  # canonical name -> people (helpbot excluded)
    reactors: set[str] = field(default_factory=set)
    permalink: str | None = None

    @property
    def positive(self) -> int:
        return self.reactions.get(POSITIVE, 0)

    @property
    def negative(self) -> int:
        return self.reactions.get(NEGATIVE, 0)

    def to_json(self, tz: tzinfo) -> dict[str, Any]:
        return {**asdict(self), "time": datetime.fromtimestamp(float(self.ts), tz).isoformat(timespec="seconds"),
                "positive": self.positive, "negative": self.negative, "reactors": len(self.reactors)}


def rated(channel: str, marker: Marker, message: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]) -> RatedAnswer:
    """One of helpbot's answers as its marker and its 参照元 section say, not yet rated."""
    stats = marker.stats
    read = read_answer(parts)
    sources = read.sources + [{"title": t, "url": ""} for t in read.unlinked]
    # names helpbot defined only: metadata is written by the model's choices (and old answers predate the guard)
    tools = [guard.current().name(t) for t in stats.tools]
    return RatedAnswer(
        channel=channel, ts=str(message["ts"]), thread_ts=message.get("thread_ts"), question_ts=marker.question_ts,
        rounds=stats.rounds, tool_calls=stats.tool_calls, tools=tools, sources=sources, cost_usd=stats.cost_usd,
        sources_count=stats.sources or len(sources) + read.left_out, degraded=stats.degraded, parts=stats.parts)


def tally_reactions(answer: RatedAnswer, parts: Sequence[Mapping[str, Any]], votes: Mapping[str, str], me: Me,
                    refetch: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Each person once per emoji over all parts; ``refetch`` (reactions.get) when Slack cut a user list short.
    A feedback-button vote (the marker's ``votes``) is its voter's only 👍/👎: it replaces their reactions."""
    people: dict[str, set[str]] = {}
    hidden: Counter[str] = Counter()
    for message in parts:
        reactions = message.get("reactions") or []
        if any(count(r.get("count")) > len(r.get("users") or []) for r in reactions):
            reactions = refetch(message).get("reactions") or reactions
        for reaction in reactions:
            name = canonical_reaction(str(reaction.get("name") or ""))
            users = [str(u) for u in reaction.get("users") or []]
            people.setdefault(name, set()).update(u for u in users if not me.is_me(u))
            hidden[name] += max(0, count(reaction.get("count")) - len(users))  # still cut short: count them
    for user, vote in votes.items():
        if not me.is_me(user):
            for name in (POSITIVE, NEGATIVE):
                people.get(name, set()).discard(user)
            people.setdefault(vote, set()).add(user)
    for name, reacted in people.items():
        if total := len(reacted) + hidden[name]:
            answer.reactions[name] = total
            answer.reactors |= reacted


@dataclass
class Scanner:
    """Reads channels through the Slack platform's client (its retry handlers, its error messages)."""

    ctx: ToolContext
    me: Me
    page_size: int = PAGE_SIZE
    workspace_url: str = ""
    home: Home = field(default_factory=Home)  # auth.test's team (and organization)
    _public: dict[str, bool] = field(default_factory=dict, init=False)

    @classmethod
    def connect(cls, env: Mapping[str, str], command: str, *, clock: Clock = SYSTEM_CLOCK,
                page_size: int = PAGE_SIZE) -> Scanner:
        """A scan as the bot (never a person's token); bad configuration is a ConfigError."""
        configured = configured_bot_user(env)
        config = slack_platform.load_config(env)
        if config is None or config.bot_token is None:
            raise ConfigError("SLACK_BOT_TOKEN", f"not set: helpbot {command} reads the channels as the bot (xoxb-…)")
        config = replace(config, user_token=None, max_retries=SCAN_MAX_RETRIES)
        ctx = ToolContext(client=slack_platform.make_client(config), config=config, clock=clock)
        auth = slack_platform.whoami(ctx)
        me = Me(str(auth.get("user_id") or "") or None, auth.get("bot_id"), configured)
        return cls(ctx, me, page_size, str(auth.get("url") or ""), Home.from_auth(auth))

    def call(self, api: str, **params: Any) -> dict[str, Any]:
        return slack_platform.call(self.ctx, api, **params)

    def is_public(self, channel: str) -> bool:
        """Public only when Slack says so: private channels, DMs and unreadable privacy are not (asked once)."""
        if channel not in self._public:
            try:
                info = slack_platform.channel_info(self.ctx, channel)
            except ToolError:
                info = {}
            self._public[channel] = is_public(info)
        return self._public[channel]

    def pages(self, api: str, **params: Any) -> Iterator[dict[str, Any]]:
        return pages(self.call, api, limit=self.page_size, **params)

    def _may_hold_answer(self, root: Mapping[str, Any], since_ts: float) -> bool:
        if not count(root.get("reply_count")) or float(root.get("latest_reply") or 0) < since_ts:
            return False
        users = root.get("reply_users")
        if self.me.wrote(root) or not isinstance(users, list) or len(users) < count(root.get("reply_users_count")):
            return True  # Slack did not list every replier: look
        return self.me.user_id in users

    def scan(self, channel: str, since: datetime) -> list[tuple[RatedAnswer, list[Mapping[str, Any]]]]:
        """The channel's answers posted since ``since``, rated, each with the messages that make it up."""
        since_ts = since.timestamp()
        found: dict[str, tuple[RatedAnswer, list[Mapping[str, Any]]]] = {}
        for message in self.pages("conversations.history", channel=channel):
            if message.get("thread_ts") not in (None, message.get("ts")):
                continue  # a reply also sent to the channel: counted with its thread
            sequence = [message]
            if self._may_hold_answer(message, since_ts):
                sequence = list(self.pages("conversations.replies", channel=channel, ts=message["ts"],
                                           oldest=f"{since_ts:.6f}"))
            for marker, first, parts in answers_in_sequence(sequence, self.me):
                if float(first.get("ts") or 0) >= since_ts and str(first["ts"]) not in found:
                    answer = rated(channel, marker, first, parts)
                    tally_reactions(answer, parts, marker.votes, self.me, lambda m: self._refetch(channel, m))
                    found[answer.ts] = (answer, parts)
        return sorted(found.values(), key=lambda pair: float(pair[0].ts))

    def _refetch(self, channel: str, message: Mapping[str, Any]) -> Mapping[str, Any]:
        return self.call("reactions.get", channel=channel, timestamp=message["ts"], full=True).get("message") or {}

    def add_permalinks(self, answers: Iterable[RatedAnswer]) -> None:
        for answer in answers:
            data = self.call("chat.getPermalink", channel=answer.channel, message_ts=answer.ts)
            answer.permalink = str(data.get("permalink") or "") or None


def scan_arguments(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """``--since`` and ``--channel``; the group for the command's output options."""
    parser.add_argument("--since", default="30d", help="window: 7d, 30d, 12h, 2w or a date like 2025-01-31 "
                                                       "(default 30d)")
    parser.add_argument("--channel", action="append", metavar="C", help="channel ID to scan (repeatable; default "
                                                                        "HELPBOT_CHANNELS)")
    return parser.add_mutually_exclusive_group()


def parse_since(value: str, now: datetime, command: str = "helpbot feedback") -> datetime:
    """``7d``, ``30d``, ``12h``, ``2w`` before ``now``, or an ISO date/time (naive: ``now``'s time zone)."""
    raw = value.strip()
    bad = UsageError(f"{command}: --since {value!r} is neither a duration like 7d, 30d or 12h nor a date "
                     "like 2025-01-31")
    if match := _DURATION.fullmatch(raw):
        amount, unit = int(match.group(1)), match.group(2).lower()
        if amount == 0:
            raise UsageError(f"{command}: --since {value!r} is an empty window; use at least 1{unit}")
        try:
            return now - timedelta(hours=amount) * {"h": 1, "d": 24, "w": 24 * 7}[unit]
        except OverflowError:
            raise bad from None
    try:
        when = (datetime.fromisoformat(raw) if "T" in raw or " " in raw
                else datetime.combine(date.fromisoformat(raw), datetime.min.time()))
    except ValueError:
        raise bad from None
    when = when if when.tzinfo else when.replace(tzinfo=now.tzinfo)
    if when >= now:
        raise UsageError(f"{command}: --since {value!r} is not in the past")
    return when


def scan_window(args: argparse.Namespace, env: Mapping[str, str], command: str,
                clock: Clock) -> tuple[tzinfo, datetime, datetime, list[str]]:
    """A scan's time zone, now, the start of ``--since`` and the channels; bad values exit 2 before any call."""
    config = slack_platform.load_config(env)
    tz = config.tz if config else ZoneInfo(slack_platform.DEFAULT_TIMEZONE)  # no config: Scanner.connect says so
    now = clock_now(clock, tz)
    since = parse_since(args.since, now, f"helpbot {command}")
    channels = list(dict.fromkeys(c.strip() for c in args.channel or [])) or env_channels(env, "HELPBOT_CHANNELS")
    bad = next((c for c in channels if not is_channel_id(c)), None)
    if bad is not None:  # a --channel: HELPBOT_CHANNELS' are checked as they are read
        raise UsageError(f"helpbot {command}: --channel {bad!r} is not a channel ID (like C0123456789)")
    if not channels:
        raise ConfigError("HELPBOT_CHANNELS", "no channels to scan: set HELPBOT_CHANNELS or pass --channel C…")
    return tz, now, since, channels


def slack_command(env: Mapping[str, str], command: str, body: Callable[[Scanner], int], *, clock: Clock,
                  page_size: int = PAGE_SIZE) -> int:
    """``body`` on a scan as the bot: a token Slack refuses is a ConfigError (exit 2), other Slack failures exit 1."""
    try:
        return body(Scanner.connect(env, command, clock=clock, page_size=page_size))
    except CredentialsError as exc:
        raise ConfigError("SLACK_BOT_TOKEN", str(exc)) from None
    except ToolError as exc:
        guard.err(f"helpbot {command}: {exc}")
        return 1
