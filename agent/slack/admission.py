"""Who may start a run, where, and with which sources: one policy for reactions, mentions, follow-ups and manual
runs (docs/security.md states it). The relay holds no Slack token and decides from the event alone
(:func:`check_ignore`); ``helpbot answer`` re-checks that and decides the rest with Slack's answers (:func:`admit`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent.errors import ConfigError
from agent.slack.trigger import (
    DEFAULT_REACTION,
    REACTION_RE,
    RESERVED_REACTIONS,
    Sender,
    Trigger,
    canonical_reaction,
    env_channels,
    obj_at,
    sender_of,
)
from mcp_lib import ids
from mcp_lib.config import env_list, env_str
from mcp_lib.ids import USER_RE
from mcp_lib.payload import count

if TYPE_CHECKING:
    from agent.slack.handle import Slack

SLACKBOT = "USLACKBOT"
BOT_ID_RE = re.compile(r"B[A-Z0-9]{2,20}")
SHARED_SOURCES = ("slack", "redmine", "github", "growi")  # the FAQ is always offered
MANUAL_SOURCES = frozenset({"workflow_dispatch", "cli"})
NOTICE = ("helpbot は、社外の組織と共有されたチャンネルや社外の方からの依頼には、社内の情報源から回答しません。"
          "（この表示はあなたにだけ見えています）")


@dataclass(frozen=True)
class TriggerSettings:
    """The environment's say on which triggers to answer and with what (read once; bad values are ConfigError)."""

    reaction: str = DEFAULT_REACTION
    channels: frozenset[str] = frozenset()
    bot_user_id: str | None = None
    allowed_bots: frozenset[str] = frozenset()
    shared_channels: frozenset[str] = frozenset()
    shared_sources: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TriggerSettings:
        reaction = canonical_reaction(env_str(env, "HELPBOT_REACTION") or DEFAULT_REACTION)
        if not REACTION_RE.fullmatch(reaction):
            raise ConfigError("HELPBOT_REACTION", f"{reaction!r} is not an emoji name (like help)")
        if reaction in RESERVED_REACTIONS:
            raise ConfigError("HELPBOT_REACTION", f":{reaction}: is a reaction helpbot adds itself (working, done, "
                                                  "failed); choose another, like help")
        bot = configured_bot_user(env)
        allowed = env_list(env, "HELPBOT_ALLOWED_BOTS")
        for bot_id in allowed:
            if not BOT_ID_RE.fullmatch(bot_id):
                raise ConfigError("HELPBOT_ALLOWED_BOTS", f"{bot_id[:40]!r} is not a Slack bot ID (like B0123456789)")
        sources = list(dict.fromkeys(name.lower() for name in env_list(env, "HELPBOT_SHARED_SOURCES")))
        unknown = [name for name in sources if name not in (*SHARED_SOURCES, "faq")]
        if unknown:
            raise ConfigError("HELPBOT_SHARED_SOURCES", f"unknown platform {unknown[0][:40]!r}; choose from "
                                                        f"{', '.join(SHARED_SOURCES)} (the FAQ is always offered)")
        return cls(reaction=reaction, channels=frozenset(env_channels(env, "HELPBOT_CHANNELS")), bot_user_id=bot,
                   allowed_bots=frozenset(allowed),
                   shared_channels=frozenset(env_channels(env, "HELPBOT_SHARED_CHANNELS")),
                   shared_sources=tuple(s for s in sources if s != "faq"))

    def refuses(self, channel: str) -> str | None:
        """Why helpbot does not work in ``channel`` (a DM, or one outside HELPBOT_CHANNELS when it is set)."""
        if ids.is_dm_id(channel):
            return f"{channel} is a direct message; helpbot answers in channels only"
        if self.channels and channel not in self.channels:
            return f"channel {channel} is not in HELPBOT_CHANNELS"
        return None


def configured_bot_user(env: Mapping[str, str]) -> str | None:
    """HELPBOT_BOT_USER_ID, helpbot's own user id when a run cannot ask ``auth.test`` (ConfigError when malformed)."""
    bot = env_str(env, "HELPBOT_BOT_USER_ID")
    if bot and not USER_RE.fullmatch(bot):
        raise ConfigError("HELPBOT_BOT_USER_ID", f"{bot!r} is not a Slack user ID (like U0123456789)")
    return bot


def sender_is_bot(sender: Sender) -> bool:
    """A bot, app or integration posted the event's message: its own fields say so."""
    return bool(sender.bot_id or sender.app_id or sender.subtype == "bot_message")


