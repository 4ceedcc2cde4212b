"""``helpbot feedback``: how helpbot's answers were received -- 👍/👎 per answer and in total, what they cost.

Answers are found by their marker (:mod:`agent.slack.markers`), and only when helpbot itself wrote them: another
app cannot forge entries. Placeholders and failure notices are skipped.

How the scan stays cheap: one ``conversations.history`` pass per channel (``include_all_metadata``, cursor
paging), then ``conversations.replies`` only for threads that have replies since the window opened and that
helpbot may have replied in (``reply_users``, when Slack lists them all). History is read from
:data:`THREAD_LOOKBACK` before the window, so an answer posted in the window to an older question is still
found. Reactions come with the messages; ``reactions.get`` is called only when Slack truncated a user list.
A long answer is several messages (``parts`` in its metadata): reactions on every part count, each person once
per emoji, helpbot's own reactions never.

The text report and the summary posted by ``--post`` hold counts, tool names and permalinks, never message
text or source titles (the feedback channel and the Actions log may be wider audiences than the channel an
answer was in). ``--json`` and ``--csv`` add each answer's sources.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, tzinfo
from typing import IO, Any
from zoneinfo import ZoneInfo

from agent import guard
from agent.errors import UsageError
from agent.guard import Guard
from agent.slack.blocks import (
    POST_OPTIONS,
    format_cost,
    guard_public,
    mask_personal_from_env,
    platform_label,
)
from agent.slack.markers import Me, answers_in_sequence
from agent.slack.readback import message_markdown, read_answer
from agent.slack.split import slack_len
from agent.slack.trigger import USER_RE, env_channels, is_channel_id, is_dm_id
from agent.slack.trigger import normalize_reaction as normalize_reaction_name
from mcp_lib.config import ConfigError, env_str
from mcp_lib.core import CredentialsError, ToolContext, ToolError
from mcp_lib.platforms import slack as slack_platform

PAGE_SIZE = 200  # Slack's recommended maximum for history and replies
THREAD_LOOKBACK = timedelta(days=14)
SCAN_MAX_RETRIES = 5  # a weekly batch can wait out rate limits longer than an answer can
POSITIVE, NEGATIVE = "+1", "-1"
_ALIASES = {"thumbsup": POSITIVE, "thumbsdown": NEGATIVE}
_DURATION = re.compile(r"(\d{1,6})\s*([hdw])", re.I)
MAX_POSTED_NEGATIVES = 20
POST_LIMIT = 11_000  # below the 12,000 markdown characters of one message


# -- the window -----------------------------------------------------------------------------------------------
def parse_since(value: str, now: datetime, command: str = "helpbot feedback") -> datetime:
    """``7d``, ``30d``, ``12h``, ``2w`` before ``now``, or an ISO date/time (naive: ``now``'s time zone)."""
    raw = value.strip()
    bad = UsageError(f"{command}: --since {value!r} is neither a duration like 7d, 30d or 12h nor a date "
                     "like 2025-01-31")
    match = _DURATION.fullmatch(raw)
    if match:
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
    if when.tzinfo is None:
        when = when.replace(tzinfo=now.tzinfo)
    if when >= now:
        raise UsageError(f"{command}: --since {value!r} is not in the past")
    return when


def _ts(when: datetime) -> str:
    return f"{when.timestamp():.6f}"


# -- one answer -----------------------------------------------------------------------------------------------
def normalize_reaction(name: str) -> str:
    """``+1::skin-tone-3`` and ``thumbsup`` are both 👍 (``+1``): the trigger's normalization plus the aliases."""
    name = normalize_reaction_name(name)
    return _ALIASES.get(name, name)


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
    reactions: dict[str, int] = field(default_factory=dict)  # normalized name -> people (helpbot excluded)
    reactors: set[str] = field(default_factory=set)
    permalink: str | None = None

    @property
    def positive(self) -> int:
        return self.reactions.get(POSITIVE, 0)

    @property
    def negative(self) -> int:
        return self.reactions.get(NEGATIVE, 0)

    @property
    def other_reactions(self) -> dict[str, int]:
        return {k: v for k, v in self.reactions.items() if k not in (POSITIVE, NEGATIVE)}

    def to_json(self, tz: tzinfo) -> dict[str, Any]:
        return {
            "channel": self.channel, "ts": self.ts, "time": _local(self.ts, tz), "thread_ts": self.thread_ts,
            "question_ts": self.question_ts, "positive": self.positive, "negative": self.negative,
            "reactions": dict(self.reactions), "reactors": len(self.reactors), "rounds": self.rounds,
            "tool_calls": self.tool_calls, "tools": list(self.tools), "sources_count": self.sources_count,
            "sources": [dict(s) for s in self.sources], "cost_usd": self.cost_usd, "degraded": self.degraded,
            "parts": self.parts, "permalink": self.permalink,
        }


def _local(ts: str, tz: tzinfo) -> str:
    return datetime.fromtimestamp(float(ts), tz).isoformat(timespec="seconds")


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def parse_sources(messages: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, str]], int]:
    """The 「参照元」 section of an answer's messages -> ([{title, url}], how many the section left out).

    Read the way follow-ups read answers (:func:`agent.slack.readback.read_answer`), so it works whether Slack hands the
    markdown blocks back as they were posted or translated into rich_text."""
    read = read_answer("\n\n".join(message_markdown(m) for m in messages))
    return read.sources + [{"title": title, "url": ""} for title in read.unlinked], read.left_out


