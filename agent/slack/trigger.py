"""What started this run: one strictly validated :class:`Trigger`, from a ``repository_dispatch`` or
``workflow_dispatch`` event, a bare payload or a Slack Events API envelope. Anything malformed is one
:class:`BadInput` line (exit 2, nothing posted): a typo'd key or a float ``ts`` must not answer in the wrong thread."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from agent.config import DECLARED
from agent.errors import BadInput, ConfigError
from mcp_lib import ids
from mcp_lib.config import env_list
from mcp_lib.ids import CHANNEL_RE, TS_RE, USER_RE

DISPATCH_EVENT_TYPE = "slack-help"
DEFAULT_REACTION = DECLARED["HELPBOT_REACTION"].default
MAX_QUESTION_CHARS = 4000
MAX_EVENT_BYTES = 1024 * 1024  # a GitHub event is a few KB
MAX_EVENT_DEPTH = 32  # the deepest real event (workflow_dispatch) nests about 5 levels

PAYLOAD_KEYS = frozenset({"channel", "ts", "thread_ts", "user", "reaction", "url", "item_user", "event_id", "mention"})
TRIGGER_EVENTS = frozenset({"reaction_added", "app_mention"})
# help.yml's inputs (tests/workflows pins them); force and now reach helpbot as --force and HELPBOT_NOW
WORKFLOW_INPUT_KEYS = frozenset({"url", "question", "dry_run", "force", "now"})

REACTION_RE = re.compile(r"[a-z0-9_+'\-]{1,100}")
EVENT_ID_RE = re.compile(r"[A-Za-z0-9]{1,64}")
_SKIN_TONE_RE = re.compile(r"::skin-tone-\d+$")
_REACTION_ALIASES = {"thumbsup": "+1", "thumbsdown": "-1"}  # Slack's events and reactions name 👍/👎 +1 and -1
# helpbot adds these itself (working, done, failed): as the trigger they would answer helpbot's own progress
WORKING_REACTION, DONE_REACTION, FAILED_REACTION = "eyes", "white_check_mark", "x"
RESERVED_REACTIONS = frozenset({WORKING_REACTION, DONE_REACTION, FAILED_REACTION})
_TS = "a Slack timestamp like 1700000000.123456"
Source = Literal["repository_dispatch", "workflow_dispatch", "payload", "slack_event", "cli"]  # what started it


@dataclass(frozen=True)
class Sender:
    """What a Slack event itself says about who acted (https://api.slack.com/events/app_mention, and for Slack
    Connect https://api.slack.com/apis/connect); :mod:`agent.slack.admission` decides on it."""

    bot_id: str | None = None  # the message's bot_id, or its bot_profile's id
    app_id: str | None = None
    subtype: str | None = None  # bot_message: webhooks, RSS, forms, workflows, integrations
    team: str | None = None  # the actor's team: user_team (else the message's team)
    home: frozenset[str] = frozenset()  # the installation's teams: authorizations' team_id and enterprise_id
    shared: bool = False  # the envelope's is_ext_shared_channel


@dataclass(frozen=True)
class Trigger:
    """A validated request for an answer: ``channel``/``ts`` name the message (None only for a free ``question``)."""

    source: Source
    channel: str | None = None
    ts: str | None = None
    thread_ts: str | None = None  # its thread root when the payload or link says so (Slack re-checks)
    user: str | None = None  # who reacted, or wrote the @helpbot message (``mention``)
    reaction: str | None = None  # None when started by hand or by a mention
    item_user: str | None = None
    event_id: str | None = None
    question: str | None = None
    dry_run: bool = False
    mention: bool = False
    sender: Sender | None = None  # a Slack envelope's facts about who acted (None: a dispatched payload or by hand)
    ignored: tuple[str, ...] = ()  # payload keys helpbot does not know (Zapier adds fields): logged, not used


def load_event(path: str | os.PathLike[str]) -> Trigger:
    return parse_event(read_event(path))


def read_event(path: str | os.PathLike[str]) -> bytes:
    """An event file's bytes: a regular file of at most MAX_EVENT_BYTES (a FIFO or /dev/zero is refused before a
    byte is read); anything else is BadInput, not a traceback or a hang."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # opening a FIFO must not block
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BadInput(f"event file {name!r} is not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as file:
                raw = file.read(MAX_EVENT_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise BadInput(f"cannot read event file {name!r}: {exc.strerror or exc}") from None
    if len(raw) > MAX_EVENT_BYTES:
        raise BadInput(f"event file {name!r} is larger than {MAX_EVENT_BYTES // 1024 // 1024} MB")
    return raw


def parse_event(raw: str | bytes) -> Trigger:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BadInput("event is not UTF-8 text") from None
    if not raw.strip():
        raise BadInput("event is empty; expected a JSON object")
    depth = _nesting(raw)
    if depth > MAX_EVENT_DEPTH:
        raise BadInput(f"event is nested {depth} levels deep; at most {MAX_EVENT_DEPTH}")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadInput(f"event is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (RecursionError, ValueError) as exc:  # belt and braces; huge numbers are ValueError
        raise BadInput(f"event is not usable JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise BadInput(f"event must be a JSON object, got {_json_type(data)}")
    return parse_event_data(data)


def parse_event_data(data: Mapping[str, Any]) -> Trigger:
    from agent.core.transcript import valid_text

    data = valid_text(dict(data))  # JSON may carry lone surrogates ("\\ud800"): U+FFFD, not a crash when printed
    if "client_payload" in data:  # a repository_dispatch
        if data.get("action") not in (None, DISPATCH_EVENT_TYPE):
            raise BadInput(f"repository_dispatch event_type is {data.get('action')!r}; helpbot handles "
                           f"{DISPATCH_EVENT_TYPE!r}")
        if not isinstance(payload := data["client_payload"], dict):
            raise BadInput(f"client_payload must be a JSON object, got {_json_type(payload)}")
        return payload_trigger(payload, source="repository_dispatch", where="client_payload")
    if "inputs" in data and ("workflow" in data or "ref" in data or "repository" in data):
        return _from_workflow_dispatch(data)
    kind = data.get("type")
    if kind == "url_verification":
        raise BadInput("a Slack url_verification request is not a trigger (it belongs to the relay)")
    if kind == "event_callback":
        return _from_slack_envelope(data)
    if isinstance(kind, str) and kind in ("reaction_added", "reaction_removed", "message", "app_mention"):
        raise BadInput(f"a bare Slack {kind!r} event; pass the whole Events API envelope (type event_callback)")
    return payload_trigger(data, source="payload", where="event")


def from_options(*, url: str | None = None, channel: str | None = None, ts: str | None = None) -> Trigger:
    """The ``--url PERMALINK`` / ``--channel C --ts TS`` forms of ``helpbot answer``, validated alike."""
    payload = {k: v for k, v in {"url": url, "channel": channel, "ts": ts}.items() if v is not None}
    return payload_trigger(payload, source="cli", where="options")


def _from_workflow_dispatch(data: Mapping[str, Any]) -> Trigger:
    inputs = data.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise BadInput(f"workflow_dispatch inputs must be a JSON object, got {_json_type(inputs)}")
    unknown = sorted(set(inputs) - WORKFLOW_INPUT_KEYS)
    if unknown:
        raise BadInput(f"unknown workflow_dispatch input(s) {', '.join(unknown)}; "
                       f"expected {', '.join(sorted(WORKFLOW_INPUT_KEYS))}")
    url = _optional_str(inputs, "url", "inputs")
    question = _optional_str(inputs, "question", "inputs")
    dry_run = _bool(inputs.get("dry_run"), "inputs.dry_run")
    _bool(inputs.get("force"), "inputs.force")  # read by the workflow (--force); checked here like its neighbours
    _optional_str(inputs, "now", "inputs")  # the workflow passes it as HELPBOT_NOW, read (and checked) there
    if url and question:
        raise BadInput("give either inputs.url (answer a Slack message) or inputs.question, not both")
    if question:
        if len(question) > MAX_QUESTION_CHARS:
            raise BadInput(f"inputs.question is {len(question)} characters; at most {MAX_QUESTION_CHARS}")
        return Trigger(source="workflow_dispatch", question=question, dry_run=dry_run)
    if not url:
        raise BadInput("workflow_dispatch needs inputs.url (a Slack message link) or inputs.question")
    link = ids.parse_permalink(url, "inputs.url")
    return Trigger(source="workflow_dispatch", channel=link.channel, ts=link.ts, thread_ts=link.thread_ts,
                   dry_run=dry_run)


def _from_slack_envelope(data: Mapping[str, Any]) -> Trigger:
    event = data.get("event")
    if not isinstance(event, dict):
        raise BadInput("Slack envelope has no 'event' object")
    mention = event.get("type") == "app_mention"
    if mention:  # {type, user, text, ts, channel, event_ts, thread_ts?}
        keys = {"channel": event.get("channel"), "ts": event.get("ts"), "thread_ts": event.get("thread_ts"),
                "item_user": event.get("user"), "mention": True}
    elif event.get("type") != "reaction_added":
        raise BadInput(f"Slack event type is {event.get('type')!r}; helpbot handles "
                       f"{' and '.join(repr(t) for t in sorted(TRIGGER_EVENTS))}")
    elif not isinstance(item := event.get("item"), dict):
        raise BadInput("reaction_added event has no 'item' object")
    elif item.get("type") != "message":
        raise BadInput(f"reaction_added on a {item.get('type')!r}; helpbot answers messages only")
    else:
        keys = {"channel": item.get("channel"), "ts": item.get("ts"), "reaction": event.get("reaction"),
                "item_user": event.get("item_user")}
    payload = {**keys, "user": event.get("user"), "event_id": data.get("event_id")}
    trigger = payload_trigger({k: v for k, v in payload.items() if v is not None}, source="slack_event", where="event")
    return replace(trigger, sender=sender_of(data, event, message=mention))


def sender_of(envelope: Mapping[str, Any], event: Mapping[str, Any], *, message: bool) -> Sender:
    """The envelope's facts about who acted; ``message``: the event's bot fields describe its author (app_mention)."""

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    profile = obj_at(event, "bot_profile")
    home = {t for a in envelope.get("authorizations") or [] if isinstance(a, dict)
            for key in ("team_id", "enterprise_id") if (t := text(a.get(key)))}
    if not home and (team := text(envelope.get("team_id"))):
        home = {team}
    return Sender(bot_id=text(event.get("bot_id")) or text(profile.get("id")) if message else None,
                  app_id=text(event.get("app_id")) or text(profile.get("app_id")) if message else None,
                  subtype=text(event.get("subtype")) if message else None,
                  team=text(event.get("user_team")) or (text(event.get("team")) if message else None),
                  home=frozenset(home), shared=envelope.get("is_ext_shared_channel") is True)


def obj_at(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``data[key]`` when it is an object, else empty: outside JSON may have anything there."""
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def payload_trigger(payload: Mapping[str, Any], *, source: Source, where: str) -> Trigger:
    """Validate the common payload keys (also used by the relay on what it forwards)."""
    if "question" in payload:  # a key helpbot knows, in the wrong place: it would change what is answered
        raise BadInput(f"{where} has a question: 'question' is accepted from workflow_dispatch only")
    ignored = _key_names(set(payload) - PAYLOAD_KEYS)  # taken as they come; what is needed is checked below
    mention = _bool(payload.get("mention"), f"{where}.mention")
    values = {key: _optional_str(payload, key, where) for key in PAYLOAD_KEYS - {"mention"}}
    channel, ts, thread_ts, url = values["channel"], values["ts"], values["thread_ts"], values["url"]
    if url:
        link = ids.parse_permalink(url, f"{where}.url")
        for key, given, linked in (("channel", channel, link.channel), ("ts", ts, link.ts),
                                   ("thread_ts", thread_ts, link.thread_ts)):
            if given and linked and given != linked:
                raise BadInput(f"{where}.{key} {given!r} disagrees with the url ({linked!r})")
        channel, ts, thread_ts = link.channel, link.ts, thread_ts or link.thread_ts
    if not channel or not ts:
        missing = " and ".join(k for k, v in (("channel", channel), ("ts", ts)) if not v)
        unknown = f"; unknown key(s) ignored: {', '.join(ignored)}" if ignored else ""
        raise BadInput(f"{where} is missing {missing} (or give url, a Slack message link){unknown}")
    _check(channel, CHANNEL_RE, f"{where}.channel", "a Slack channel ID like C0123456789")
    _check(ts, TS_RE, f"{where}.ts", _TS)
    _check(thread_ts, TS_RE, f"{where}.thread_ts", _TS)
    for key in ("user", "item_user"):
        _check(values[key], USER_RE, f"{where}.{key}", "a Slack user ID like U0123456789")
    reaction = canonical_reaction(values["reaction"]) if values["reaction"] else None
    _check(reaction, REACTION_RE, f"{where}.reaction", "an emoji name like help")
    if mention and reaction is not None:
        raise BadInput(f"{where} has both a reaction and mention; a trigger is one or the other")
    _check(values["event_id"], EVENT_ID_RE, f"{where}.event_id", "a Slack event ID like Ev0123ABC")
    return Trigger(source=source, channel=channel, ts=ts, thread_ts=thread_ts, user=values["user"],
                   reaction=reaction, item_user=values["item_user"], event_id=values["event_id"], mention=mention,
                   ignored=ignored)


_KEY_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,40}")
MAX_NAMED_KEYS = 10


