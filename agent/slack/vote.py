"""A click on an answer's 👍/👎 buttons, kept in the answer's marker: one vote per person, the last click counts.

The relay, with no Slack token, checks what the signed payload alone says (:func:`click_vote`) and dispatches a
``slack-vote``; ``helpbot vote`` (vote.yml) checks it all again with Slack's word (:func:`record`) and re-sends the
answer's own text with the new marker, through the guard narrowed to what helpbot's message already carries.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from agent.errors import BadInput
from agent.slack import markers
from agent.slack.admission import SLACKBOT, TriggerSettings
from agent.slack.blocks import FEEDBACK_ACTION
from agent.slack.trigger import obj_at, read_event
from mcp_lib import ids
from mcp_lib.clock import SYSTEM_CLOCK, Clock

VOTE_EVENT_TYPE = "slack-vote"  # the repository_dispatch of a vote (vote.yml); a question's is slack-help
_URL = re.compile(r"https?://[^\s\"'<>|()\[\]\\]+")


@dataclass(frozen=True)
class Vote:
    """One person's click, as dispatched (``client_payload``): the clicked message, who, of which team, which."""

    channel: str
    ts: str
    user: str
    team: str
    vote: markers.Vote


def _text(value: Any, pattern: re.Pattern[str]) -> str | None:
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def click_vote(raw_body: bytes, settings: TriggerSettings) -> tuple[Vote, str] | str:
    """A feedback-button click (a ``block_actions`` payload) -> (the vote, its ``action_ts``), or why it is not one."""
    try:
        data = json.loads(parse_qs(raw_body.decode(), strict_parsing=True, max_num_fields=1)["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, RecursionError):  # a JSONDecodeError is a ValueError
        return "not an interaction payload"
    if not isinstance(data, dict) or data.get("type") != "block_actions":
        return "not a block_actions interaction"
    actions = data.get("actions")
    action = actions[0] if isinstance(actions, list) and len(actions) == 1 and isinstance(actions[0], dict) else {}
    vote = action.get("value")
    ours = action.get("type") == "feedback_buttons" and action.get("action_id") == FEEDBACK_ACTION
    if not ours or vote not in markers.VOTES:
        return "not a click of helpbot's feedback buttons"
    container, message, team, user = (obj_at(data, key) for key in ("container", "message", "team", "user"))
    channel, ts = _text(container.get("channel_id"), ids.CHANNEL_RE), _text(container.get("message_ts"), ids.TS_RE)
    if (container.get("type") != "message" or container.get("is_ephemeral") is not False or not channel or not ts
            or obj_at(data, "channel").get("id") != channel or message.get("ts") != ts):
        return "not a click on a message"
    if refused := settings.refuses(channel):
        return refused
    if not message.get("bot_id") or (settings.bot_user_id and message.get("user") != settings.bot_user_id):
        return f"message {ts} is not helpbot's"
    who, team_id = _text(user.get("id"), ids.USER_RE), _text(team.get("id"), ids.TEAM_RE)
    if not who or who in (SLACKBOT, settings.bot_user_id):
        return "no person clicked"
    if not team_id or user.get("team_id") not in (team_id, team.get("enterprise_id") or team_id):
        return "the click is not of the payload's team"
    return Vote(channel, ts, who, team_id, vote), str(action.get("action_ts") or "")


def load_vote(path: str | os.PathLike[str]) -> Vote:
    """The dispatched vote from vote.yml's event file: exactly :class:`Vote`'s keys, each well-formed (BadInput)."""
    try:
        event = json.loads(read_event(path))
    except (ValueError, RecursionError):
        event = None
    payload = event.get("client_payload") if isinstance(event, dict) else None
    if not isinstance(event, dict) or event.get("action") != VOTE_EVENT_TYPE or not isinstance(payload, dict):
        raise BadInput(f"helpbot vote: --event {str(path)!r} is not a {VOTE_EVENT_TYPE} repository_dispatch")
    checks = {"channel": ids.CHANNEL_RE, "ts": ids.TS_RE, "user": ids.USER_RE, "team": ids.TEAM_RE,
              "vote": re.compile("|".join(map(re.escape, markers.VOTES)))}
    unknown = len(set(payload) - set(checks))  # counted, never named: a key's newline would be a workflow command
    bad = [k for k, rule in checks.items() if not _text(payload.get(k), rule)]
    bad += [f"{unknown} unknown key"] if unknown else []
    if bad:
        raise BadInput(f"helpbot vote: the vote's {', '.join(bad)} is missing, unknown or malformed")
    return Vote(**payload)


def record(vote: Vote, env: Mapping[str, str], *, clock: Clock = SYSTEM_CLOCK) -> int:
    """The vote kept in the answer's marker, or one line saying why not (exit 0); Slack failures as the scans'."""
    from agent import guard
    from agent.slack.admission import user_asker
    from agent.slack.ratings import Scanner, slack_command
    from mcp_lib.platforms import slack as slack_platform

    named = False  # who voted what, in the log only where helpbot feedback would show the answer's ratings

    def ignored(why: str) -> int:
        who = f"{vote.user}'s" if named else "a"
        guard.err(f"helpbot vote: ignored {who} vote on {vote.channel}/{vote.ts}: {why}")
        return 0

    def keep(scanner: Scanner) -> int:
        nonlocal named
        named = not guard.current().private and scanner.is_public(vote.channel)
        if not scanner.home.has(vote.team):
            return ignored(f"team {vote.team} is not this workspace's")
        person = user_asker(scanner.call("users.info", user=vote.user).get("user") or {}, scanner.home)
        if person.bot or person.deleted or not person.member or scanner.me.is_me(vote.user):
            return ignored("the voter is not a member of the team")
        thread = list(scanner.pages("conversations.replies", channel=vote.channel, ts=vote.ts))
        marker, first, parts = next((found for found in markers.answers_in_sequence(thread, scanner.me)
                                     if vote.ts in {p.get("ts") for p in found[2]}), (None, {}, []))
        if marker is None:
            return ignored("the message is not helpbot's answer")
        if vote.ts != parts[-1].get("ts"):  # the buttons' part: one concurrency group per answer in vote.yml
            return ignored("the buttons are on the answer's last message")
        if marker.votes.get(vote.user) == vote.vote:
            return ignored("the same vote is already kept")
        if vote.user not in marker.votes and len(marker.votes) >= markers.MAX_VOTES:
            return ignored(f"the answer keeps {markers.MAX_VOTES} votes already")
        hosts = {h for url in _URL.findall(json.dumps(first, ensure_ascii=False)) if (h := guard.host_of(url))}
        guard.narrow(names=marker.stats.tools, hosts=hosts)  # what helpbot's own message already carries
        # the text alone: Slack keeps blocks left out (re-sent as read, markdown would become its rich_text)
        content = {"text": first["text"]} if first.get("text") else {"blocks": first.get("blocks") or []}
        guard.slack_call(slack_platform.call, scanner.ctx, update=True, channel=vote.channel, ts=first["ts"],
                         metadata=markers.voted(marker, vote.user, vote.vote), **content)
        what = f"{vote.user}'s {'👍' if vote.vote == markers.VOTES[0] else '👎'}" if named else "a vote"
        guard.err(f"helpbot vote: kept {what} on the answer {vote.channel}/{first['ts']}")
        return 0

    settings = TriggerSettings.from_env(env)
    with guard.installed(guard.Guard.from_env(env)):
        if refused := settings.refuses(vote.channel):
            return ignored(refused)
        return slack_command(env, "vote", keep, clock=clock)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event", required=True, metavar="FILE", help="the slack-vote repository_dispatch event "
                                                                        "($GITHUB_EVENT_PATH)")


def main(args: argparse.Namespace) -> int:
    return record(load_vote(args.event), dict(os.environ))

