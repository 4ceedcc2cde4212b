"""docs/slack-app-manifest.yml: valid for Slack, and granting exactly the scopes helpbot's calls need.

The schema rules checked here are those of Slack's published manifest schema (slackapi/manifest-schema,
schemas/manifest.schema.2.0.0.json) for the parts this manifest uses, written out by hand: allowed keys,
required keys, string lengths, patterns, list sizes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from mcp_lib.slack_scopes import RECOGNISE_DMS, method_needs, token_of
from tests.fakes import slack_scopes
from tests.fakes.slack import USER_TOKEN, FakeSlack, Token, sample_workspace

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = slack_scopes.manifest()

# -- Slack's manifest schema (2.0.0), the rules for what we use ------------------------------------------------
Str = tuple[int, int, str | None]  # min length, max length, pattern
RULES: dict[str, dict[str, Any]] = {
    "": {"required": {"display_information"},
         "keys": {"$schema", "_metadata", "app_directory", "display_information", "features", "oauth_config",
                  "settings", "functions", "workflows", "datastores", "outgoing_domains", "types",
                  "external_auth_providers", "mcp_servers"}},
    "display_information": {"required": {"name"}, "keys": {"name", "description", "background_color",
                                                           "long_description"},
                            "strings": {"name": (1, 35, None), "description": (1, 140, None),
                                        "background_color": (4, 7, r"#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?"),
                                        "long_description": (175, 4000, None)}},
    "features": {"keys": {"app_home", "bot_user", "functions", "shortcuts", "slash_commands", "workflow_steps",
                          "unfurl_domains", "assistant_view", "agent_view"}},
    "features.bot_user": {"required": {"display_name"}, "keys": {"display_name", "always_online"},
                          "strings": {"display_name": (1, 80, None)}, "booleans": {"always_online"}},
    "oauth_config": {"keys": {"redirect_urls", "scopes", "token_management_enabled", "pkce_enabled"}},
    "oauth_config.scopes": {"keys": {"user", "bot", "user_optional", "bot_optional"},
                            "lists": {"user": (255, 50, False), "bot": (255, 50, False),
                                      "user_optional": (255, 50, False), "bot_optional": (255, 50, False)}},
    "settings": {"keys": {"allowed_ip_address_ranges", "event_subscriptions", "incoming_webhooks", "interactivity",
                          "org_deploy_enabled", "socket_mode_enabled", "is_hosted", "token_rotation_enabled",
                          "siws_links", "hermes_app_type", "function_runtime", "is_mcp_enabled"},
                 "booleans": {"org_deploy_enabled", "socket_mode_enabled", "is_hosted", "token_rotation_enabled",
                              "is_mcp_enabled"}},
    "settings.event_subscriptions": {"keys": {"request_url", "user_events", "bot_events", "metadata_subscriptions"},
                                     "strings": {"request_url": (0, 3500, r"https?://.*")},
                                     "lists": {"user_events": (100, 50, True), "bot_events": (100, 50, True)}},
    "settings.interactivity": {"required": {"is_enabled"}, "keys": {"is_enabled", "request_url",
                                                                    "message_menu_options_url"},
                               "strings": {"request_url": (0, 3500, r"https?://.*"),
                                           "message_menu_options_url": (0, 3500, r"https?://.*")},
                               "booleans": {"is_enabled"}},
}


def problems(manifest: Any) -> list[str]:
    """What Slack's schema would reject in ``manifest``, for the sections in RULES."""
    found: list[str] = []
    for path, rule in RULES.items():
        node: Any = manifest
        for part in filter(None, path.split(".")):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        where = path or "(top level)"
        if not isinstance(node, dict):
            found.append(f"{where}: not a mapping")
            continue
        found += [f"{where}: missing {key}" for key in sorted(rule.get("required", set()) - set(node))]
        found += [f"{where}: unknown key {key}" for key in sorted(set(node) - rule["keys"])]
        for key, (low, high, pattern) in rule.get("strings", {}).items():
            if key in node:
                value = node[key]
                if not isinstance(value, str) or not low <= len(value) <= high \
                        or (pattern and not re.fullmatch(pattern, value)):
                    found.append(f"{where}.{key}: {value!r} is not a string of {low}-{high} characters"
                                 + (f" matching {pattern}" if pattern else ""))
        for key in rule.get("booleans", set()) & set(node):
            if not isinstance(node[key], bool):
                found.append(f"{where}.{key}: {node[key]!r} is not a boolean")
        for key, (max_items, max_length, unique) in rule.get("lists", {}).items():
            if key in node:
                items = node[key]
                if not isinstance(items, list) or len(items) > max_items \
                        or not all(isinstance(i, str) and len(i) <= max_length for i in items) \
                        or (unique and len(set(items)) != len(items)):
                    found.append(f"{where}.{key}: not a list of at most {max_items} strings of at most {max_length}"
                                 + (" unique" if unique else ""))
    return found


def test_the_manifest_follows_slacks_schema() -> None:
    assert problems(MANIFEST) == []


@pytest.mark.parametrize("broken,expected", [
    ({"display_information": {"name": "helpbot", "description": None}}, "description: None is not a string"),
    ({"display_information": {"name": "x" * 36}}, "name: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is not a string"),
    ({"display_information": {"name": "h", "background_color": "blue"}}, "background_color: 'blue'"),
    ({"display_information": {"name": "h"}, "settings": {"event_subscriptions": {"bot_events": ["a", "a"]}}},
     "bot_events: not a list"),
    ({"display_information": {"name": "h"}, "oauth_config": {"scope": {}}}, "unknown key scope"),
    ({"features": {}}, "missing display_information"),
    ({"display_information": {"name": "h"}, "settings": {"interactivity": {"request_url": "https://r.example"}}},
     "interactivity: missing is_enabled"),
    ({"display_information": {"name": "h"}, "settings": {"interactivity": {"is_enabled": True,
                                                                           "request_url": "relay.example"}}},
     "request_url: 'relay.example' is not a string"),
])
def test_the_schema_check_rejects_what_slack_rejects(broken: dict[str, Any], expected: str) -> None:
    assert any(expected in p for p in problems(broken)), problems(broken)


