"""``helpbot feedback``: how helpbot's answers were received -- 👍/👎 per answer and in total, what they cost.

The text report and the ``--post`` summary hold counts, tool names and permalinks, never message text or source
titles; ``--json`` and ``--csv`` add the sources. A private channel's answers count in a post only into that
channel, and the printed report leaves them out in Actions (in a public repository, every channel's).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from typing import IO, Any

from agent import guard
from agent.errors import UsageError
from agent.guard import Guard
from agent.slack import ratings
from agent.slack.blocks import POST_OPTIONS, format_cost, platform_label
from agent.slack.ratings import NEGATIVE, PAGE_SIZE, POSITIVE, RatedAnswer, Scanner
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import ConfigError, env_str
from mcp_lib.cutting import MARKDOWN_LIMIT, slack_len
from mcp_lib.ids import is_channel_id, is_dm_id
from mcp_lib.platforms import slack as slack_platform

MAX_POSTED_NEGATIVES = 20
POST_LIMIT = MARKDOWN_LIMIT - 1_000  # room below the markdown characters one message holds


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
        return {"answers": len(answers), "positive": reactions[POSITIVE], "negative": reactions[NEGATIVE],
                "answers_with_positive": sum(1 for a in answers if a.positive),
                "answers_with_negative": sum(1 for a in answers if a.negative),
                "answers_without_reactions": sum(1 for a in answers if not a.reactions),
                "reactions": dict(reactions.most_common()),
                "reactors": len(set().union(*(a.reactors for a in answers))),
                "rounds": rounds, "rounds_avg": round(rounds / len(answers), 2) if answers else 0.0,
                "tool_calls": sum(a.tool_calls for a in answers), "tools": dict(tools.most_common()),
                "sources": sum(a.sources_count for a in answers),
                "top_sources": sorted(sources.values(), key=lambda s: -s["answers"])[:10],
                "cost_usd": round(sum(costs), 6), "cost_unknown": len(answers) - len(costs),
                "degraded": sum(1 for a in answers if a.degraded)}

    def to_json(self, tz: tzinfo) -> dict[str, Any]:
        return {"since": self.since.isoformat(timespec="seconds"), "until": self.until.isoformat(timespec="seconds"),
                "channels": list(self.channels), "totals": self.totals(),
                "answers": [a.to_json(tz) for a in self.answers],
                "negative": [{"channel": a.channel, "ts": a.ts, "negative": a.negative, "positive": a.positive,
                              "permalink": a.permalink} for a in self.negative]}


CSV_COLUMNS = ["channel", "ts", "time", "thread_ts", "question_ts", "positive", "negative", "other_reactions",
               "reactors", "rounds", "tool_calls", "tools", "sources_count", "source_urls", "cost_usd", "degraded",
               "parts", "permalink"]


def _cell(value: Any) -> Any:
    """Defuse spreadsheet formulas (``=``, ``+``, ``-``, ``@`` at the start) in text cells."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def csv_text(report: Report, tz: tzinfo) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for a in report.answers:  # csv writes None as an empty cell
        row = {**a.to_json(tz), "tools": ";".join(a.tools), "degraded": str(a.degraded).lower(),
               "other_reactions": ";".join(f"{k}:{n}" for k, n in a.reactions.items() if k not in (POSITIVE, NEGATIVE)),
               "source_urls": " ".join(s["url"] for s in a.sources if s["url"]),
               "cost_usd": None if a.cost_usd is None else f"{a.cost_usd:.6f}"}
        writer.writerow([_cell(row[column]) for column in CSV_COLUMNS])
    return out.getvalue().removesuffix("\n")


def render_text(report: Report, tz: tzinfo) -> str:
    t = report.totals()
    window = f"{report.since.astimezone(tz):%Y-%m-%d %H:%M} – {report.until.astimezone(tz):%Y-%m-%d %H:%M}"
    other = {k: v for k, v in t["reactions"].items() if k not in (POSITIVE, NEGATIVE)}
    lines = [f"helpbot feedback: {t['answers']} answers in {', '.join(report.channels)} ({window} {tz})",
             f"👍 {t['positive']} · 👎 {t['negative']} · other "
             + (", ".join(f":{k}: {v}" for k, v in other.items()) or "none")
             + f" · {t['reactors']} people reacted · {t['answers_without_reactions']} answers without reactions",
             f"rounds avg {t['rounds_avg']} · tool calls {t['tool_calls']} · sources {t['sources']} · est. cost "
             f"{format_cost(t['cost_usd'])}" + (f" ({t['cost_unknown']} without a cost)" if t["cost_unknown"] else "")
             + (f" · degraded {t['degraded']}" if t["degraded"] else ""),
             "tools (answers using them): " + (", ".join(f"{k} {v}" for k, v in t["tools"].items()) or "none")]
    lines += ["", "answers:"] if report.answers else []
    for a in report.answers:
        cost = "-" if a.cost_usd is None else format_cost(a.cost_usd)
        lines.append(f"  {datetime.fromtimestamp(float(a.ts), tz):%Y-%m-%d %H:%M}  {a.channel}  {a.ts}  "
                     f"👍{a.positive} 👎{a.negative}  rounds {a.rounds}  tools {','.join(a.tools) or '-'}  "
                     f"sources {a.sources_count}  {cost}" + ("  degraded" if a.degraded else ""))
    if report.negative:
        lines += ["", "👎 answers (check these and fix the FAQ):"]
        lines += [f"  - {a.permalink or f'{a.channel} {a.ts}'}  👎{a.negative} 👍{a.positive}" for a in report.negative]
    return "\n".join(lines)


