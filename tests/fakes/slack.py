"""A faithful local fake of the Slack Web API: a real HTTP server (stdlib, in a thread, port 0).

Point a real ``slack_sdk.WebClient`` at it (``base_url=fake.url``) and it answers like Slack does: the same JSON
shapes, HTTP 200 ``{"ok": false, "error": ...}`` for API errors, token checks, 429 with ``Retry-After``.
Nothing is monkeypatched; the code under test talks HTTP.

Usage::

    from tests.fakes.slack import BOT_TOKEN, USER_TOKEN, FakeSlack, Workspace

    ws = Workspace()                                   # the bot (U0HELPBOT) and one human (U0OWNER)
    ws.add_user("U0TANAKA", "tanaka", real_name="田中 太郎")
    general = ws.add_channel("C0GENERAL", "general", members={"U0TANAKA"})   # bot is a member by default
    question = ws.post("C0GENERAL", "在庫同期が遅れています", user="U0TANAKA")
    with FakeSlack(ws) as fake:                        # or the ``fake_slack`` fixture below
        client = WebClient(token=BOT_TOKEN, base_url=fake.url)
        client.chat_postMessage(channel="C0GENERAL", thread_ts=question.ts, text="調べています…",
                                metadata={"event_type": "helpbot_answer", "event_payload": {"q": question.ts}})
        ws.thread("C0GENERAL", question.ts)           # -> [question, the bot's reply] (Message objects)
        fake.calls("chat.postMessage")                 # recorded requests: method, params, token kind, status

Workspace state (plain dataclasses, inspect and seed them freely; all access goes through ``ws.lock``):
- ``ws.users`` {id: User}, ``ws.channels`` {id: Channel}, ``ws.messages`` {channel id: [Message, ...]}.
- Channels are public, private (``private=True``), DMs (``add_im``, ids ``D...``) or group DMs (``add_mpim``).
  ``Channel.members`` decides visibility: a private channel, DM or group DM is invisible (``channel_not_found``)
  to a token whose user is not a member; a bot token reading a public channel it has not joined gets
  ``not_in_channel`` (as Slack answers).
- Tokens: ``BOT_TOKEN`` (xoxb-, acts as ``ws.bot_user_id``) and ``USER_TOKEN`` (xoxp-, acts as ``ws.owner_id``);
  ``PERSON_TOKEN`` acts as ``ws.owner_id`` with every scope, for a test's own "a person posts/reacts" setup.
  Missing token -> ``not_authed``; unknown token -> ``invalid_auth``; ``search.messages`` with a bot token ->
  ``not_allowed_token_type``. ``ws.tokens`` can hold more. Each token has the scopes docs/slack-app-manifest.yml
  grants its kind (``Token(..., scopes=...)`` overrides); a call without the scope it needs gets Slack's
  ``missing_scope`` with ``needed`` and ``provided`` (tests/fakes/slack_scopes.py).
- ``ws.post(...)`` seeds a message without any checks; ``ws.message(c, ts)``, ``ws.thread(c, ts)`` (parent
  first), ``ws.history(c)`` (top level, oldest first) and ``ws.reactions(c, ts)`` inspect.
  ``sample_workspace()`` builds a small realistic Japanese workspace.

``search.messages`` matches messages containing every word (case-insensitive substring, fine for Japanese) and
understands ``in:#channel``, ``from:@user`` / ``from:<@U…>``, ``after:``/``before:``/``on:YYYY-MM-DD`` (JST days);
it searches what the token's user can see, DMs and private channels included, as Slack does.

Methods answered (anything else: ``unknown_method``):
  reads   auth.test, users.info, conversations.info, conversations.list, conversations.history,
          conversations.replies, search.messages, chat.getPermalink, reactions.get, files.info
  files   GET url_private / url_private_download (tests/fakes/slack_files.py: seeding, the Authorization check)
  writes  chat.postMessage, chat.postEphemeral (kept in ``ws.ephemerals``), chat.update, chat.delete,
          reactions.add, reactions.remove
Parameters arrive as Slack accepts them: query string, form body or JSON body; token as ``Authorization:
Bearer`` or a ``token`` parameter. Cursor pagination (``response_metadata.next_cursor``) works where Slack has it.

Interactions: ``ws.click(channel, ts, user, value)`` is the ``block_actions`` payload Slack sends when a person
clicks a feedback button the message shows, and ``interaction_request(payload, secret, timestamp)`` the signed,
form-encoded request that carries it to the app's interactivity URL.

Faults (checked before anything else, counted per method; ``"*"`` matches every method):
- ``fake.fail("search.messages", status=429, retry_after=2, times=1)``: HTTP 429 + ``Retry-After`` and
  ``{"ok": false, "error": "ratelimited"}``.
- ``fake.fail("conversations.history", status=500, times=3)``: an HTML error page, as Slack's edge returns.
- ``fake.fail("auth.test", error="invalid_auth")``: HTTP 200 ``ok: false`` with that error code.
- ``fake.slow("conversations.replies", seconds=2.0)``: the answer is delayed (for client timeouts).
- ``fake.flood("conversations.history", gzipped=True, status=200)``: an answer longer than helpbot reads, or a gzip
  bomb of one (tests/fakes/github.py ``flood``).
- ``fake.cut("users.info", chunked=False)``: the answer stops short of its Content-Length (or in a chunk) and the
  connection closes (a dropped connection, a proxy's).

Where Slack is vague the fake is deliberately strict, so that bugs show up here rather than in production:
- ``chat.postMessage`` with a ``thread_ts`` that is not a message of that channel -> ``thread_not_found``.
- ``metadata`` is returned by conversations.history/replies only with ``include_all_metadata=true`` (always in
  the chat.postMessage / chat.update responses).
- ``markdown_text`` over 12,000 characters, or combined with ``text``/``blocks`` -> ``invalid_arguments``; it is
  stored as one ``markdown`` block. ``blocks`` are checked for the limits in api-notes.md (50 blocks, section text
  3,000, markdown block text 12,000 cumulative; a ``context_actions`` block as its reference page has it)
  -> ``invalid_blocks``; ``text`` over 40,000 -> ``msg_too_long``. chat.update without ``text`` or ``blocks``
  (``metadata`` alone) -> ``no_text``.
- ``ws.markdown_as_rich_text = True``: messages are read back with each ``markdown`` block translated into a
  ``rich_text`` block (sections, bullet/ordered lists, quotes, preformatted code; bold, code and link styles),
  as real Slack may hand them back. Code reading helpbot's own answers must cope with both forms.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlparse

import pytest

from tests.fakes import slack_files, slack_scopes, slack_stream
from tests.fakes.github import flood
from tests.fakes.slack_files import FakeFile
from tests.fakes.slack_stream import STREAM_METHODS

BOT_TOKEN = "xoxb-1111111111-2222222222-fakebottoken"
USER_TOKEN = "xoxp-1111111111-3333333333-fakeusertoken"
# A person acting in Slack (posting, reacting) in a test's setup: every scope, not helpbot's user token.
PERSON_TOKEN = "xoxp-1111111111-3333333333-fakepersontoken"
EVERY_SCOPE = frozenset({f"{family}:{what}" for family in ("channels", "groups", "im", "mpim")
                         for what in ("history", "read")} | {"chat:write", "reactions:read", "reactions:write",
                                                            "users:read", "search:read"})


# -- workspace state ----------------------------------------------------------------------------------------
@dataclass
class User:
    id: str
    name: str
    real_name: str = ""
    display_name: str = ""
    is_bot: bool = False
    bot_id: str | None = None
    deleted: bool = False
    tz: str = "Asia/Tokyo"
    team_id: str | None = None  # another organization's user (Slack Connect); None: the workspace's own
    is_restricted: bool = False  # a multi-channel guest
    is_ultra_restricted: bool = False  # a single-channel guest
    is_app_user: bool = False

    def to_api(self, team_id: str, enterprise_id: str | None = None) -> dict[str, Any]:
        """The user object of users.info (https://api.slack.com/types/user, https://api.slack.com/methods/users.info):
        ``team_id`` is the user's own team -- another organization's for a Slack Connect user; a bot user has
        ``is_bot`` and its ``profile.bot_id``; guests are ``is_restricted`` / ``is_ultra_restricted``; in an
        Enterprise Grid organization every member has ``enterprise_user`` (a sibling workspace's its own team_id)."""
        team = self.team_id or team_id
        grid = {"enterprise_user": {"id": self.id, "enterprise_id": enterprise_id, "enterprise_name": "Acme Org",
                                    "is_admin": False, "is_owner": False, "teams": [team]}} if enterprise_id else {}
        return {**grid,
            "id": self.id, "team_id": team, "name": self.name, "deleted": self.deleted, "color": "9f69e7",
            "real_name": self.real_name or self.name, "tz": self.tz, "tz_label": "Japan Standard Time",
            "tz_offset": 32400, "is_admin": False, "is_owner": False, "is_primary_owner": False,
            "is_restricted": self.is_restricted or self.is_ultra_restricted,
            "is_ultra_restricted": self.is_ultra_restricted, "is_bot": self.is_bot, "is_app_user": self.is_app_user,
            "updated": 1700000000,
            "profile": {
                "real_name": self.real_name or self.name, "real_name_normalized": self.real_name or self.name,
                "display_name": self.display_name, "display_name_normalized": self.display_name,
                "team": team, "image_48": f"https://avatars.example/{self.id}_48.png",
                **({"bot_id": self.bot_id} if self.bot_id else {}),
            },
        }


@dataclass
class Channel:
    id: str
    name: str
    is_private: bool = False
    is_im: bool = False
    is_mpim: bool = False
    is_archived: bool = False
    members: set[str] = field(default_factory=set)
    purpose: str = ""
    topic: str = ""
    creator: str = ""
    created: int = 1700000000
    im_user: str | None = None  # a DM: the human on the other side
    # Slack Connect (https://api.slack.com/types/conversation, https://api.slack.com/apis/connect): the teams of
    # other organizations it is shared with (is_ext_shared), or invited and not yet accepted (is_pending_ext_shared);
    # org_shared: shared across the workspaces of one Enterprise Grid organization (is_org_shared).
    shared_with: tuple[str, ...] = ()
    pending_with: tuple[str, ...] = ()
    org_shared: bool = False

    @property
    def is_public(self) -> bool:
        return not (self.is_private or self.is_im or self.is_mpim)

    def to_api(self, viewer: str, team_id: str) -> dict[str, Any]:
        if self.is_im:
            return {"id": self.id, "created": self.created, "is_im": True, "is_org_shared": False,
                    "context_team_id": team_id, "user": self.im_user, "is_user_deleted": False, "priority": 0,
                    "is_archived": self.is_archived, "is_open": True}
        return {
            "id": self.id, "name": self.name, "is_channel": not self.is_mpim, "is_group": self.is_mpim,
            "is_im": False, "is_mpim": self.is_mpim, "is_private": self.is_private or self.is_mpim,
            "created": self.created, "is_archived": self.is_archived, "is_general": self.name == "general",
            "unlinked": 0, "name_normalized": self.name, **self.sharing(team_id),
            "context_team_id": team_id, "creator": self.creator, "is_member": viewer in self.members,
            "topic": {"value": self.topic, "creator": "", "last_set": 0},
            "purpose": {"value": self.purpose, "creator": "", "last_set": 0},
            "previous_names": [], "num_members": len(self.members),
        }

    def sharing(self, team_id: str) -> dict[str, Any]:
        """The conversation object's sharing fields (https://api.slack.com/types/conversation)."""
        out: dict[str, Any] = {"is_shared": bool(self.shared_with) or self.org_shared,
                               "is_org_shared": self.org_shared, "is_ext_shared": bool(self.shared_with),
                               "is_pending_ext_shared": bool(self.pending_with),
                               "pending_shared": list(self.pending_with)}
        if self.shared_with:
            out["shared_team_ids"] = [team_id, *self.shared_with]
            out["conversation_host_id"] = team_id
        if self.pending_with:
            out["pending_connected_team_ids"] = list(self.pending_with)
        return out

    def search_summary(self) -> dict[str, Any]:
        """The short channel object Slack puts in each search match."""
        return {"id": self.id, "is_channel": self.is_public or (self.is_private and not self.is_mpim),
                "is_group": self.is_mpim, "is_im": self.is_im, "is_mpim": self.is_mpim,
                **{k: v for k, v in self.sharing("").items() if k.startswith("is_") or k == "pending_shared"},
                "is_private": not self.is_public, "name": self.im_user if self.is_im else self.name}


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    user: str | None = None
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    bot_id: str | None = None
    app_id: str | None = None
    username: str | None = None
    subtype: str | None = None
    reply_broadcast: bool = False
    files: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[str, list[str]] = field(default_factory=dict)  # name -> users, in order
    edited: dict[str, str] | None = None
    streaming: bool = False  # a chat.startStream message not stopped yet (tests/fakes/slack_stream.py)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # its task_update chunks, by id

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts


@dataclass
class Ephemeral:
    """A chat.postEphemeral notice: only ``user`` sees it, and only now (it is in no history or search)."""

    channel: str
    user: str
    text: str
    thread_ts: str | None
    ts: str


@dataclass
class Token:
    kind: str  # "bot" or "user"
    user: str  # whose identity the token acts as
    scopes: frozenset[str] | None = None  # None: what docs/slack-app-manifest.yml grants this kind of token

    def granted(self) -> frozenset[str]:
        return slack_scopes.granted(self.kind) if self.scopes is None else self.scopes


@dataclass
class Request:
    """One request the fake received (faulted ones included)."""

    method: str
    params: dict[str, Any]
    token: str | None
    kind: str | None  # "bot", "user", or None for a missing/unknown token
    status: int = 200
    error: str | None = None
    at: float = field(default_factory=time.monotonic)  # when it arrived (the streaming bench reads it)


class Workspace:
    """In-memory Slack workspace: users, channels, messages. Tests seed it and inspect it."""

    def __init__(self, *, team_id: str = "T0HELPBOT", team_name: str = "Helpbot Test",
                 domain: str = "helpbot-test", start: int = 1735779600):
        self.team_id = team_id
        self.team_name = team_name
        self.domain = domain
        self.bot_user_id = "U0HELPBOT"
        self.bot_id = "B0HELPBOT"
        self.app_id = "A0HELPBOT"
        self.owner_id = "U0OWNER"
        # Enterprise Grid (https://api.slack.com/enterprise): the organization's id, which auth.test then returns,
        # and the organization's other workspaces (their users are the organization's too).
        self.enterprise_id: str | None = None
        self.org_teams: set[str] = set()
        self.users: dict[str, User] = {}
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, list[Message]] = {}
        self.tokens = {BOT_TOKEN: Token("bot", self.bot_user_id), USER_TOKEN: Token("user", self.owner_id),
                       PERSON_TOKEN: Token("user", self.owner_id, EVERY_SCOPE)}
        self.lock = threading.RLock()
        self._start = start  # 2025-01-02 10:00 JST
        self._count = 0
        self._latest = 0.0
        self.markdown_as_rich_text = False  # read markdown blocks back as rich_text, as real Slack may
        # chat.*Stream fail with this code (tests/fakes/slack_stream.py): by default a workspace without text
        # streaming, so that most tests pin the placeholder path; tests of streaming set None
        self.refuse_streaming: str | None = "unknown_method"
        self.files: dict[str, FakeFile] = {}  # seeded with tests.fakes.slack_files.add_file
        self.ephemerals: list[Ephemeral] = []  # chat.postEphemeral: seen by one user, never in any history
        self.file_base = ""  # where the running fake serves files (set by FakeSlack.start)
        self.add_user(self.bot_user_id, "helpbot", real_name="helpbot", is_bot=True, bot_id=self.bot_id)
        self.add_user(self.owner_id, "owner", real_name="Token Owner")

    @property
    def url(self) -> str:
        return f"https://{self.domain}.slack.com/"

    def next_ts(self) -> str:
        """Deterministic, increasing timestamps a minute apart, always after every message seeded so far."""
        with self.lock:
            self._count += 1
            seconds = max(self._start + 60 * self._count, int(self._latest) + 60)
            ts = f"{seconds}.{self._count:06d}"
            self._latest = float(ts)
            return ts

    # -- seeding ------------------------------------------------------------------------------------------
    def add_user(self, id: str, name: str, **fields: Any) -> User:
        user = User(id=id, name=name, **fields)
        self.users[id] = user
        return user

    def add_channel(self, id: str, name: str, *, private: bool = False, members: set[str] | None = None,
                    bot_member: bool = True, **fields: Any) -> Channel:
        everyone = set(members or ()) | {self.owner_id}
        if bot_member:
            everyone.add(self.bot_user_id)
        channel = Channel(id=id, name=name, is_private=private, members=everyone, **fields)
        self.channels[id] = channel
        self.messages.setdefault(id, [])
        return channel

    def add_im(self, id: str, user: str, *, with_user: str | None = None) -> Channel:
        """A DM between ``user`` and ``with_user`` (default: the bot)."""
        other = with_user or self.bot_user_id
        channel = Channel(id=id, name=id, is_im=True, members={user, other}, im_user=user)
        self.channels[id] = channel
        self.messages.setdefault(id, [])
        return channel

    def add_mpim(self, id: str, users: list[str]) -> Channel:
        names = "--".join(self.users[u].name if u in self.users else u for u in users)
        channel = Channel(id=id, name=f"mpdm-{names}-1", is_mpim=True, members=set(users))
        self.channels[id] = channel
        self.messages.setdefault(id, [])
        return channel

    def post(self, channel: str, text: str, *, user: str | None = None, thread_ts: str | None = None,
             ts: str | None = None, **fields: Any) -> Message:
        """Seed a message (no checks). A reply names its parent's ts in ``thread_ts``."""
        message = Message(channel=channel, ts=ts or self.next_ts(), text=text, user=user, thread_ts=thread_ts,
                          **fields)
        with self.lock:
            self._latest = max(self._latest, float(message.ts))
            self.messages.setdefault(channel, []).append(message)
            self.messages[channel].sort(key=lambda m: float(m.ts))
        return message

    # -- inspection ---------------------------------------------------------------------------------------
    def message(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages.get(channel, []) if m.ts == ts), None)

    def replies_of(self, channel: str, root_ts: str) -> list[Message]:
        return [m for m in self.messages.get(channel, []) if m.thread_ts == root_ts and m.ts != root_ts]

    def thread(self, channel: str, ts: str) -> list[Message]:
        """Parent first, then replies oldest first; ``ts`` may be the parent's or a reply's."""
        found = self.message(channel, ts)
        root = (found.thread_ts or found.ts) if found else ts
        parent = self.message(channel, root)
        return ([parent] if parent else []) + self.replies_of(channel, root)

    def history(self, channel: str) -> list[Message]:
        """Top-level messages (and broadcast replies), oldest first."""
        return [m for m in self.messages.get(channel, []) if not m.is_reply or m.reply_broadcast]

    def reacted(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A reaction payload as Zapier or the relay would send it, after its person really reacted: the reaction is
        on the message (helpbot checks that the named user is among its users). Returns the payload."""
        found = self.message(str(payload["channel"]), str(payload["ts"]))
        assert found is not None, "react to a seeded message"
        users = found.reactions.setdefault(str(payload["reaction"]).strip(":"), [])
        if payload.get("user") and payload["user"] not in users:
            users.append(str(payload["user"]))
        return payload

    def click(self, channel: str, ts: str, user: str, value: str) -> dict[str, Any]:
        """The ``block_actions`` payload of ``user`` clicking the feedback button of ``value`` on message ``ts``
        (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload; the action as Slack's
        typings have it: https://docs.slack.dev/tools/bolt-js/reference/interfaces/FeedbackButtonsAction). Only a
        button the message shows can be clicked."""
        message = self.message(channel, ts)
        assert message is not None, "click a seeded message"
        [(block, element)] = [(b, e) for b in message.blocks or [] if b.get("type") == "context_actions"
                              for e in b["elements"] if e.get("type") == "feedback_buttons"]
        [button] = [b for b in (element["positive_button"], element["negative_button"]) if b["value"] == value]
        person = self.users[user]
        return {
            "type": "block_actions", "api_app_id": self.app_id, "token": "legacy-verification-token",
            "user": {"id": user, "username": person.name, "name": person.name,
                     "team_id": person.team_id or self.team_id},
            "team": {"id": self.team_id, "domain": self.domain}, "enterprise": None, "is_enterprise_install": False,
            "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": False,
                          **({"thread_ts": message.thread_ts} if message.is_reply else {})},
            "trigger_id": f"{ts.replace('.', '')}.{self.team_id}", "channel": {"id": channel,
                                                                                "name": self.channels[channel].name},
            "message": self.message_to_api(message, include_metadata=False), "state": {"values": {}},
            "response_url": f"https://hooks.slack.com/actions/{self.team_id}/{ts.replace('.', '')}/fake",
            "actions": [{"type": "feedback_buttons", "action_id": element.get("action_id", ""),
                         "block_id": block.get("block_id") or f"ca{zlib.crc32(json.dumps(block).encode()):08x}",
                         "value": value, "text": button["text"], "action_ts": f"{float(self.next_ts()):.6f}"}],
        }

    def reactions(self, channel: str, ts: str, *, by: str | None = None) -> dict[str, list[str]]:
        """The message's reactions (``by``: only that user's, e.g. helpbot's own 👀 ✅ ❌)."""
        found = self.message(channel, ts)
        reactions = dict(found.reactions) if found else {}
        if by is None:
            return reactions
        return {name: [by] for name, users in reactions.items() if by in users}

    def permalink(self, channel: str, ts: str) -> str:
        link = f"{self.url}archives/{channel}/p{ts.replace('.', '')}"
        found = self.message(channel, ts)
        if found and found.is_reply:
            link += f"?thread_ts={found.thread_ts}&cid={channel}"
        return link

    # -- API representation -------------------------------------------------------------------------------
    def message_to_api(self, m: Message, *, include_metadata: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message"}
        if m.subtype:
            out["subtype"] = m.subtype
        if m.user:
            out["user"] = m.user
        author = self.users.get(m.user or "")
        team = author.team_id if author is not None and author.team_id else self.team_id
        out.update({"text": m.text, "ts": m.ts, "team": team})
        channel = self.channels.get(m.channel)
        if m.user and channel is not None and channel.shared_with:  # https://api.slack.com/shared-channels
            out.update({"user_team": team, "source_team": team})
        if m.blocks is not None:
            out["blocks"] = ([markdown_to_rich_text(b["text"]) if b.get("type") == "markdown" else b for b in m.blocks]
                             if self.markdown_as_rich_text else m.blocks)
        if m.bot_id:
            out.update({"bot_id": m.bot_id, "app_id": m.app_id,
                        "bot_profile": {"id": m.bot_id, "app_id": m.app_id, "name": m.username or "helpbot",
                                        "deleted": False, "team_id": self.team_id, "updated": 1700000000,
                                        "icons": {"image_48": "https://avatars.example/bot_48.png"}}})
        if m.username:
            out["username"] = m.username
        if m.edited:
            out["edited"] = dict(m.edited)
        if m.files:
            out["files"] = [slack_files.render(self, f, self.file_base) for f in m.files]
            out["upload"] = False
        if m.reactions:
            out["reactions"] = [{"name": n, "users": list(u), "count": len(u)} for n, u in m.reactions.items()]
        replies = self.replies_of(m.channel, m.ts)
        if m.is_reply:
            parent = self.message(m.channel, m.thread_ts or "")
            out["thread_ts"] = m.thread_ts
            out["parent_user_id"] = parent.user if parent else None
            if m.reply_broadcast:
                out["subtype"] = "thread_broadcast"
        elif replies:
            users = list(dict.fromkeys(r.user for r in replies if r.user))
            out.update({"thread_ts": m.ts, "reply_count": len(replies), "reply_users_count": len(users),
                        "latest_reply": replies[-1].ts, "reply_users": users, "is_locked": False,
                        "subscribed": False})
        if include_metadata and m.metadata is not None:
            out["metadata"] = dict(m.metadata)
        return out


_INLINE = re.compile(r"\*\*(?P<bold>[^*\n]+)\*\*|`(?P<code>[^`\n]+)`|\[(?P<label>[^\]\n]*)\]\((?P<url>[^)\s]+)\)")
_LIST_ITEM = re.compile(r"\s*(?:(?P<bullet>[-*•])|(?P<number>\d+)[.)])\s+(?P<text>.*)")


def _rich_inline(text: str) -> list[dict[str, Any]]:
    """``**bold**``, ``code`` and ``[label](url)`` as rich_text elements; the rest as plain text."""
    elements: list[dict[str, Any]] = []
    at = 0
    for match in _INLINE.finditer(text):
        if match.start() > at:
            elements.append({"type": "text", "text": text[at:match.start()]})
        if match.group("bold") is not None:
            elements.append({"type": "text", "text": match.group("bold"), "style": {"bold": True}})
        elif match.group("code") is not None:
            elements.append({"type": "text", "text": match.group("code"), "style": {"code": True}})
        else:
            elements.append({"type": "link", "url": match.group("url"), "text": match.group("label")})
        at = match.end()
    if at < len(text):
        elements.append({"type": "text", "text": text[at:]})
    return elements


def markdown_to_rich_text(markdown: str) -> dict[str, Any]:
    """A markdown block as Slack may return it on read: one rich_text block."""
    elements: list[dict[str, Any]] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(("```", "~~~")):
            fence, body = line.strip()[:3], []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            elements.append({"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "\n".join(body)}]})
            i += 1
            continue
        item = _LIST_ITEM.fullmatch(line)
        if item:
            ordered = item.group("number") is not None
            items = []
            while i < len(lines) and (item := _LIST_ITEM.fullmatch(lines[i])) and (item.group("number") is not None) \
                    == ordered:
                items.append({"type": "rich_text_section", "elements": _rich_inline(item.group("text"))})
                i += 1
            elements.append({"type": "rich_text_list", "style": "ordered" if ordered else "bullet", "indent": 0,
                             "elements": items})
            continue
        if line.startswith(">"):
            elements.append({"type": "rich_text_quote", "elements": _rich_inline(line[1:].lstrip())})
        elif line.strip():
            elements.append({"type": "rich_text_section", "elements": _rich_inline(line)})
        i += 1
    return {"type": "rich_text", "block_id": f"rt{zlib.crc32(markdown.encode()):08x}", "elements": elements}


def named_workspace(tanaka: str = "U0TANAKA", suzuki: str = "U0SUZUKI", sato: str = "U0SATO") -> Workspace:
    """Three people whose names Slack knows (real and display names, as users.info gives them) in #ec-support:
    for what must drop the names of a thread's participants (FAQ drafts)."""
    ws = Workspace()
    ws.add_user(tanaka, "tanaka", real_name="田中 太郎", display_name="たなか")
    ws.add_user(suzuki, "suzuki", real_name="鈴木 花子", display_name="はなこ")
    ws.add_user(sato, "sato", real_name="佐藤 次郎")
    ws.add_channel("C0ECSUP", "ec-support", members={tanaka, suzuki, sato})
    return ws


def _check_context_actions(block: dict[str, Any], index: int, bad: Callable[[str], SlackError]) -> None:
    """https://docs.slack.dev/reference/block-kit/blocks/context-actions-block: 1-5 feedback_buttons or icon_button
    elements; feedback buttons (.../block-elements/feedback-buttons-element) have both buttons, each a plain_text
    of at most 75 characters and a value of at most 2,000; action_id at most 255."""
    where = f"[json-pointer:/blocks/{index}/elements]"
    elements = block.get("elements")
    if not isinstance(elements, list) or not 1 <= len(elements) <= 5:
        raise bad(f"context_actions needs 1 to 5 elements {where}")
    for element in elements:
        if not isinstance(element, dict) or element.get("type") not in ("feedback_buttons", "icon_button"):
            raise bad(f"context_actions takes feedback_buttons and icon_button elements only {where}")
        if len(str(element.get("action_id", ""))) > 255:
            raise bad(f"action_id must be 255 characters or fewer {where}")
        for key in ("positive_button", "negative_button") if element["type"] == "feedback_buttons" else ():
            button = element.get(key)
            text = button.get("text") if isinstance(button, dict) else None
            value = button.get("value") if isinstance(button, dict) else None
            if not (isinstance(text, dict) and text.get("type") == "plain_text" and 0 < len(str(text.get("text")))
                    <= 75 and isinstance(value, str) and len(value) <= 2000):
                raise bad(f"{key} needs a plain_text of 75 characters or fewer and a value {where}")


def interaction_request(payload: dict[str, Any], secret: str, timestamp: int) -> tuple[dict[str, str], bytes]:
    """The HTTP request Slack sends an interaction in: ``payload=`` (the JSON, form-encoded), signed with the app's
    signing secret (https://docs.slack.dev/interactivity/handling-user-interaction,
    https://docs.slack.dev/authentication/verifying-requests-from-slack)."""
    import hashlib
    import hmac
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(payload, ensure_ascii=False)}).encode()
    signature = hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": str(timestamp),
            "X-Slack-Signature": f"v0={signature}"}, body


def sample_workspace() -> Workspace:
    """A small, realistic workspace for demos and end-to-end tests: public, private, DM and group DM."""
    ws = Workspace()
    ws.add_user("U0TANAKA", "tanaka", real_name="田中 太郎", display_name="田中")
    ws.add_user("U0SUZUKI", "suzuki", real_name="鈴木 花子", display_name="鈴木")
    ws.add_channel("C0GENERAL", "general", members={"U0TANAKA", "U0SUZUKI"}, purpose="全体連絡")
    ws.add_channel("C0ECSUP", "ec-support", members={"U0TANAKA", "U0SUZUKI"},
                   purpose="EC連携（Shopify・楽天・Yahoo!）の問い合わせ")
    ws.add_channel("C0SECRET", "secret-ops", private=True, members={"U0TANAKA"}, purpose="社内限定")
    ws.add_im("D0TANAKA", "U0TANAKA")
    ws.add_mpim("C0MPIM", ["U0TANAKA", "U0SUZUKI", ws.bot_user_id, ws.owner_id])
    q = ws.post("C0ECSUP", "Shopify の在庫同期が30分以上遅れています。確認手順はありますか？", user="U0TANAKA")
    ws.post("C0ECSUP", "在庫同期ジョブのログを見て、API rate limit (429) が出ていないか確認してください。",
            user="U0SUZUKI", thread_ts=q.ts)
    ws.post("C0ECSUP", "楽天の注文取込は15分ごとに実行されます。", user="U0SUZUKI")
    ws.post("C0SECRET", "在庫同期の障害対応メモ（社内限定）", user="U0TANAKA")
    ws.post("D0TANAKA", "在庫同期のパスワードを教えて", user="U0TANAKA")
    ws.post("C0MPIM", "在庫同期の件、内々に相談です", user="U0SUZUKI")
    return ws


# -- the API ------------------------------------------------------------------------------------------------
class SlackError(Exception):
    """An HTTP 200 ``{"ok": false, "error": code, ...}`` answer."""

    def __init__(self, code: str, **extra: Any):
        super().__init__(code)
        self.code = code
        self.extra = extra


def _bool(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true")


def _int(value: Any, default: int, low: int, high: int) -> int:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SlackError("invalid_arguments", response_metadata={
            "messages": [f"[ERROR] expected an integer, got {value!r}"]}) from None
    return max(low, min(high, number))


def _json_value(value: Any, error: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackError(error) from None
    return value


def _required(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if value in (None, ""):
        raise SlackError("invalid_arguments",
                         response_metadata={"messages": [f"[ERROR] missing required field: {name}"]})
    return str(value)


def _page(items: list[Any], limit: int, cursor: Any) -> tuple[list[Any], str]:
    start = 0
    if cursor:
        try:
            start = int(base64.b64decode(str(cursor)).decode().split(":", 1)[1])
        except (ValueError, IndexError):
            raise SlackError("invalid_cursor") from None
    end = start + limit
    next_cursor = base64.b64encode(f"next:{end}".encode()).decode() if end < len(items) else ""
    return items[start:end], next_cursor


def _in_window(ts: str, params: dict[str, Any]) -> bool:
    inclusive = _bool(params.get("inclusive"))
    value = float(ts)
    oldest, latest = params.get("oldest"), params.get("latest")
    if oldest not in (None, ""):
        bound = float(oldest)
        if value < bound or (value == bound and not inclusive):
            return False
    if latest not in (None, ""):
        bound = float(latest)
        if value > bound or (value == bound and not inclusive):
            return False
    return True


_SEARCH_MODIFIER = re.compile(r"^(in|from|after|before|on):(.+)$")
_WORKSPACE_TZ = timezone(timedelta(hours=9))  # dates in search modifiers are the searcher's days (JST here)
_REACTION_NAME = re.compile(r"^[a-z0-9_+'-]+(::skin-tone-[2-6])?$")


class SlackApi:
    """The method implementations over a Workspace; each returns the JSON body of an ok answer."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.methods: dict[str, Callable[[dict[str, Any], Token], dict[str, Any]]] = {
            "auth.test": self.auth_test,
            "users.info": self.users_info,
            "conversations.info": self.conversations_info,
            "conversations.list": self.conversations_list,
            "conversations.history": self.conversations_history,
            "conversations.replies": self.conversations_replies,
            "search.messages": self.search_messages,
            "chat.getPermalink": self.chat_get_permalink,
            "chat.postMessage": self.chat_post_message,
            "chat.postEphemeral": self.chat_post_ephemeral,
            "chat.update": self.chat_update,
            "chat.delete": self.chat_delete,
            "reactions.add": self.reactions_add,
            "reactions.remove": self.reactions_remove,
            "files.info": lambda params, token: slack_files.files_info(ws, params, token, ws.file_base),
            "reactions.get": self.reactions_get,
        }
        slack_stream.install(self)

    # -- access ---------------------------------------------------------------------------------------------
    def _visible(self, params: dict[str, Any], token: Token, name: str = "channel") -> Channel:
        channel = self.ws.channels.get(_required(params, name))
        if channel is None or (not channel.is_public and token.user not in channel.members):
            raise SlackError("channel_not_found")
        return channel

    def _readable(self, params: dict[str, Any], token: Token) -> Channel:
        channel = self._visible(params, token)
        if token.kind == "bot" and token.user not in channel.members:
            raise SlackError("not_in_channel")
        return channel

    def _writable(self, params: dict[str, Any], token: Token) -> Channel:
        channel = self._readable(params, token)
        if channel.is_archived:
            raise SlackError("is_archived")
        return channel

    def _message(self, channel: Channel, ts: Any) -> Message:
        found = self.ws.message(channel.id, str(ts or ""))
        if found is None:
            raise SlackError("message_not_found")
        return found

    # -- reads ----------------------------------------------------------------------------------------------
    def auth_test(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        user = self.ws.users[token.user]
        out: dict[str, Any] = {"url": self.ws.url, "team": self.ws.team_name, "user": user.name,
                               "team_id": self.ws.team_id, "user_id": user.id}
        if token.kind == "bot":
            out["bot_id"] = self.ws.bot_id
        if self.ws.enterprise_id:
            out["enterprise_id"] = self.ws.enterprise_id
        out["is_enterprise_install"] = False
        return out

    def users_info(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        user = self.ws.users.get(_required(params, "user"))
        if user is None:
            raise SlackError("user_not_found")
        member = user.team_id is None or user.team_id in self.ws.org_teams
        return {"user": user.to_api(self.ws.team_id, self.ws.enterprise_id if member else None)}

    def conversations_info(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        return {"channel": self._visible(params, token).to_api(token.user, self.ws.team_id)}

    def conversations_list(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        types = [t.strip() for t in str(params.get("types") or "public_channel").split(",") if t.strip()]
        known = {"public_channel", "private_channel", "mpim", "im"}
        if not set(types) <= known:
            raise SlackError("invalid_types")

        def wanted(c: Channel) -> bool:
            if c.is_archived and _bool(params.get("exclude_archived")):
                return False
            member = token.user in c.members
            return (("public_channel" in types and c.is_public)
                    or ("private_channel" in types and c.is_private and member)
                    or ("mpim" in types and c.is_mpim and member)
                    or ("im" in types and c.is_im and member))

        channels = [c.to_api(token.user, self.ws.team_id) for c in self.ws.channels.values() if wanted(c)]
        page, cursor = _page(channels, _int(params.get("limit"), 100, 1, 1000), params.get("cursor"))
        return {"channels": page, "response_metadata": {"next_cursor": cursor}}

    def conversations_history(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._readable(params, token)
        messages = [m for m in reversed(self.ws.history(channel.id)) if _in_window(m.ts, params)]
        page, cursor = _page(messages, _int(params.get("limit"), 100, 1, 999), params.get("cursor"))
        meta = _bool(params.get("include_all_metadata"))
        out: dict[str, Any] = {
            "messages": [self.ws.message_to_api(m, include_metadata=meta) for m in page],
            "has_more": bool(cursor), "pin_count": 0, "channel_actions_ts": None, "channel_actions_count": 0,
        }
        if cursor:
            out["response_metadata"] = {"next_cursor": cursor}
        return out

    def conversations_replies(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._readable(params, token)
        found = self.ws.message(channel.id, _required(params, "ts"))
        if found is None:
            raise SlackError("thread_not_found")
        thread = self.ws.thread(channel.id, found.ts)
        parent, replies = thread[:1], [m for m in thread[1:] if _in_window(m.ts, params)]
        page, cursor = _page(parent + replies, _int(params.get("limit"), 1000, 1, 1000), params.get("cursor"))
        meta = _bool(params.get("include_all_metadata"))
        out: dict[str, Any] = {"messages": [self.ws.message_to_api(m, include_metadata=meta) for m in page],
                               "has_more": bool(cursor)}
        if cursor:
            out["response_metadata"] = {"next_cursor": cursor}
        return out

    def search_messages(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        if token.kind != "user":
            raise SlackError("not_allowed_token_type")
        query = _required(params, "query")
        count = _int(params.get("count"), 20, 1, 100)
        page_no = _int(params.get("page"), 1, 1, 100)
        terms, in_channels, from_users = [], [], []
        days: list[tuple[str, date]] = []
        for word in re.findall(r'"[^"]+"|\S+', query):
            modifier = _SEARCH_MODIFIER.match(word)
            kind, value = (modifier.group(1), modifier.group(2)) if modifier else ("", word)
            if kind == "in":
                in_channels.append(value.strip("<>#").split("|")[0])
            elif kind == "from":
                from_users.append(value.strip("<>@").split("|")[0])
            elif kind:
                try:
                    days.append((kind, date.fromisoformat(value)))
                except ValueError:
                    terms.append(word.lower())
            else:
                terms.append(word.strip('"').lower())

        def on_day(ts: str) -> bool:
            day = datetime.fromtimestamp(float(ts), _WORKSPACE_TZ).date()
            return all((kind == "after" and day > d) or (kind == "before" and day < d) or (kind == "on" and day == d)
                       for kind, d in days)

        matches = []
        for channel in self.ws.channels.values():
            if not channel.is_public and token.user not in channel.members:
                continue
            if in_channels and channel.name not in in_channels and channel.id not in in_channels:
                continue
            for m in self.ws.messages.get(channel.id, []):
                author = self.ws.users.get(m.user or "")
                if from_users and m.user not in from_users and (author is None or author.name not in from_users):
                    continue
                score = sum(m.text.lower().count(t) for t in terms)
                if (terms and not all(t in m.text.lower() for t in terms)) or not on_day(m.ts):
                    continue
                matches.append((score, m, channel, author))
        by_time = params.get("sort") == "timestamp"
        descending = params.get("sort_dir", "desc") != "asc"
        matches.sort(key=lambda x: (float(x[1].ts) if by_time else (x[0], float(x[1].ts))), reverse=descending)
        total = len(matches)
        start = (page_no - 1) * count
        chosen = matches[start : start + count]
        pages = max(1, -(-total // count))
        return {
            "query": query,
            "messages": {
                "total": total,
                "pagination": {"total_count": total, "page": page_no, "per_page": count, "page_count": pages,
                               "first": start + 1 if chosen else 0, "last": start + len(chosen)},
                "paging": {"count": count, "total": total, "page": page_no, "pages": pages},
                "matches": [
                    {"iid": f"iid-{m.channel}-{m.ts}", "team": self.ws.team_id, "score": score,
                     "channel": channel.search_summary(), "type": "message", "user": m.user or "",
                     "username": author.name if author else (m.username or ""), "ts": m.ts, "text": m.text,
                     "permalink": self.ws.permalink(m.channel, m.ts), "no_reactions": not m.reactions}
                    for score, m, channel, author in chosen
                ],
            },
        }

    def chat_get_permalink(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._visible(params, token)
        message = self._message(channel, _required(params, "message_ts"))
        return {"channel": channel.id, "permalink": self.ws.permalink(channel.id, message.ts)}

    def reactions_get(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._readable(params, token)
        message = self._message(channel, _required(params, "timestamp"))
        body = self.ws.message_to_api(message, include_metadata=False)
        body["permalink"] = self.ws.permalink(channel.id, message.ts)
        return {"type": "message", "channel": channel.id, "message": body}

    # -- writes ---------------------------------------------------------------------------------------------
    def _content(self, params: dict[str, Any], *, required: bool) -> dict[str, Any]:
        """text / blocks / markdown_text / metadata, validated against Slack's limits."""
        text = params.get("text")
        blocks = params.get("blocks")
        markdown = params.get("markdown_text")
        if blocks is not None:
            blocks = _json_value(blocks, "invalid_blocks_format")
        if markdown is not None:
            if text or blocks:
                raise SlackError("invalid_arguments", response_metadata={
                    "messages": ["[ERROR] markdown_text cannot be used with text or blocks"]})
            if len(str(markdown)) > 12000:
                raise SlackError("invalid_arguments", response_metadata={
                    "messages": ["[ERROR] markdown_text must be 12000 characters or fewer"]})
            text, blocks = str(markdown), [{"type": "markdown", "text": str(markdown)}]
        if required and not text and not blocks and not params.get("attachments"):
            raise SlackError("no_text")
        if text is not None and len(str(text)) > 40000:
            raise SlackError("msg_too_long")
        if blocks is not None:
            self._check_blocks(blocks)
        out: dict[str, Any] = {}
        if text is not None:
            out["text"] = str(text)
        if blocks is not None:
            out["blocks"] = blocks
        if params.get("metadata") not in (None, ""):
            metadata = _json_value(params["metadata"], "invalid_metadata_format")
            if (not isinstance(metadata, dict) or not isinstance(metadata.get("event_type"), str)
                    or not isinstance(metadata.get("event_payload", {}), dict)):
                raise SlackError("invalid_metadata_format")
            out["metadata"] = {"event_type": metadata["event_type"],
                               "event_payload": metadata.get("event_payload", {})}
        return out

    @staticmethod
    def _check_blocks(blocks: Any) -> None:
        def bad(why: str) -> SlackError:
            return SlackError("invalid_blocks", errors=[why], response_metadata={"messages": [f"[ERROR] {why}"]})

        if not isinstance(blocks, list) or not all(isinstance(b, dict) and b.get("type") for b in blocks):
            raise bad("blocks must be an array of objects with a type")
        if len(blocks) > 50:
            raise bad("no more than 50 items allowed [json-pointer:/blocks]")
        markdown_total = 0
        for index, block in enumerate(blocks):
            if block["type"] == "markdown":
                markdown_total += len(str(block.get("text", "")))
            if block["type"] == "section":
                text = block.get("text") or {}
                if len(str(text.get("text", "") if isinstance(text, dict) else text)) > 3000:
                    raise bad(f"must be less than 3001 characters [json-pointer:/blocks/{index}/text/text]")
            if block["type"] == "context_actions":
                _check_context_actions(block, index, bad)
        if markdown_total > 12000:
            raise bad("markdown blocks: cumulative text must be 12000 characters or fewer")

    def chat_post_message(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._writable(params, token)
        content = self._content(params, required=True)
        thread_ts = params.get("thread_ts") or None
        if thread_ts:
            parent = self.ws.message(channel.id, str(thread_ts))
            if parent is None:
                raise SlackError("thread_not_found")
            thread_ts = parent.thread_ts or parent.ts
        is_bot = token.kind == "bot"
        message = self.ws.post(
            channel.id, content.get("text", ""), user=token.user, thread_ts=thread_ts,
            blocks=content.get("blocks"), metadata=content.get("metadata"),
            bot_id=self.ws.bot_id if is_bot else None, app_id=self.ws.app_id if is_bot else None,
            reply_broadcast=bool(thread_ts) and _bool(params.get("reply_broadcast")),
        )
        return {"channel": channel.id, "ts": message.ts,
                "message": self.ws.message_to_api(message, include_metadata=True)}

    def chat_post_ephemeral(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        """https://api.slack.com/methods/chat.postEphemeral: ``channel``, ``user`` and text or blocks; the user must
        be in the channel (``user_not_in_channel``); the answer is ``message_ts`` only, and nothing is stored in the
        channel's history."""
        channel = self._writable(params, token)
        user = _required(params, "user")
        content = self._content(params, required=True)
        if user not in self.ws.users or user not in channel.members:
            raise SlackError("user_not_in_channel")
        ts = self.ws.next_ts()
        self.ws.ephemerals.append(Ephemeral(channel.id, user, str(content.get("text", "")),
                                            str(params.get("thread_ts") or "") or None, ts))
        return {"message_ts": ts}

    def chat_update(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._writable(params, token)
        message = self._message(channel, _required(params, "ts"))
        if message.user != token.user or message.streaming:
            raise SlackError("cant_update_message")
        content = self._content(params, required=False)
        if not {"text", "blocks"} & set(content):  # "one of attachments or blocks, in addition to text, is
            raise SlackError("no_text")  # required" (https://docs.slack.dev/reference/methods/chat.update)
        if "text" in content:
            message.text = content["text"]
        if "blocks" in content:  # absent: Slack keeps the previous blocks; [] removes them
            message.blocks = content["blocks"] or None
        if "metadata" in content:
            message.metadata = content["metadata"]
        message.edited = {"user": token.user, "ts": self.ws.next_ts()}
        return {"channel": channel.id, "ts": message.ts, "text": message.text,
                "message": self.ws.message_to_api(message, include_metadata=True)}

    def chat_delete(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        channel = self._writable(params, token)
        message = self._message(channel, _required(params, "ts"))
        if message.user != token.user:
            raise SlackError("cant_delete_message")
        if not message.is_reply and self.ws.replies_of(channel.id, message.ts):
            message.subtype, message.text, message.user, message.blocks = "tombstone", "This message was deleted.", \
                "USLACKBOT", None
        else:
            self.ws.messages[channel.id].remove(message)
        return {"channel": channel.id, "ts": message.ts}

    def _reaction(self, params: dict[str, Any], token: Token) -> tuple[Message, str]:
        channel = self._readable(params, token)
        message = self._message(channel, _required(params, "timestamp"))
        name = _required(params, "name")
        if not _REACTION_NAME.match(name):
            raise SlackError("invalid_name")
        return message, name

    def reactions_add(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        message, name = self._reaction(params, token)
        users = message.reactions.setdefault(name, [])
        if token.user in users:
            raise SlackError("already_reacted")
        users.append(token.user)
        return {}

    def reactions_remove(self, params: dict[str, Any], token: Token) -> dict[str, Any]:
        message, name = self._reaction(params, token)
        users = message.reactions.get(name, [])
        if token.user not in users:
            raise SlackError("no_reaction")
        users.remove(token.user)
        if not users:
            del message.reactions[name]
        return {}


# -- the server ---------------------------------------------------------------------------------------------
@dataclass
class Fault:
    status: int = 429
    times: int = 1
    retry_after: int | None = 1
    error: str | None = None
    delay: float = 0.0
    body: str | None = None
    lost: bool = False  # the call takes effect, but its answer is the failure (a 5xx or timeout after the work)
    until: Callable[[], object] | None = None  # held until this is true (at most ``delay`` seconds)
    released: list[bool] = field(default_factory=list)  # for each held answer: whether ``until`` released it
    flood: bool | None = None  # answered with flood(gzipped=flood)
    cut: bool | None = None  # the answer stops short of its Content-Length (True: in a chunk), the connection closed


class FakeSlack:
    """The HTTP server around a Workspace. ``with FakeSlack(ws) as fake: WebClient(base_url=fake.url)``."""

    def __init__(self, workspace: Workspace | None = None):
        self.workspace = workspace or Workspace()
        self.api = SlackApi(self.workspace)
        self.requests: list[Request] = []
        self._faults: dict[str, list[Fault]] = {}
        self._stopping = threading.Event()
        self._arrived = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The base URL for ``WebClient(base_url=...)`` / ``SLACK_API_URL`` (ends with a slash)."""
        if self._server is None:
            raise RuntimeError("FakeSlack is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/"

    def fail(self, method: str, *, status: int = 429, times: int = 1, retry_after: int | None = 1,
             error: str | None = None, body: str | None = None, lost: bool = False) -> None:
        """The next ``times`` calls of ``method`` fail: 429 + Retry-After, a 5xx page, or 200 ``ok:false``.
        ``lost``: Slack did the work all the same, only its answer is the failure (the 5xx a proxy gives when
        Slack was slow, or a reset after the write)."""
        if error is not None and status == 429:
            status = 200
        self._faults.setdefault(method, []).append(
            Fault(status=status, times=times, retry_after=retry_after, error=error, body=body, lost=lost))

    def slow(self, method: str, seconds: float, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` answer after ``seconds`` (normally)."""
        self._faults.setdefault(method, []).append(Fault(status=200, times=times, delay=seconds))

    def flood(self, method: str, *, gzipped: bool = False, status: int = 200) -> None:
        """The next call of ``method`` is answered with ``status`` and more than helpbot reads (``gzipped``: a bomb)."""
        self._faults.setdefault(method, []).append(Fault(status=status, flood=gzipped))

    def cut(self, method: str, *, chunked: bool = False, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` answer 200 with a body cut short of its length."""
        self._faults.setdefault(method, []).append(Fault(status=200, times=times, cut=chunked))

    def hold(self, method: str, until: Callable[[], object], *, at_most_s: float = 30.0) -> list[bool]:
        """The next call of ``method`` answers once ``until()`` is true (checked as requests arrive), or after
        ``at_most_s``; the list returned gets whether ``until`` released it (to prove calls were in flight together)."""
        fault = Fault(status=200, delay=at_most_s, until=until)
        self._faults.setdefault(method, []).append(fault)
        return fault.released

    def calls(self, method: str | None = None) -> list[Request]:
        return [r for r in self.requests if method is None or r.method == method]

    def _take_fault(self, method: str) -> Fault | None:
        with self.workspace.lock:
            for key in (method, "*"):
                queue = self._faults.get(key) or []
                if queue:
                    fault = queue[0]
                    fault.times -= 1
                    if fault.times <= 0:
                        queue.pop(0)
                    return fault
        return None

    def start(self) -> FakeSlack:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/files-pri/"):
                    fake._download(self)
                else:
                    fake._handle(self)

            def do_POST(self) -> None:
                fake._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        self._stopping.clear()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-slack",
                                        daemon=True)
        self._thread.start()
        self.workspace.file_base = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes slow and held answers
        with self._arrived:
            self._arrived.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one HTTP request ---------------------------------------------------------------------------------
    @staticmethod
    def _params(handler: BaseHTTPRequestHandler) -> dict[str, Any]:
        params: dict[str, Any] = dict(parse_qsl(urlparse(handler.path).query, keep_blank_values=True))
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        content_type = handler.headers.get("Content-Type", "")
        if raw and "application/json" in content_type:
            body = json.loads(raw.decode("utf-8"))
            if isinstance(body, dict):
                params.update(body)
        elif raw:
            params.update(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
        return params

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        method = urlparse(handler.path).path.rsplit("/", 1)[-1]
        params = self._params(handler)
        auth = handler.headers.get("Authorization", "")
        token_value = auth[7:].strip() if auth.startswith("Bearer ") else params.pop("token", None)
        params.pop("token", None)
        token = self.workspace.tokens.get(token_value or "")
        record = Request(method, params, token_value, token.kind if token else None)
        self.requests.append(record)
        with self._arrived:
            self._arrived.notify_all()  # a held answer may be waiting for this request

        fault = self._take_fault(method)
        if fault and fault.until is not None:
            with self._arrived:
                self._arrived.notify_all()
                until = fault.until
                self._arrived.wait_for(lambda: self._stopping.is_set() or until(), timeout=fault.delay)
                fault.released.append(bool(until()))
        elif fault and fault.delay and self._stopping.wait(fault.delay):
            return  # the server is stopping
        if fault and fault.flood is not None:
            record.status = fault.status
            data, headers = flood(gzipped=fault.flood)
            extra = {key: value for key, value in headers.items() if key != "Content-Type"}
            self._send(handler, fault.status, data, headers["Content-Type"], extra)
            return
        if fault and fault.cut is not None:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json; charset=utf-8")
            handler.send_header(*(("Transfer-Encoding", "chunked") if fault.cut else ("Content-Length", "1000")))
            handler.end_headers()
            handler.wfile.write(b'40\r\n{"ok": true, ' if fault.cut else b'{"ok": true, ')
            handler.close_connection = True
            return
        if fault and fault.status != 200:
            implementation = self.api.methods.get(method)
            if fault.lost and token is not None and implementation is not None:
                with self.workspace.lock, contextlib.suppress(SlackError):
                    implementation(params, token)
            record.status = fault.status
            headers = {}
            if fault.status == 429:
                body = fault.body or json.dumps({"ok": False, "error": "ratelimited"})
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(fault.retry_after)
                content_type = "application/json; charset=utf-8"
            else:
                body = fault.body or f"<html><body><h1>{fault.status} Server Error</h1></body></html>"
                content_type = "text/html; charset=utf-8"
            self._send(handler, fault.status, body, content_type, headers)
            return

        try:
            if fault and fault.error:
                raise SlackError(fault.error)
            if not token_value:
                raise SlackError("not_authed")
            if token is None:
                raise SlackError("invalid_auth")
            implementation = self.api.methods.get(method)
            if implementation is None:
                raise SlackError("unknown_method", req_method=method)
            self._check_scopes(method, params, token)
            with self.workspace.lock:
                body_data = {"ok": True, **implementation(params, token)}
        except SlackError as exc:
            record.error = exc.code
            body_data = {"ok": False, "error": exc.code, **exc.extra}
        # Slack names a token's scopes in the x-oauth-scopes header of every answer to it (comma-separated; what
        # @slack/web-api reads into response_metadata.scopes; https://api.slack.com/scopes, "Checking scopes").
        scopes = {"x-oauth-scopes": ",".join(sorted(token.granted()))} if token is not None else {}
        self._send(handler, 200, json.dumps(body_data, ensure_ascii=False), "application/json; charset=utf-8",
                   scopes)

    def _check_scopes(self, method: str, params: dict[str, Any], token: Token) -> None:
        """Slack's ``missing_scope`` when the token lacks a scope the method needs (see slack_scopes.py)."""
        if (method == "search.messages" and token.kind != "user") or (method in STREAM_METHODS and token.kind != "bot"):
            return  # Slack checks the token type first: the method answers not_allowed_token_type
        kinds = {c.id: "im" if c.is_im else "mpim" if c.is_mpim else "private" if c.is_private else "public"
                 for c in self.workspace.channels.values()}
        provided = token.granted()
        for scope in slack_scopes.needed(method, params, kinds):  # type: ignore[arg-type]
            if scope not in provided:
                raise SlackError("missing_scope", needed=scope, provided=",".join(sorted(provided)))

    def _download(self, handler: BaseHTTPRequestHandler) -> None:
        """A file download (tests/fakes/slack_files.py): the bot token in the Authorization header, or a 302."""
        auth = handler.headers.get("Authorization", "")
        token_value = auth[7:].strip() if auth.startswith("Bearer ") else None
        token = self.workspace.tokens.get(token_value or "")
        record = Request("files.download", {"path": urlparse(handler.path).path}, token_value,
                         token.kind if token else None)
        self.requests.append(record)
        with self._arrived:
            self._arrived.notify_all()  # a held answer may be waiting for this request
        with self.workspace.lock:
            status, headers, body = slack_files.download(self.workspace, urlparse(handler.path).path, token)
        record.status = status
        try:
            handler.send_response(status)
            for key, value in {**headers, "Content-Length": str(len(body))}.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: str | bytes, content_type: str,
              headers: dict[str, str]) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    """A running FakeSlack over ``sample_workspace()``. Import it into a test module or conftest to use it."""
    with FakeSlack(sample_workspace()) as fake:
        yield fake
