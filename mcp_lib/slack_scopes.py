"""Slack's OAuth scopes as helpbot uses them: which scope each Slack method and event needs, and which token calls.
Declared once: the tests check the manifest and the fake Slack by it; docs/slack-setup.md's table derives from it."""

from __future__ import annotations

from typing import Literal

Token = Literal["bot", "user"]
Kind = Literal["public", "private", "im", "mpim"]
# The scope families by conversation kind, as Slack names them (channels:history, groups:read, im:history, ...).
FAMILY: dict[Kind, str] = {"public": "channels", "private": "groups", "im": "im", "mpim": "mpim"}
HELPBOT_READS: tuple[Kind, ...] = ("public", "private")  # DMs are only recognised (conversations.info), never read

# Slack's documented scope of each method helpbot calls. "history"/"read": the family of the conversation in the
# ``channel`` parameter (channels:history for a public channel, groups:history for a private one, ...); "list":
# the families of conversations.list's ``types``.
METHOD_SCOPES: dict[str, tuple[str, ...] | Literal["history", "read", "list"]] = {
    "auth.test": (),
    "users.info": ("users:read",),
    "conversations.info": "read",
    "conversations.list": "list",
    "conversations.history": "history",
    "conversations.replies": "history",
    "search.messages": ("search:read",),
    "chat.getPermalink": (),
    "chat.postMessage": ("chat:write",),
    "chat.postEphemeral": ("chat:write",),
    "chat.update": ("chat:write",),
    "chat.delete": ("chat:write",),
    "chat.startStream": ("chat:write",),  # https://docs.slack.dev/reference/methods/chat.startStream
    "chat.appendStream": ("chat:write",),
    "chat.stopStream": ("chat:write",),
    "reactions.add": ("reactions:write",),
    "reactions.remove": ("reactions:write",),
    "reactions.get": ("reactions:read",),
    "files.info": ("files:read",),
}
# The events helpbot subscribes to and the scope Slack requires for each.
EVENT_SCOPES = {"reaction_added": "reactions:read", "app_mention": "app_mentions:read"}
# conversations.info on a DM or group DM needs these, so that helpbot can recognise one and refuse it.
RECOGNISE_DMS = {"conversations.info": ("im:read", "mpim:read")}


def token_of(method: str) -> Token:
    """search.messages needs a user token; helpbot makes every other call with the bot token."""
    return "user" if method == "search.messages" else "bot"


def method_needs(method: str) -> set[str]:
    """Every scope ``method`` needs in the conversations helpbot reads (public and private channels)."""
    rule = METHOD_SCOPES[method]
    if isinstance(rule, tuple):
        return set(rule)
    return {f"{FAMILY[kind]}:{'history' if rule == 'history' else 'read'}" for kind in HELPBOT_READS}


def uses(scope: str) -> list[str]:
    """The methods (``chat.update``) and events (``reaction_added``) that need ``scope``, in declaration order."""
    methods = [m for m in METHOD_SCOPES if scope in method_needs(m) or scope in RECOGNISE_DMS.get(m, ())]
    return methods + [event for event, needed in EVENT_SCOPES.items() if needed == scope]


def token_scopes(token: Token) -> set[str]:
    """Every scope the ``token`` needs for helpbot's calls (and, the bot, its events): what the manifest grants it,
    and what ``helpbot doctor`` checks a live token holds."""
    scopes = {scope for method in METHOD_SCOPES if token_of(method) == token for scope in method_needs(method)}
    if token == "bot":
        scopes |= {scope for needed in RECOGNISE_DMS.values() for scope in needed} | set(EVENT_SCOPES.values())
    return scopes