def check_ignore(trigger: Trigger, settings: TriggerSettings) -> Decision | None:
    """The ignores that need no Slack call, the relay's whole policy; ``helpbot answer`` then calls :func:`admit`."""
    what = "mention" if trigger.mention else "reaction"
    if trigger.reaction is not None and trigger.reaction != settings.reaction:
        return Decision("ignore", f"reaction :{trigger.reaction}: is not :{settings.reaction}:")
    if trigger.channel and (refused := settings.refuses(trigger.channel)):
        return Decision("ignore", refused)
    if settings.bot_user_id and trigger.item_user == settings.bot_user_id:
        return Decision("ignore", "the message was written by helpbot itself")
    if settings.bot_user_id and trigger.user == settings.bot_user_id:
        return Decision("ignore", "the mention was written by helpbot itself" if trigger.mention
                        else "the reaction was added by helpbot itself")
    if trigger.user == SLACKBOT:
        return Decision("ignore", f"the {what} is Slackbot's; helpbot answers people")
    sender = trigger.sender
    if sender is not None and sender_is_bot(sender):
        if not (sender.bot_id and sender.bot_id in settings.allowed_bots):
            return Decision("ignore", f"the {what} was posted by a bot or app "
                            f"({sender.bot_id or sender.app_id or sender.subtype}; not in HELPBOT_ALLOWED_BOTS)")
        return None
    if trigger.source not in MANUAL_SOURCES and not trigger.user and (sender is not None or not trigger.mention):
        return Decision("ignore", f"the {what} names no user; helpbot answers people")
    return None


@dataclass(frozen=True)
class Asker:
    """Who asked, as far as the policy cares; ``notify``: the Slack user told when refused (None: nobody to tell)."""

    who: str  # for the log: a user id, a bot id, or the GitHub actor
    bot_id: str | None = None
    bot: bool = False
    member: bool = True  # a full member of the home team: not a guest, not another organization's
    deleted: bool = False
    notify: str | None = None


@dataclass(frozen=True)
class Home:
    """The home team: ``auth.test``'s ``team_id`` and, in an Enterprise Grid organization, ``enterprise_id``."""

    team_id: str | None = None
    enterprise_id: str | None = None

    @classmethod
    def from_auth(cls, auth: Mapping[str, Any]) -> Home:
        return cls(str(auth.get("team_id") or "") or None, str(auth.get("enterprise_id") or "") or None)

    def has(self, team: str | None) -> bool:
        return bool(team) and team in (self.team_id, self.enterprise_id)


def manual_asker(actor: str | None) -> Asker:
    return Asker(who=f"GitHub user {actor}" if actor else "the operator (run by hand)")


def user_asker(user: Mapping[str, Any], home: Home, sender: Sender | None = None) -> Asker:
    """An asker from ``users.info``'s user object (https://api.slack.com/types/user)."""
    uid = str(user.get("id") or "")
    if user.get("is_bot") or user.get("is_app_user") or uid == SLACKBOT:
        bot_id = obj_at(user, "profile").get("bot_id") if uid != SLACKBOT else None
        return Asker(who=uid, bot_id=str(bot_id) if bot_id else None, bot=True)
    same_team = home.has(str(user.get("team_id") or "")) or (
        bool(home.enterprise_id) and obj_at(user, "enterprise_user").get("enterprise_id") == home.enterprise_id)
    guest = bool(user.get("is_restricted") or user.get("is_ultra_restricted") or user.get("is_stranger"))
    foreign_event = sender is not None and bool(sender.team and sender.home) and sender.team not in sender.home
    return Asker(who=uid, member=same_team and not guest and not foreign_event, deleted=bool(user.get("deleted")),
                 notify=uid or None)


def shared_with_others(info: Mapping[str, Any], sender: Sender | None = None) -> bool:
    """The channel is (or is being) shared with another organization; unreadable info counts as shared."""
    if (sender is not None and sender.shared) or "is_ext_shared" not in info:
        return True
    return bool(info.get("is_ext_shared") or info.get("is_pending_ext_shared")
                or (info.get("is_shared") and not info.get("is_org_shared")))


@dataclass(frozen=True)
class Decision:
    """``answer`` (from every platform, or only ``sources``), ``notice`` (tell ``notify``, then end as ignored),
    ``ignore``, or ``refuse`` (bad input: exit 2); ``reason`` is the log line."""

    verdict: Literal["answer", "notice", "ignore", "refuse"]
    reason: str = ""
    sources: frozenset[str] | None = None
    notify: str | None = None


