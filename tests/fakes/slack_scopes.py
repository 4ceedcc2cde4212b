"""Slack's OAuth scopes for the fake Slack: what each call needs (``mcp_lib.slack_scopes``, per conversation kind)
and what the app manifest grants each token.

The fake answers a call whose token lacks the scope as Slack does: HTTP 200 ``{"ok": false, "error":
"missing_scope", "needed": "channels:history", "provided": "search:read"}``. The granted scopes come from
``docs/slack-app-manifest.yml`` -- the file a team pastes into Slack -- so a scope missing there fails a test here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from mcp_lib.slack_scopes import EVENT_SCOPES, FAMILY, METHOD_SCOPES, Kind

MANIFEST = Path(__file__).resolve().parents[2] / "docs" / "slack-app-manifest.yml"
__all__ = ["EVENT_SCOPES", "METHOD_SCOPES", "granted", "manifest", "needed"]
_LIST_TYPES: dict[str, Kind] = {"public_channel": "public", "private_channel": "private", "im": "im",
                                "mpim": "mpim"}


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
