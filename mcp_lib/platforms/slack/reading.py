"""Reading Slack for the tools: permalinks, names and channels (cached per client), the security rules, and
messages turned into result items."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from ... import ids
from ...core import ToolContext, ToolError, in_background
from ...cutting import excerpt, squash_whitespace
from ...errors import ChannelNotFound, RateLimited
from ...redact import redact_secrets
from .client import SlackClients, call

# -- lookups (cached per client) ----------------------------------------------------------------------------
SEARCH_PAGE = 100  # search.messages' largest page
SEARCH_PAGES = 5  # how far a search pages on past hidden matches
CHANNEL_PAGES = 5  # x 200 channels
NAMES_AHEAD = 20  # people of one thread whose names are looked up at once
# users.info lookups for names per client and minute: a thread's people are far fewer, and half of Slack's Tier 4
# (~100 a minute) leaves the workspace's users.info to the front's asker check and to other runs; a minute on (a
# long-lived MCP server's client), names are looked up again
MAX_NAME_LOOKUPS = 50
NAME_LOOKUPS_FOR_S = 60.0


def _unreadable(channel: str) -> ToolError:
    """The one answer for a channel that cannot be read, whatever the reason, naming only what the caller wrote."""
    return ToolError(f"no readable channel {channel.strip()!r} (DMs, and private channels other than the one "
                     "the answer goes to, are never read); list channels with slack_getChannels")


def whoami(ctx: ToolContext) -> dict[str, Any]:
    """``auth.test`` of the reading token, asked once per client: who it is, its team, the workspace URL."""
    clients: SlackClients = ctx.client
    if clients.auth is None:
        clients.auth = call(ctx, "auth.test")
    return clients.auth


def workspace_url(ctx: ToolContext) -> str:
    return str(whoami(ctx).get("url") or "https://slack.com").rstrip("/") + "/"


def names_ahead(ctx: ToolContext, messages: Iterable[Mapping[str, Any]]) -> None:
    """The display names of the messages' authors, then of the people they mention (the first NAMES_AHEAD), looked
    up at once on daemon threads while the caller goes on (the front posts its placeholder): message_item and plain
    take them. Authors first: a message of many mentions takes no author's place, nor MAX_NAME_LOOKUPS."""
    clients: SlackClients = ctx.client
    wanted = dict.fromkeys([*(str(m["user"]) for m in messages if m.get("user")),
                            *(user for m in messages for user in _MENTION.findall(str(m.get("text") or "")))])
    for user in [u for u in wanted if u not in clients.users and u not in clients.names_pending][:NAMES_AHEAD]:
        clients.names_pending[user] = in_background(partial(_look_up_name, ctx, user), "slack-name")


def user_info(ctx: ToolContext, user_id: str, *, patient: bool = True) -> dict[str, Any]:
    """users.info's user, asked once per client: the names the tools show, and who may ask (the front's)."""
    clients: SlackClients = ctx.client
    if user_id not in clients.users:
        user = call(ctx, "users.info", patient=patient, user=user_id).get("user")
        clients.users[user_id] = user if isinstance(user, dict) else {}  # no user, or no object: no names
    return clients.users[user_id]


def person(ctx: ToolContext, user_id: str, *, patient: bool = False) -> dict[str, Any]:
    """users.info's user for a name shown or left out, {} when unknown: the lookup never fails, waits only when
    ``patient``, is not tried again after a failure (for anyone, while users.info is rate limited), nor past
    :data:`MAX_NAME_LOOKUPS` (a 40,000-character message holds 3,000 mentions: as many lookups, rate limited)."""
    clients: SlackClients = ctx.client
    pending = clients.names_pending.get(user_id)
    if pending is None:
        _look_up_name(ctx, user_id, patient)
    elif pending.exception() is not None:  # looked up ahead, and failed unexpectedly: unknown, not again
        clients.unknown_users.add(user_id)
    return clients.users.get(user_id) or {}


def _user_name(ctx: ToolContext, user_id: str, fallback: str | None = None) -> str:
    """Display name of :func:`person`; ``fallback`` (or the id) when unknown."""
    user = person(ctx, user_id)
    profile = found if isinstance(found := user.get("profile"), dict) else {}
    return str(profile.get("display_name") or user.get("real_name") or user.get("name") or fallback or user_id)