def summary_payload(report: Report, tz: tzinfo) -> dict[str, Any]:
    """The weekly post: one message (markdown block), counts and 👎 permalinks only (guarded at the door)."""
    t = report.totals()
    window = f"{report.since.astimezone(tz):%Y-%m-%d %H:%M} 〜 {report.until.astimezone(tz):%Y-%m-%d %H:%M}"
    platforms = Counter(label for a in report.answers for label in dict.fromkeys(map(platform_label, a.tools)))
    head = [f"**helpbot フィードバック（{window}）**",
            f"回答 {t['answers']} 件 ・ 👍 {t['positive']} ・ 👎 {t['negative']}"
            f" ・ リアクションした人 {t['reactors']} 人 ・ リアクションなし {t['answers_without_reactions']} 件",
            f"平均ラウンド {t['rounds_avg']} ・ ツール呼び出し {t['tool_calls']} 回 ・ "
            f"推定コスト {format_cost(t['cost_usd'])}"
            + (f" ・ 検索のみの回答 {t['degraded']} 件" if t["degraded"] else "")]
    if platforms:
        head.append("検索先（使った回答の数）: " + "、".join(f"{k} {v}" for k, v in platforms.most_common()))
    negatives = report.negative
    lines = ["", "**👎 がついた回答**（FAQ の見直し候補）"] if negatives else []
    for index, a in enumerate(negatives):
        when = f"{datetime.fromtimestamp(float(a.ts), tz):%m/%d %H:%M}"
        link = f"[{when} の回答]({a.permalink})" if a.permalink else f"{when} の回答（{a.channel}）"
        line = f"- {link} 👎 {a.negative} ・ 👍 {a.positive} ・ ラウンド {a.rounds}"
        if index >= MAX_POSTED_NEGATIVES or slack_len("\n".join([*head, *lines, line])) > POST_LIMIT:
            lines.append(f"- ほか {len(negatives) - index} 件")
            break
        lines.append(line)
    text = "\n".join(head + lines)  # guarded at the door (agent.guard.slack_call), like every post
    fallback = f"helpbot フィードバック: 回答 {t['answers']} 件、👍 {t['positive']}、👎 {t['negative']}"
    return {"text": fallback, "blocks": [{"type": "markdown", "text": text}]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    output = ratings.scan_arguments(parser)
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    output.add_argument("--csv", action="store_true", help="print one CSV row per answer")
    parser.add_argument("--post", nargs="?", const="", metavar="CHANNEL",
                        help="also post the summary to this channel (default HELPBOT_FEEDBACK_CHANNEL)")


def run(args: argparse.Namespace, env: Mapping[str, str], *, clock: Clock = SYSTEM_CLOCK,
        out: IO[str] | None = None, page_size: int = PAGE_SIZE) -> int:
    """The command with its seams: environment, clock (the retries sleep on it), output."""
    from mcp_lib.registry import Registry

    platforms = Registry(env={}).builtin_platforms()  # helpbot's own names: a weekly report has no run's registry
    names = [*platforms, *(tool.wire_name for p in platforms.values() for tool in p.tools.values())]
    with guard.installed(Guard.from_env(env, names=names)):
        tz, now, since, channels = ratings.scan_window(args, env, "feedback", clock)
        post_to = (args.post.strip() or env_str(env, "HELPBOT_FEEDBACK_CHANNEL")) if args.post is not None else None
        if args.post is not None and not post_to:
            raise ConfigError("HELPBOT_FEEDBACK_CHANNEL", "not set: --post needs a channel ID (--post C0123456789)")
        if post_to and (not is_channel_id(post_to) or is_dm_id(post_to)):
            raise UsageError(f"helpbot feedback: --post {post_to!r} is not a channel ID (like C0123456789)")

        def scan_and_report(scanner: Scanner) -> int:
            guard.narrow(hosts=[guard.host_of(scanner.workspace_url) or ""])  # permalinks keep their thread
            answers = [answer for channel in channels for answer, _ in scanner.scan(channel, since)]
            full = Report(since=since, until=now, channels=channels, answers=answers)
            private = {channel for channel in channels if not scanner.is_public(channel)}
            public_log = guard.records_public(env)  # a public repository's log is everyone's: no channel's answers
            hidden = set(channels) if public_log else private
            left_out = sorted(hidden) if env.get("GITHUB_ACTIONS") == "true" or public_log else []
            report = for_audience(full, hidden) if left_out else full
            scanner.add_permalinks(full.negative)
            if args.json:
                guard.out(json.dumps({**report.to_json(tz), "private_channels_left_out": left_out},
                                     ensure_ascii=False, indent=2), file=out)
            else:
                guard.out(csv_text(report, tz) if args.csv else render_text(report, tz), file=out)
            if left_out and not args.json:
                guard.err(("helpbot feedback: answers left out of the Actions log (a public repository; "
                           "HELPBOT_PUBLIC_RECORDS=true keeps them): " if public_log else
                           "helpbot feedback: answers in private channels left out of the Actions log: ")
                          + f"{', '.join(left_out)} (run it locally to see them)")
            if post_to:
                payload = summary_payload(for_audience(full, private, channel=post_to), tz)
                posted = guard.slack_call(slack_platform.call, scanner.ctx, channel=post_to, **payload, **POST_OPTIONS)
                guard.err(f"helpbot feedback: posted the summary to {post_to} (ts {posted.get('ts')})")
            return 0

        return ratings.slack_command(env, "feedback", scan_and_report, clock=clock, page_size=page_size)


def for_audience(report: Report, private: set[str], *, channel: str | None = None) -> Report:
    """The report for readers outside the private channels -- or inside ``channel``, whose answers stay."""
    return replace(report, answers=[a for a in report.answers if a.channel not in private or a.channel == channel])


def main(args: argparse.Namespace) -> int:
    return run(args, dict(os.environ))