def answers_in(sequence: Sequence[Mapping[str, Any]], channel: str, since_ts: float,
               me: Me) -> list[tuple[RatedAnswer, list[Mapping[str, Any]]]]:
    """helpbot's answers in one thread (or one lone message) posted since ``since_ts``, each with the messages
    that make it up (grouped as :func:`agent.slack.markers.answers_in_sequence` groups them for follow-ups)."""
    found = []
    for marker, message, parts in answers_in_sequence(sequence, me):
        if float(message.get("ts") or 0) < since_ts:
            continue
        payload = marker.payload
        sources, left_out = parse_sources(parts)
        # names helpbot defined only: metadata is written by the model's choices (and old answers predate the guard)
        tools = [guard.current().name(t) for t in str(payload.get("tools") or "").split(",") if t]
        answer = RatedAnswer(
            channel=channel, ts=str(message["ts"]), thread_ts=message.get("thread_ts"),
            question_ts=marker.question_ts, rounds=_int(payload.get("rounds")),
            tool_calls=_int(payload.get("tool_calls")), tools=tools,
            sources_count=_int(payload.get("sources")) or len(sources) + left_out, sources=sources,
            cost_usd=_float(payload.get("cost_usd")), degraded=bool(payload.get("degraded")),
            parts=marker.parts)
        found.append((answer, parts))
    return found