def _look_up_name(ctx: ToolContext, user_id: str, patient: bool = False) -> None:
    clients: SlackClients = ctx.client
    if (now := ctx.clock.monotonic()) >= clients.name_lookups_until:
        clients.names_again(now + NAME_LOOKUPS_FOR_S)
    if (user_id in clients.users or user_id in clients.unknown_users
            or now < clients.user_lookups_paused_until
            or next(clients.name_lookups) >= MAX_NAME_LOOKUPS):  # next() is atomic: names_ahead's threads too
        return
    try:
        user_info(ctx, user_id, patient=patient)
    except RateLimited as exc:
        clients.user_lookups_paused_until = ctx.clock.monotonic() + (exc.retry_after or 30.0)
    except ToolError:
        clients.unknown_users.add(user_id)


def channel_info(ctx: ToolContext, channel_id: str) -> dict[str, Any]:
    """conversations.info, cached per client: name and privacy, which the rules (and the front) decide on."""
    clients: SlackClients = ctx.client
    if channel_id not in clients.channel_info:
        info = call(ctx, "conversations.info", channel=channel_id).get("channel")
        if not isinstance(info, dict):  # a ToolError, as a failed lookup is: the front then knows only the id
            raise ToolError(f"Slack conversations.info answered no channel for {channel_id}")
        clients.channel_info[channel_id] = info
    return clients.channel_info[channel_id]


def list_channels(ctx: ToolContext) -> list[dict[str, Any]]:
    """Public channels and the private ones the token's user is in (never DMs); bounded pagination."""
    clients: SlackClients = ctx.client
    channels: list[dict[str, Any]] = []
    cursor = None
    for _ in range(CHANNEL_PAGES):
        data = call(ctx, "conversations.list", types="public_channel,private_channel", exclude_archived=True,
                     limit=200, cursor=cursor)
        channels += data.get("channels") or []
        cursor = data["response_metadata"].get("next_cursor")  # an object with a string: client.call's
        if not cursor:
            break
    channels = [c for c in channels if not is_dm(c)]
    for channel in channels:
        clients.channel_ids[str(channel.get("name"))] = str(channel["id"])
        clients.channel_info.setdefault(str(channel["id"]), channel)
    return channels


# -- the security rules -------------------------------------------------------------------------------------
def is_dm(channel: Mapping[str, Any]) -> bool:
    """A DM or group DM (a group DM may have a C id: ``is_mpim`` or its ``mpdm-`` name tells)."""
    return bool(channel.get("is_im") or channel.get("is_mpim") or str(channel.get("id", "")).startswith("D")
                or str(channel.get("name", "")).startswith("mpdm-"))


def is_private(channel: Mapping[str, Any]) -> bool:
    """A private channel (``G`` ids are the legacy private groups)."""
    return bool(channel.get("is_private") or channel.get("is_group") or str(channel.get("id", "")).startswith("G"))


def allowed(ctx: ToolContext, channel: Mapping[str, Any]) -> bool:
    """DMs never; a private channel only when the answer is posted in that same channel."""
    if is_dm(channel):
        return False
    return not is_private(channel) or channel.get("id") == ctx.caller.answer_channel


def readable_channel(ctx: ToolContext, channel: str) -> dict[str, Any]:
    """The info of a channel given by id (C…/G…/D…), ``<#C…|name>``, ``#name`` or ``name`` when the rules allow
    reading it; else the refusal an unknown channel gets."""
    clients: SlackClients = ctx.client
    channel_id = channel.strip()
    if channel_id.startswith("<#"):
        channel_id = channel_id[2:].rstrip(">").split("|", 1)[0]
    if not ids.is_channel_id(channel_id):
        name = channel_id.lstrip("#")
        if name not in clients.channel_ids:
            list_channels(ctx)
        channel_id = clients.channel_ids.get(name, "")
    if not channel_id or ids.is_dm_id(channel_id):  # refuse before any call
        raise _unreadable(channel)
    try:
        info = channel_info(ctx, channel_id)
    except ChannelNotFound:
        raise _unreadable(channel) from None
    if not allowed(ctx, info):
        raise _unreadable(channel)
    return info


