"""Slack's OAuth scopes for the fake Slack: what each method needs, and what the app manifest grants each token.

The fake answers a call whose token lacks the scope as Slack does: HTTP 200 ``{"ok": false, "error":
"missing_scope", "needed": "channels:history", "provided": "search:read"}``. The granted scopes come from
``docs/slack-app-manifest.yml`` -- the file a team pastes into Slack -- so a scope missing there fails a test here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "docs" / "slack-app-manifest.yml"

Kind = Literal["public", "private", "im", "mpim"]
# The scope families by conversation kind, as Slack names them (channels:history, groups:read, im:history, ...).
FAMILY: dict[Kind, str] = {"public": "channels", "private": "groups", "im": "im", "mpim": "mpim"}
_LIST_TYPES: dict[str, Kind] = {"public_channel": "public", "private_channel": "private", "im": "im",
                                "mpim": "mpim"}

# Slack's documented scope of each method the fake answers. "history"/"read": the family of the conversation in
# the ``channel`` parameter (channels:history for a public channel, groups:history for a private one, ...).
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
    "chat.update": ("chat:write",),
    "chat.delete": ("chat:write",),
    "reactions.add": ("reactions:write",),
    "reactions.remove": ("reactions:write",),
    "reactions.get": ("reactions:read",),
    "files.info": ("files:read",),
}
# The event helpbot subscribes to and the scope Slack requires for it.
EVENT_SCOPES = {"reaction_added": "reactions:read", "app_mention": "app_mentions:read"}


@cache
def manifest() -> dict[str, Any]:
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{MANIFEST} is not a YAML mapping"
    return data


def granted(kind: str) -> frozenset[str]:
    """The scopes the manifest gives the ``bot`` or ``user`` token."""
    scopes = (manifest().get("oauth_config") or {}).get("scopes") or {}
    return frozenset(scopes.get(kind) or ())


def needed(method: str, params: dict[str, Any], kind_of: dict[str, Kind]) -> list[str]:
    """The scopes a call needs (all of them); ``kind_of`` maps channel ids to their kind. An unknown channel
    needs nothing here: the method itself answers channel_not_found."""
    rule = METHOD_SCOPES.get(method, ())
    if rule == "list":
        types = str(params.get("types") or "public_channel").split(",")
        return [f"{FAMILY[_LIST_TYPES[t.strip()]]}:read" for t in types if t.strip() in _LIST_TYPES]
    if rule in ("history", "read"):
        kind = kind_of.get(str(params.get("channel") or ""))
        return [f"{FAMILY[kind]}:{rule}"] if kind else []
    return list(rule)  # type: ignore[arg-type]