def tally_reactions(answer: RatedAnswer, parts: Iterable[Mapping[str, Any]], excluded: set[str],
                    refetch: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
    """Each person once per emoji over all parts; ``refetch`` (reactions.get) when Slack cut a user list short."""
    people: dict[str, set[str]] = {}
    hidden: Counter[str] = Counter()
    for message in parts:
        reactions = message.get("reactions") or []
        if any(_int(r.get("count")) > len(r.get("users") or []) for r in reactions):
            reactions = refetch(message).get("reactions") or reactions
        for reaction in reactions:
            name = normalize_reaction(str(reaction.get("name") or ""))
            users = [str(u) for u in reaction.get("users") or []]
            people.setdefault(name, set()).update(u for u in users if u not in excluded)
            hidden[name] += max(0, _int(reaction.get("count")) - len(users))  # still cut short: count them
    for name, reacted in people.items():
        total = len(reacted) + hidden[name]
        if total:
            answer.reactions[name] = total
            answer.reactors |= reacted


# -- the scan -------------------------------------------------------------------------------------------------
class Scanner:
    """Reads channels through the Slack platform's client (its retry handlers, its error messages)."""

    def __init__(self, ctx: ToolContext, *, bot_user_id: str, bot_id: str | None, excluded: Iterable[str] = (),
                 page_size: int = PAGE_SIZE):
        self.ctx = ctx
        self.bot_user_id = bot_user_id
        self.me = Me(bot_user_id or None, bot_id)
        self.excluded = {bot_user_id, *excluded}
        self.page_size = page_size

    def call(self, api: str, **params: Any) -> dict[str, Any]:
        return slack_platform.call(self.ctx, api, **params)

    def _pages(self, api: str, **params: Any) -> Iterator[dict[str, Any]]:
        cursor = None
        while True:
            data = self.call(api, limit=self.page_size, include_all_metadata=True, cursor=cursor, **params)
            yield from data.get("messages") or []
            cursor = (data.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return

    def _may_hold_answer(self, root: Mapping[str, Any], since_ts: float) -> bool:
        if not _int(root.get("reply_count")) or float(root.get("latest_reply") or 0) < since_ts:
            return False
        users = root.get("reply_users")
        if self.me.wrote(root) or not isinstance(users, list) or len(users) < _int(root.get("reply_users_count")):
            return True  # Slack did not list every replier: look
        return self.bot_user_id in users

    def scan(self, channel: str, since: datetime) -> list[RatedAnswer]:
        return [answer for answer, _ in self.scan_with_parts(channel, since)]

    def scan_with_parts(self, channel: str, since: datetime
                        ) -> list[tuple[RatedAnswer, list[Mapping[str, Any]]]]:
        """:meth:`scan`, each answer with the messages that make it up (``helpbot faq-draft`` reads them)."""
        since_ts = since.timestamp()
        found: dict[str, tuple[RatedAnswer, list[Mapping[str, Any]]]] = {}
        for message in self._pages("conversations.history", channel=channel, oldest=_ts(since - THREAD_LOOKBACK)):
            if message.get("thread_ts") not in (None, message.get("ts")):
                continue  # a reply also sent to the channel: counted with its thread
            if self._may_hold_answer(message, since_ts):
                sequence = list(self._pages("conversations.replies", channel=channel, ts=message["ts"],
                                            oldest=_ts(since)))
            else:
                sequence = [message]
            for answer, parts in answers_in(sequence, channel, since_ts, self.me):
                if answer.ts not in found:
                    tally_reactions(answer, parts, self.excluded, lambda m: self._refetch(channel, m))
                    found[answer.ts] = (answer, parts)
        return sorted(found.values(), key=lambda pair: float(pair[0].ts))

    def _refetch(self, channel: str, message: Mapping[str, Any]) -> Mapping[str, Any]:
        data = self.call("reactions.get", channel=channel, timestamp=message["ts"], full=True)
        return data.get("message") or {}

    def add_permalinks(self, answers: Iterable[RatedAnswer]) -> None:
        for answer in answers:
            data = self.call("chat.getPermalink", channel=answer.channel, message_ts=answer.ts)
            answer.permalink = str(data.get("permalink") or "") or None


# -- the report -----------------------------------------------------------------------------------------------
@dataclass
class Report:
    since: datetime
    until: datetime
    channels: list[str]
    answers: list[RatedAnswer]

    @property
    def negative(self) -> list[RatedAnswer]:
        return [a for a in self.answers if a.negative]

    def totals(self) -> dict[str, Any]:
        answers = self.answers
        reactions: Counter[str] = Counter()
        tools: Counter[str] = Counter()
        sources: dict[str, dict[str, Any]] = {}
        for answer in answers:
            reactions.update(answer.reactions)
            tools.update(dict.fromkeys(answer.tools).keys())
            for source in {s["url"]: s for s in answer.sources if s["url"]}.values():
                entry = sources.setdefault(source["url"], {**source, "answers": 0})
                entry["answers"] += 1
        costs = [a.cost_usd for a in answers if a.cost_usd is not None]
        rounds = sum(a.rounds for a in answers)
        return {
            "answers": len(answers),
            "positive": reactions[POSITIVE], "negative": reactions[NEGATIVE],
            "answers_with_positive": sum(1 for a in answers if a.positive),
            "answers_with_negative": sum(1 for a in answers if a.negative),
            "answers_without_reactions": sum(1 for a in answers if not a.reactions),
            "reactions": dict(reactions.most_common()),
            "reactors": len(set().union(*(a.reactors for a in answers))),
            "rounds": rounds, "rounds_avg": round(rounds / len(answers), 2) if answers else 0.0,
            "tool_calls": sum(a.tool_calls for a in answers),
            "tools": dict(tools.most_common()),
            "sources": sum(a.sources_count for a in answers),
            "top_sources": sorted(sources.values(), key=lambda s: -s["answers"])[:10],
            "cost_usd": round(sum(costs), 6), "cost_unknown": len(answers) - len(costs),
            "degraded": sum(1 for a in answers if a.degraded),
        }

    def to_json(self, tz: tzinfo) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(timespec="seconds"), "until": self.until.isoformat(timespec="seconds"),
            "channels": list(self.channels), "totals": self.totals(),
            "answers": [a.to_json(tz) for a in self.answers],
            "negative": [{"channel": a.channel, "ts": a.ts, "negative": a.negative, "positive": a.positive,
                          "permalink": a.permalink} for a in self.negative],
        }


CSV_COLUMNS = ["channel", "ts", "time", "thread_ts", "question_ts", "positive", "negative", "other_reactions",
               "reactors", "rounds", "tool_calls", "tools", "sources_count", "source_urls", "cost_usd", "degraded",
               "parts", "permalink"]


def _cell(value: Any) -> Any:
    """Defuse spreadsheet formulas (``=``, ``+``, ``-``, ``@`` at the start) in text cells."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def write_csv(report: Report, out: IO[str], tz: tzinfo) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for a in report.answers:
        other = ";".join(f"{name}:{n}" for name, n in a.other_reactions.items())
        row = [a.channel, a.ts, _local(a.ts, tz), a.thread_ts or "", a.question_ts or "", a.positive, a.negative,
               other, len(a.reactors), a.rounds, a.tool_calls, ";".join(a.tools), a.sources_count,
               " ".join(s["url"] for s in a.sources if s["url"]),
               "" if a.cost_usd is None else f"{a.cost_usd:.6f}", str(a.degraded).lower(), a.parts,
               a.permalink or ""]
        writer.writerow([_cell(v) for v in row])


def _cost(totals: Mapping[str, Any]) -> str:
    text = format_cost(totals["cost_usd"])
    return text + (f" ({totals['cost_unknown']} without a cost)" if totals["cost_unknown"] else "")


def render_text(report: Report, tz: tzinfo) -> str:
    t = report.totals()
    window = f"{report.since.astimezone(tz):%Y-%m-%d %H:%M} – {report.until.astimezone(tz):%Y-%m-%d %H:%M}"
    other = {k: v for k, v in t["reactions"].items() if k not in (POSITIVE, NEGATIVE)}
    lines = [
        f"helpbot feedback: {t['answers']} answers in {', '.join(report.channels)} ({window} {tz})",
        f"👍 {t['positive']} · 👎 {t['negative']} · other "
        + (", ".join(f":{k}: {v}" for k, v in other.items()) or "none")
        + f" · {t['reactors']} people reacted · {t['answers_without_reactions']} answers without reactions",
        f"rounds avg {t['rounds_avg']} · tool calls {t['tool_calls']} · sources {t['sources']} · est. cost "
        f"{_cost(t)}" + (f" · degraded {t['degraded']}" if t["degraded"] else ""),
        "tools (answers using them): " + (", ".join(f"{k} {v}" for k, v in t["tools"].items()) or "none"),
    ]
    if report.answers:
        lines += ["", "answers:"]
        for a in report.answers:
            cost = "-" if a.cost_usd is None else format_cost(a.cost_usd)
            lines.append(f"  {datetime.fromtimestamp(float(a.ts), tz):%Y-%m-%d %H:%M}  {a.channel}  {a.ts}  "
                         f"👍{a.positive} 👎{a.negative}  rounds {a.rounds}  tools {','.join(a.tools) or '-'}  "
                         f"sources {a.sources_count}  {cost}" + ("  degraded" if a.degraded else ""))
    if report.negative:
        lines += ["", "👎 answers (check these and fix the FAQ):"]
        lines += [f"  - {a.permalink or f'{a.channel} {a.ts}'}  👎{a.negative} 👍{a.positive}"
                  for a in report.negative]
    return "\n".join(lines)


def summary_payload(report: Report, tz: tzinfo, *, mask_personal: bool = True) -> dict[str, Any]:
    """The weekly post: one message (markdown block), counts and 👎 permalinks only, through guard_public."""
    t = report.totals()
    window = f"{report.since.astimezone(tz):%Y-%m-%d %H:%M} 〜 {report.until.astimezone(tz):%Y-%m-%d %H:%M}"
    platforms = Counter(label for a in report.answers for label in dict.fromkeys(map(platform_label, a.tools)))
    head = [
        f"**helpbot フィードバック（{window}）**",
        f"回答 {t['answers']} 件 ・ 👍 {t['positive']} ・ 👎 {t['negative']} ・ リアクションした人 {t['reactors']} 人"
        f" ・ リアクションなし {t['answers_without_reactions']} 件",
        f"平均ラウンド {t['rounds_avg']} ・ ツール呼び出し {t['tool_calls']} 回 ・ "
        f"推定コスト {format_cost(t['cost_usd'])}"
        + (f" ・ 検索のみの回答 {t['degraded']} 件" if t["degraded"] else ""),
    ]
    if platforms:
        head.append("検索先（使った回答の数）: " + "、".join(f"{k} {v}" for k, v in platforms.most_common()))
    negatives = report.negative
    lines: list[str] = []
    if negatives:
        lines = ["", "**👎 がついた回答**（FAQ の見直し候補）"]
        for index, a in enumerate(negatives):
            when = f"{datetime.fromtimestamp(float(a.ts), tz):%m/%d %H:%M}"
            link = f"[{when} の回答]({a.permalink})" if a.permalink else f"{when} の回答（{a.channel}）"
            line = f"- {link} 👎 {a.negative} ・ 👍 {a.positive} ・ ラウンド {a.rounds}"
            if (index >= MAX_POSTED_NEGATIVES
                    or slack_len("\n".join([*head, *lines, line])) > POST_LIMIT):
                lines.append(f"- ほか {len(negatives) - index} 件")
                break
            lines.append(line)
    text = guard_public("\n".join(head + lines), mask_personal)
    fallback = guard_public(f"helpbot フィードバック: 回答 {t['answers']} 件、👍 {t['positive']}、👎 {t['negative']}",
                            mask_personal)
    return {"text": fallback, "blocks": [{"type": "markdown", "text": text}]}


# -- the command ----------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", default="30d", help="window: 7d, 30d, 12h, 2w or a date like 2025-01-31 "
                                                       "(default 30d)")
    parser.add_argument("--channel", action="append", metavar="C", help="channel ID to scan (repeatable; default "
                                                                        "HELPBOT_CHANNELS)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    output.add_argument("--csv", action="store_true", help="print one CSV row per answer")
    parser.add_argument("--post", nargs="?", const="", metavar="CHANNEL",
                        help="also post the summary to this channel (default HELPBOT_FEEDBACK_CHANNEL)")


def _channels(args: argparse.Namespace, env: Mapping[str, str]) -> list[str]:
    if args.channel:
        channels = list(dict.fromkeys(c.strip() for c in args.channel))
        bad = next((c for c in channels if not is_channel_id(c)), None)
        if bad is not None:
            raise UsageError(f"helpbot feedback: --channel {bad!r} is not a channel ID (like C0123456789)")
        return channels
    channels = env_channels(env, "HELPBOT_CHANNELS")
    if not channels:
        raise ConfigError("HELPBOT_CHANNELS", "no channels to scan: set HELPBOT_CHANNELS or pass --channel C…")
    return channels


def _post_channel(args: argparse.Namespace, env: Mapping[str, str]) -> str | None:
    if args.post is None:
        return None
    channel = args.post.strip() or env_str(env, "HELPBOT_FEEDBACK_CHANNEL")
    if not channel:
        raise ConfigError("HELPBOT_FEEDBACK_CHANNEL", "not set: --post needs a channel ID (--post C0123456789)")
    if not is_channel_id(channel) or is_dm_id(channel):
        raise UsageError(f"helpbot feedback: --post {channel!r} is not a channel ID (like C0123456789)")
    return channel


def run(args: argparse.Namespace, env: Mapping[str, str], *, now: datetime | None = None,
        sleep: Callable[[float], None] = time.sleep, out: IO[str] | None = None,
        page_size: int = PAGE_SIZE) -> int:
    """The command with its seams: environment, clock, the retry handlers' sleep, output stream."""
    with guard.installed(Guard.from_env(env, names=builtin_names())):
        return _run(args, env, now=now, sleep=sleep, out=out or sys.stdout, page_size=page_size)


def builtin_names() -> list[str]:
    """The names of helpbot's own tools and platforms (a weekly report has no run's registry to ask)."""
    from mcp_lib.registry import Registry

    platforms = Registry(env={}).builtin_platforms()
    return [*platforms, *(tool.wire_name for p in platforms.values() for tool in p.tools.values())]


def _run(args: argparse.Namespace, env: Mapping[str, str], *, now: datetime | None,
         sleep: Callable[[float], None], out: IO[str], page_size: int) -> int:
    config = slack_platform.load_config(env)
    tz = config.tz if config else ZoneInfo(slack_platform.DEFAULT_TIMEZONE)  # no config: fails just below
    now = (now or datetime.now(tz)).astimezone(tz)
    since = parse_since(args.since, now)
    channels = _channels(args, env)
    post_to = _post_channel(args, env)
    extra = env_str(env, "HELPBOT_BOT_USER_ID")
    if extra and not USER_RE.fullmatch(extra):
        raise ConfigError("HELPBOT_BOT_USER_ID", f"{extra!r} is not a Slack user ID (like U0123456789)")
    if config is None or config.bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN", "not set: helpbot feedback reads the channels (and posts) as the bot "
                                             "(xoxb-…)")
    config = replace(config, user_token=None, max_retries=SCAN_MAX_RETRIES)
    ctx = ToolContext(client=slack_platform.make_client(config, sleep), config=config)
    try:
        me = slack_platform.call(ctx, "auth.test")
        guard.narrow(hosts=[guard.host_of(str(me.get("url") or "")) or ""])  # permalinks keep their thread
        scanner = Scanner(ctx, bot_user_id=str(me.get("user_id") or ""), bot_id=me.get("bot_id"),
                          excluded=[extra] if extra else [], page_size=page_size)
        answers = [answer for channel in channels for answer in scanner.scan(channel, since)]
        report = Report(since=since, until=now, channels=channels, answers=answers)
        scanner.add_permalinks(report.negative)
        if args.json:
            guard.out(json.dumps(report.to_json(tz), ensure_ascii=False, indent=2), file=out)
        elif args.csv:
            rows = io.StringIO()
            write_csv(report, rows, tz)
            guard.out(rows.getvalue().removesuffix("\n"), file=out)
        else:
            guard.out(render_text(report, tz), file=out)
        if post_to:
            payload = summary_payload(report, tz, mask_personal=mask_personal_from_env(env))
            posted = guard.slack_call(slack_platform.call, ctx, channel=post_to, **payload, **POST_OPTIONS)
            guard.err(f"helpbot feedback: posted the summary to {post_to} (ts {posted.get('ts')})")
    except CredentialsError as exc:
        raise ConfigError("SLACK_BOT_TOKEN", str(exc)) from None
    except ToolError as exc:
        guard.err(f"helpbot feedback: {exc}")
        return 1
    return 0


def main(args: argparse.Namespace) -> int:
    import os

    return run(args, dict(os.environ))