def visible_matches(ctx: ToolContext, query: str) -> list[dict[str, Any]]:
    """The first :data:`SEARCH_PAGE` matches the rules let through, in Slack's order: pages are read on (at most
    :data:`SEARCH_PAGES`) so that hidden matches take no place -- a page of 100 with 3 DMs holds only 97 -- and
    the result is what a search without them gives. A later page that fails ends the paging, not the search."""
    visible: list[dict[str, Any]] = []
    for page in range(1, SEARCH_PAGES + 1):
        try:
            data = call(ctx, "search.messages", search=True, query=query, count=SEARCH_PAGE, page=page)
        except ToolError:
            if page == 1:
                raise
            break
        messages = data["messages"]  # matches and paging as client.call checked them
        matches = messages["matches"]
        visible += [m for m in matches if isinstance(m.get("channel"), dict) and m["channel"].get("id")
                    and allowed(ctx, m["channel"])]
        pages = messages["paging"].get("pages")
        last = len(matches) < SEARCH_PAGE or (isinstance(pages, int) and page >= pages)
        if len(visible) >= SEARCH_PAGE or last:
            break
    return visible[:SEARCH_PAGE]


# -- formatting ---------------------------------------------------------------------------------------------
# Inside markup no "<" (Slack writes a literal one as &lt;): else each "<http:" of "<http:" * 6600 is scanned to
# the message's end for its ">" (4.5 s for one 40,000-character message, growing with the square)
_MENTION = re.compile(rf"<@({ids.USER_RE.pattern})(?:\|[^<>]*)?>")  # ids.USER_RE: the one definition
_CHANNEL_REF = re.compile(r"<#([CG][A-Z0-9]+)\|([^<>]*)>")
_LINK = re.compile(r"<((?:https?|mailto):[^|<>]+)(?:\|([^<>]+))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^<>]*)?>")


def plain(ctx: ToolContext, text: str) -> str:
    """Slack's mrkdwn markup made readable: mentions as @name, channel refs as #name, links as label (url)."""
    text = _MENTION.sub(lambda m: "@" + _user_name(ctx, m.group(1)), text)
    text = _CHANNEL_REF.sub(lambda m: "#" + (m.group(2) or m.group(1)), text)
    text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if m.group(2) else m.group(1), text)
    text = _SPECIAL.sub(lambda m: "@" + m.group(1), text)
    return html.unescape(text)


def message_item(ctx: ToolContext, channel: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
    """A message (or a search match, with its own ``permalink``) as the tools and the front show it."""
    clients: SlackClients = ctx.client
    ts = str(message["ts"])  # a Slack ts: client.call leaves out every message without one
    when = datetime.fromtimestamp(float(ts), clients.config.tz)
    username = str(message.get("username") or "") or None
    if message.get("user"):
        author = _user_name(ctx, str(message["user"]), fallback=username)
    else:
        bot = found if isinstance(found := message.get("bot_profile"), dict) else {}
        author = str(username or bot.get("name") or message.get("bot_id") or "unknown")
    text = plain(ctx, str(message.get("text") or ""))
    channel_id, name = str(channel["id"]), str(channel.get("name") or channel["id"])
    permalink = str(message.get("permalink") or "")
    thread_ts = message.get("thread_ts") or parse_qs(permalink.partition("?")[2]).get("thread_ts", [""])[0] or None
    first = excerpt(squash_whitespace(redact_secrets(text)), 40)  # masked before the cut
    item: dict[str, Any] = {
        "url": permalink or ids.permalink(workspace_url(ctx), channel_id, ts, thread_ts),
        "title": f"#{name} @{author} {when:%Y-%m-%d %H:%M}" + (f": {first}" if first else ""),
        "channel": f"#{name}", "channel_id": channel_id, "author": author,
        "time": when.isoformat(timespec="seconds"), "ts": ts, "text": text,
    }
    if thread_ts:
        item["thread_ts"] = thread_ts
    if message.get("reply_count"):
        item["reply_count"] = message["reply_count"]
    if files := [str(f.get("name") or f.get("title")) for f in message.get("files") or [] if isinstance(f, dict)]:
        item["files"] = files
    return item


def epoch(ctx: ToolContext, value: str | None, name: str) -> str | None:
    """A Slack ts, Unix seconds, or an ISO date/time (in the configured zone) -> a Slack ts string."""
    raw = (value or "").strip()
    if not raw:
        return None
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return raw
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"{name}: {value!r} is neither a Slack ts nor a date like 2025-01-02 or "
                        "2025-01-02T10:00") from None
    if when.tzinfo is None:
        clients: SlackClients = ctx.client
        when = when.replace(tzinfo=clients.config.tz)
    return f"{when.timestamp():.6f}"