def admit(asker: Asker, channel: str, info: Mapping[str, Any], settings: TriggerSettings,
          sender: Sender | None = None) -> Decision:
    """The whole policy on an asker in a channel (the event-alone part, :func:`check_ignore`, ran first)."""
    if asker.deleted:
        return Decision("ignore", f"the asker {asker.who} is deactivated")
    if asker.bot and not (asker.bot_id and asker.bot_id in settings.allowed_bots):
        return Decision("ignore", f"asked by a bot or app ({asker.bot_id or asker.who}; not in HELPBOT_ALLOWED_BOTS)")
    shared = shared_with_others(info, sender)
    if channel in settings.shared_channels and (shared or not asker.member):
        return Decision("answer", f"{channel} is in HELPBOT_SHARED_CHANNELS: the FAQ"
                        + "".join(f", {s}" for s in settings.shared_sources) + " only",
                        sources=frozenset({"faq", *settings.shared_sources}))
    if shared:
        why = f"{channel} is shared with other organizations and not in HELPBOT_SHARED_CHANNELS"
    elif not asker.member:
        why = f"the asker {asker.who} is not a member of this workspace (a guest or another organization's)"
    else:
        return Decision("answer")
    return Decision("notice", why, notify=asker.notify) if asker.notify else Decision("ignore", why)


def unread(trigger: Trigger, info: Mapping[str, Any], settings: TriggerSettings) -> Decision | None:
    """Why the message is not read at all (None: it may be). A group DM is ignored (a DM already was, by its D id).
    A private channel that a link given by hand points into is refused unless HELPBOT_CHANNELS lists it: anyone
    who may run the workflow could otherwise have helpbot read it into Actions."""
    from agent.slack.handle import is_public
    from mcp_lib.platforms.slack import is_dm

    channel = str(trigger.channel)
    if is_dm(info):
        return Decision("ignore", f"{channel} is a group DM; helpbot answers in channels only")
    if trigger.source == "workflow_dispatch" and not is_public(info) and channel not in settings.channels:
        return Decision("refuse", f"{channel} is a private channel (or its privacy cannot be read); a message link "
                                  "given by hand is answered there only when HELPBOT_CHANNELS lists it")
    return None


def decide(slack: Slack, trigger: Trigger, message: Mapping[str, Any], info: Mapping[str, Any],
           settings: TriggerSettings, actor: str | None) -> Decision:
    """:func:`admit` on who asked: whoever ran it by hand (``actor``), a mention's author, or who reacted."""
    sender = sender_of({}, message, message=True)  # a mention's message may itself say it is a bot's (or no one's)
    if trigger.source in MANUAL_SOURCES:
        asker = manual_asker(actor)
    elif trigger.reaction is not None and not reacted(slack, trigger, message):
        return Decision("ignore", f"{trigger.user} has no :{trigger.reaction}: on message {trigger.ts} (a payload "
                                  "names who reacted; Slack's copy of the message decides)")
    elif trigger.mention and (sender_is_bot(sender) or not message.get("user")):
        asker = Asker(who=sender.bot_id or sender.app_id or sender.subtype or "no user", bot_id=sender.bot_id, bot=True)
    else:
        user = str(message.get("user")) if trigger.mention else str(trigger.user)
        asker = user_asker(slack.user(user), Home.from_auth(slack.auth()), trigger.sender)
    return admit(asker, str(trigger.channel), info, settings, trigger.sender)


def reacted(slack: Slack, trigger: Trigger, message: Mapping[str, Any]) -> bool:
    """Whether the payload's ``user`` really reacted, per the message as Slack reads it back: whoever holds the
    dispatch token, or writes a zap, can name anyone as the reactor."""
    def users(of: Mapping[str, Any]) -> tuple[list[str], bool]:
        """Who reacted with it (every skin tone is its own entry) and whether Slack listed only some of them."""
        entries = [e for e in of.get("reactions") or []  # objects, with lists of users: client.call
                   if canonical_reaction(str(e.get("name") or "")) == trigger.reaction]
        listed = [str(u) for e in entries for u in e.get("users") or []]
        return listed, any(count(e.get("count")) > len(e.get("users") or []) for e in entries)

    listed, more = users(message)
    if trigger.user in listed:
        return True
    if not more:
        return False
    full = slack.call("reactions.get", channel=trigger.channel, timestamp=trigger.ts, full=True).get("message") or {}
    return trigger.user in users(full)[0]