def _key_names(keys: set[str]) -> tuple[str, ...]:
    """Unknown payload keys as the log may name them: plain names (at most ten), the rest counted."""
    plain = sorted(k for k in keys if isinstance(k, str) and _KEY_NAME.fullmatch(k))[:MAX_NAMED_KEYS]
    others = len(keys) - len(plain)
    return (*plain, *([f"{others} other{'s' if others > 1 else ''}"] if others else []))


def canonical_reaction(name: str) -> str:
    """A reaction's name as Slack reports it (``:help:``, skin tones, ``thumbsup`` is ``+1``): the one place
    reaction names are compared."""
    name = _SKIN_TONE_RE.sub("", name.strip().strip(":")).lower()
    return _REACTION_ALIASES.get(name, name)


def env_channels(env: Mapping[str, str], variable: str) -> list[str]:
    """A list of channel IDs from the environment (HELPBOT_CHANNELS), de-duplicated; a bad one is ConfigError."""
    channels = list(dict.fromkeys(env_list(env, variable)))
    for channel in channels:
        if not ids.is_channel_id(channel):
            raise ConfigError(variable, f"{channel!r} is not a channel ID (like C0123456789)")
    return channels


def _optional_str(payload: Mapping[str, Any], key: str, where: str) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        hint = " (write timestamps as strings: a JSON number loses digits)" if key.endswith("ts") else ""
        raise BadInput(f"{where}.{key} must be a string, got {_json_type(value)}{hint}")
    return value.strip() or None  # Zapier sends "" for fields the event does not have


def _bool(value: Any, where: str) -> bool:
    if value is None or value == "" or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BadInput(f"{where} must be true or false, got {value!r}")


def _check(value: str | None, pattern: re.Pattern[str], where: str, expected: str) -> None:
    """A value given must match all of ``pattern`` (``match`` with ``$`` would accept a trailing newline)."""
    if value and not pattern.fullmatch(value):
        raise BadInput(f"{where} {value[:80]!r} is not {expected}")


# A string (one left open runs to the end: read once, possessive, not once per way to split it), or a bracket outside
# strings. ``(?:[^"\\]+|\\.)*"`` backtracked exponentially on an open string: '{"a": "' + 30 letters took minutes.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)|[\[\]{}]')


def _nesting(text: str) -> int:
    """How deep ``[`` and ``{`` nest in JSON text, counted without recursion."""
    depth = deepest = 0
    for token in _JSON_TOKENS.findall(text):
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
    return deepest


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