def test_the_old_inline_description_is_what_broke_the_yaml() -> None:
    import yaml

    with pytest.raises(yaml.YAMLError, match="mapping values are not allowed here"):
        yaml.safe_load("display_information:\n  name: helpbot\n  description: Answers :help: questions\n")


def test_the_setup_docs_include_the_manifest_file_and_hold_no_copy() -> None:
    setup = (ROOT / "docs" / "slack-setup.md").read_text(encoding="utf-8")
    assert "(slack-app-manifest.yml)" in setup
    assert "oauth_config:" not in setup and "bot_events:" not in setup


# -- scopes: every method helpbot calls, with the token that calls it -------------------------------------------
def called_methods() -> set[str]:
    """Slack methods named in agent/ and mcp_lib/: ``"chat.postMessage"`` strings and slack_sdk calls such as
    ``client.chat_update(...)`` (a WebClient attribute)."""
    found: set[str] = set()
    for path in [*(ROOT / "agent").rglob("*.py"), *(ROOT / "mcp_lib").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"(auth|chat|conversations|reactions|users|search|files|team|bots|pins)"
                                     r"\.[a-z][A-Za-z.]+", node.value) \
                    and not node.value.endswith(".slack.com"):  # a host (files.slack.com), not a method
                found.add(node.value)
            elif isinstance(node, ast.Attribute) and re.fullmatch(r"[a-z]+_[a-z][A-Za-z_]*", node.attr) \
                    and callable(getattr(WebClient, node.attr, None)) and node.attr.split("_")[0] in (
                        "auth", "chat", "conversations", "reactions", "users", "search", "files", "team"):
                found.add(node.attr.replace("_", ".", 1).replace("_", "."))
    return found


def test_the_scan_sees_the_calls() -> None:
    methods = called_methods()
    assert {"chat.postMessage", "chat.update", "reactions.add", "conversations.replies", "search.messages"} <= methods


def test_every_called_method_is_covered_by_a_scope_of_the_token_that_calls_it() -> None:
    methods = called_methods()
    unknown = sorted(methods - set(slack_scopes.METHOD_SCOPES))
    assert unknown == [], "add the method's scope to mcp_lib/slack_scopes.py (and its fake to the fake Slack)"
    missing = {m: sorted(method_needs(m) - slack_scopes.granted(token_of(m))) for m in methods}
    assert {m: s for m, s in missing.items() if s} == {}


def test_the_feedback_buttons_clicks_reach_the_relay() -> None:
    """The buttons' clicks (block_actions) go to the interactivity URL, which the relay serves beside the events."""
    interactivity = MANIFEST["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    events = MANIFEST["settings"]["event_subscriptions"]["request_url"]
    assert interactivity["request_url"].split("/slack/")[0] == events.split("/slack/")[0]


def test_every_subscribed_event_has_its_scope() -> None:
    events = MANIFEST["settings"]["event_subscriptions"]["bot_events"]
    assert "reaction_added" in events
    assert all(slack_scopes.EVENT_SCOPES[e] in slack_scopes.granted("bot") for e in events)


def test_no_scope_is_granted_that_no_call_or_event_needs() -> None:
    methods = called_methods()
    used = {s for m in methods for s in method_needs(m)} | {slack_scopes.EVENT_SCOPES[e] for e in
                                                            MANIFEST["settings"]["event_subscriptions"]["bot_events"]}
    used |= {s for m in methods for s in RECOGNISE_DMS.get(m, ())}  # recognise a DM or group DM, and refuse it
    assert sorted(slack_scopes.granted("bot") - used) == [] and slack_scopes.granted("user") == {"search:read"}


# -- the fake Slack enforces them ---------------------------------------------------------------------------------
def test_a_token_without_the_scope_gets_slacks_missing_scope() -> None:
    ws = sample_workspace()
    ws.tokens["xoxb-narrow"] = Token("bot", ws.bot_user_id, frozenset({"chat:write"}))
    with FakeSlack(ws) as fake:
        narrow = WebClient(token="xoxb-narrow", base_url=fake.url)
        with pytest.raises(SlackApiError) as refused:
            narrow.api_call("conversations.replies", params={"channel": "C0SECRET", "ts": "1.1"})
    assert refused.value.response.data == {"ok": False, "error": "missing_scope", "needed": "groups:history",
                                           "provided": "chat:write"}


def test_a_dry_run_cannot_read_a_thread_with_the_user_token_alone() -> None:
    # docs/slack-setup.md: a dry run reads with SLACK_BOT_TOKEN; the user token has only search:read.
    ws = sample_workspace()
    question = ws.history("C0ECSUP")[0]
    with FakeSlack(ws) as fake:
        user = WebClient(token=USER_TOKEN, base_url=fake.url)
        with pytest.raises(SlackApiError) as refused:
            user.api_call("conversations.replies", params={"channel": "C0ECSUP", "ts": question.ts})
        assert user.api_call("search.messages", params={"query": "在庫"}).data["ok"] is True
    answer = refused.value.response.data
    assert answer["error"] == "missing_scope" and answer["needed"] == "channels:history"
