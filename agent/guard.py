"""The egress guard: the one place that decides what of a text may leave helpbot, on every outward channel.

The model is hostile, and so is every text a tool read. Whatever goes out (Slack writes, stdout/stderr, the job
summary, the trace, saved files) passes a :class:`Guard`: masking (:class:`mcp_lib.redact.Masker`), only names
helpbot defined, a private run's records withheld, rendered markdown's mentions defused and links cleaned. The
doors below are the only code in ``agent/`` that prints or writes (``tests/agent/test_outward.py``); each applies
the guard in effect (:func:`current`), which a command installs and a run narrows. docs/security.md lists what
is masked where, and what a guard cannot recognise.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from agent.config import env_bool
from agent.guard_links import link_matches
from mcp_lib.config import env_str
from mcp_lib.redact import Masker

UNKNOWN_TOOL = "unknown_tool"
PRIVATE_RUN = "private run: details withheld"

# A private run's trace keeps how the run ended and nothing the model chose (the number and order of events would
# be a covert channel too): these events, with these fields besides ``t`` and ``event``.
_PRIVATE_EVENTS: Mapping[str, frozenset[str]] = {
    "front.done": frozenset({"degraded"}), "front.failure": frozenset(), "front.interrupted": frozenset(),
}
_NAME_FIELDS = frozenset({"name", "tools", "tool_uses", "searches", "tool", "platform"})
_STOP_REASONS = frozenset({"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal",
                           "model_context_window_exceeded"})  # the API's; any other is "other"
_PLATFORM_URLS = ("SLACK_API_URL", "REDMINE_URL", "GROWI_URL", "GITHUB_API_URL", "GITHUB_SERVER_URL",
                  "HELPBOT_FAQ_BASE_URL")  # links to these hosts keep their query and fragment


def records_public(env: Mapping[str, str]) -> bool:
    """The run's records (job summary, log, trace, artifacts) may be read by anyone, so every run keeps them as a
    private channel's does: the repository is public, or its visibility unknown (in Actions, an event without
    ``HELPBOT_REPOSITORY_VISIBILITY``) -- unless ``HELPBOT_PUBLIC_RECORDS=true``."""
    visibility = env_str(env, "HELPBOT_REPOSITORY_VISIBILITY")
    if visibility in ("private", "internal") or env_bool(env, "HELPBOT_PUBLIC_RECORDS"):
        return False
    return visibility is not None or env.get("GITHUB_ACTIONS") == "true"


def registry_names(registry: Any) -> list[str]:
    """What a run lets through as a name: its registry's tools (wire and CLI forms) and their platforms."""
    tools = registry.tools()
    return [*(t.wire_name for t in tools), *(t.cli_name for t in tools), *(t.platform for t in tools)]


# -- mentions and links ---------------------------------------------------------------------------------------------
_MENTION = re.compile(
    r"<@(?P<user>[UW][A-Z0-9]+)(?:\|(?P<user_label>[^>]*))?>"
    r"|<!subteam\^(?P<team>[A-Z0-9]+)(?:\|@?(?P<team_label>[^>]*))?>"
    r"|<!(?P<word>here|channel|everyone)(?:\|[^>]*)?>"
    r"|<#(?P<channel>[CG][A-Z0-9]+)(?:\|(?P<channel_label>[^>]*))?>"
    r"|<!(?P<other>[^>]*)>"
    r"|(?<![A-Za-z0-9._%+\-@＠])[@＠](?P<spelled>here|channel|everyone)(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
# GitHub finds @user and @org/team in the rendered HTML's text, after markdown took `_ * ~~ [ ] \ <b>` away, so an @
# (or &#64;, &#x40;, &commat;) is safe only straight after an ASCII letter or digit (`a@b.com` notifies nobody).
_GITHUB_MENTION = re.compile(r"(?<![A-Za-z0-9])(?:@|&#0*64;|&#[xX]0*40;|&commat;)(?=[A-Za-z0-9]|&#|&[A-Za-z]+;)")


def _defused(match: re.Match[str]) -> str:
    """A mention as text that notifies nobody: ＠ (full width) instead of the markup."""
    groups = match.groupdict()
    if groups["user"]:
        return "＠" + (groups["user_label"] or groups["user"])
    if groups["team"]:
        return "＠" + (groups["team_label"] or "team")
    if groups["word"] or groups["spelled"]:
        return "＠" + (groups["word"] or groups["spelled"]).lower()
    if groups["channel"]:
        return "#" + (groups["channel_label"] or groups["channel"])
    return "＜!" + (groups["other"] or "") + "＞"


def _no_mentions(text: str) -> str:
    """Every mention defused, in time linear in the text: a markup mention ends at a ">", so past the last one only
    @here-style ones are looked for, between the "<"s (not in one, nor in the context it is read in); from each "<"
    there the pattern read on to the end, in vain. Before it, every label read to its ">" matches."""
    end = text.rfind(">") + 1
    return _MENTION.sub(_defused, text[:end]) + "<".join(_MENTION.sub(_defused, p) for p in text[end:].split("<"))


_IMAGE_MARK = re.compile(r"!(?=\[)")  # what is left of an image after the links: reference-style, alt over lines
_HTML_TAG = re.compile(r"<(?=/?[A-Za-z][A-Za-z0-9-]*(?:[\s/>]|$))")  # <img …>, <picture>: not Slack's <url|x>
_URL_RUN = re.compile(r"<(?P<angled>(?:https?|ftp)://[^<>\n]*)>|(?P<run>(?:(?:https?|ftp)://|www\.)[^\s<]*)",
                      re.IGNORECASE)


def host_of(url: str) -> str | None:
    try:
        return (urlsplit(url.strip()).hostname or "").lower() or None
    except ValueError:
        return None


# -- the guard ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Guard:
    """What may leave, for one process (and, with :meth:`for_run`, one run). Immutable; cheap to copy."""

    masker: Masker = field(default_factory=lambda: Masker(personal=True, cards=True))
    names: frozenset[str] = frozenset()  # registered tool names (wire and CLI forms) and platform names
    hosts: frozenset[str] = frozenset()  # configured platforms' hosts and the consulted sources'
    private: bool = False  # records keep nothing private: a private channel's run, or public records

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, names: Iterable[str] = (), hosts: Iterable[str] = ()) -> Guard:
        """Masking as configured (``HELPBOT_MASK_PERSONAL``), with the credentials of ``env``."""
        from mcp_lib.external import credential_values  # the tool results' list too

        masker = Masker(personal=env_bool(env, "HELPBOT_MASK_PERSONAL"), cards=True, values=credential_values(env))
        configured = [h for name in _PLATFORM_URLS if (h := host_of(env.get(name, "")))]
        if "api.github.com" in configured or env.get("GITHUB_TOKEN"):
            configured.append("github.com")
        return cls(masker, frozenset(names), frozenset(h.lower() for h in [*hosts, *configured]), records_public(env))

    def for_run(self, *, names: Iterable[str] = (), hosts: Iterable[str] = (), private: bool = False) -> Guard:
        """This guard knowing more names and hosts, and private when asked (a run only ever becomes more private)."""
        return replace(self, names=self.names | frozenset(names),
                       hosts=self.hosts | {h.lower() for h in hosts if h}, private=self.private or private)

    def text(self, text: str) -> str:
        """Any outward text: secrets, credentials, cards and (unless configured otherwise) personal data masked."""
        return self.masker.mask(text)

    def markdown(self, text: str) -> str:
        """Text that is rendered (a Slack post, the job summary): masked, mentions defused, links cleaned, no
        images (inline, reference-style or HTML: an HTML tag is shown as text)."""
        text = _IMAGE_MARK.sub("", self._links(_HTML_TAG.sub("＜", text)))
        return _no_mentions(self.text(self._no_queries(text)))

    def github(self, text: str) -> str:
        """Text GitHub renders and notifies on (a pull request, a file): masked, every mention written with ＠."""
        return _GITHUB_MENTION.sub("＠", self.text(text))

    def name(self, name: object) -> str:
        """A registered tool (or platform) name as it is; anything else as ``unknown_tool``."""
        return name if isinstance(name, str) and name in self.names else UNKNOWN_TOOL

    def event(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """A trace event: names checked, text masked; in a private run only how the run ended, else None."""
        if self.private:
            kept = _PRIVATE_EVENTS.get(str(event.get("event")))
            return None if kept is None else {key: v for key, v in event.items() if key in {"t", "event", *kept}}
        out: dict[str, Any] = {}
        for key, value in event.items():
            if key in _NAME_FIELDS:
                out[key] = self._names(value)
            elif key == "stop_reason":
                out[key] = value if value is None or value in _STOP_REASONS else "other"
            else:
                out[key] = self.masker.deep(value)
        return out

    def metadata(self, value: Any) -> Any:
        """Slack message metadata (or any record): names checked wherever a name field is, every string masked."""
        if isinstance(value, Mapping):
            return {key: self._names(inner) if key in _NAME_FIELDS else self.metadata(inner)
                    for key, inner in value.items()}
        if isinstance(value, list | tuple):
            return [self.metadata(inner) for inner in value]
        return self.masker.deep(value)

    def payload(self, payload: Any) -> Any:
        """A Slack payload (``text``, blocks, metadata): every string (``text`` too) as rendered markdown, links in
        blocks cleaned, the metadata through :meth:`metadata`."""
        if isinstance(payload, dict):
            out: dict[str, Any] = {}
            for key, value in payload.items():
                if key in ("channel", "ts", "thread_ts", "timestamp", "name"):  # ids and a reaction's name
                    out[key] = value
                elif key == "metadata" and isinstance(value, Mapping):
                    out[key] = self.metadata(value)
                elif key in ("url", "image_url") and isinstance(value, str):
                    out[key] = self._url(value) or ""
                else:
                    out[key] = self.payload(value)
            return out
        if isinstance(payload, list):
            return [self.payload(value) for value in payload]
        if isinstance(payload, str):
            return self.markdown(payload)
        return payload

    def _no_queries(self, text: str) -> str:
        """No ``?`` or ``#`` in whatever a renderer may read as a URL to an unknown host: where CommonMark, GFM or
        Slack end a URL (``(q)?``, ``<a b?>``, ``パス?``) is unknowable, so a missed query becomes path."""
        def fix(match: re.Match[str]) -> str:
            url = match.group("angled") or match.group("run")
            url = url if "://" in url[:8] else "http://" + url
            if host_of(url.replace("\\", "/")) in self.hosts:  # browsers read a backslash as a slash
                return match.group()
            return match.group().replace("?", "%3F").replace("#", "%23")

        return _URL_RUN.sub(fix, text)

    def _names(self, value: Any) -> Any:
        if isinstance(value, str):  # metadata joins names with commas; "": no names (no tool used), not an unknown one
            return ",".join(self.name(part) for part in value.split(",")) if value else value
        if isinstance(value, Sequence):
            return [self._names(v) for v in value]
        if isinstance(value, Mapping):  # e.g. {"tool": count}
            return {self.name(k): self._names(v) if not isinstance(v, int | float) else v for k, v in value.items()}
        return value

    def _url(self, url: str) -> str | None:
        """``url`` as it is; scheme, host and path only for an unknown host; None for no web link (javascript:)."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port  # "host:99999", "host:abc": ValueError too, no web link
        except ValueError:
            return None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return None
        host = parts.hostname.lower()
        netloc = host + (f":{port}" if port else "") if "@" in parts.netloc else parts.netloc
        if host in self.hosts:
            return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def _links(self, text: str) -> str:
        def clean(match: re.Match[str]) -> str:
            groups = match.groupdict()
            if groups["image"] is not None:
                return groups["alt"] or ""
            if groups["href"] is not None:
                url = self._url(groups["href"])
                return f"[{groups['label']}]({url})" if url else groups["label"]
            if groups["slack"] is not None:
                url, label = self._url(groups["slack"]), groups["slack_label"]
                if url is None:
                    return label or ""
                return f"<{url}|{label}>" if label else f"<{url}>"
            bare = groups["bare"]
            www = bare[:4].lower() == "www."
            url = self._url("http://" + bare if www else bare)
            return (url.removeprefix("http://") if www else url) if url else ""

        parts, done = [], 0
        for match in link_matches(text):
            parts += [text[done:match.start()], clean(match)]
            done = match.end()
        return "".join(parts) + text[done:]


# -- the doors ------------------------------------------------------------------------------------------------------
_installed: list[Guard] = []


@functools.lru_cache(maxsize=1)  # compiled once per process environment, not per call
def _from_process(environ: frozenset[tuple[str, str]]) -> Guard:
    return Guard.from_env(dict(environ))


def current() -> Guard:
    """The guard in effect: the innermost :func:`installed` one, else one from the process environment."""
    return _installed[-1] if _installed else _from_process(frozenset(os.environ.items()))


@contextlib.contextmanager
def installed(guard: Guard) -> Iterator[Guard]:
    """Make ``guard`` the one in effect for the block (a command, a run)."""
    depth = len(_installed)
    _installed.append(guard)
    try:
        yield guard
    finally:
        del _installed[depth:]  # with whatever narrow() made of it


def narrow(**changes: Any) -> Guard:
    """Replace the guard in effect by a narrower one (more names or hosts, private) until its block ends."""
    guard = current().for_run(**changes)
    _installed[-1:] = [guard]  # the innermost replaced, or the first installed
    return guard


def logging_installed(env: Mapping[str, str], stream: Callable[[], object] = lambda: sys.stderr
                      ) -> contextlib.AbstractContextManager[Any]:
    """Python logging (ours and every library's) through the guard in effect, for the block (:mod:`mcp_lib.logs`)."""
    from mcp_lib import logs

    return logs.installed(current, withheld=PRIVATE_RUN, env=env, stream=stream)


def out(text: str, file: IO[str] | None = None) -> None:
    """A line (or lines) on stdout, or on ``file``: masked."""
    print(current().text(text), file=file or sys.stdout, flush=True)


def err(text: str) -> None:
    """A line on stderr (the Actions log): masked."""
    out(text, sys.stderr)


def server_err(server: str, line: str) -> None:
    """An in-house MCP server's stderr line, masked and cut, under its name; nothing in a private run (the server
    may echo what the model chose or a private message held)."""
    from mcp_lib.cutting import excerpt
    from mcp_lib.sessions import LINE_CHARS

    guard = current()
    if not guard.private:
        print(excerpt(guard.text(f"MCP server {server!r}: {line}"), LINE_CHARS), file=sys.stderr, flush=True)


def append(path: str | os.PathLike[str], text: str, *, rendered: bool = False) -> None:
    """Text appended to a file (the trace; the job summary, ``rendered`` markdown): masked; OSError is raised."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(current().markdown(text) if rendered else current().text(text))


def markdown(text: str) -> str:
    """Rendered text guarded before it is cut, so no secret straddles the cut (guarding again changes nothing)."""
    return current().markdown(text)


def write_file(path: str | os.PathLike[str], text: str) -> None:
    """A whole file (a saved transcript, a FAQ draft): masked."""
    Path(path).write_text(current().text(text), encoding="utf-8")


def unwritable(path: str | os.PathLike[str], *, folder: bool = False) -> str | None:
    """Why :func:`write_file` could not write ``path`` (or into the folder ``path``), or None: asked before a paid
    run, so a bad ``--save``/``--out`` is one line and not a lost answer."""
    target = Path(path)
    if folder:
        if target.exists() and not target.is_dir():
            return "it is a file, not a folder"
        existing = next((p for p in (target, *target.parents) if p.exists()), Path("."))
        return None if os.access(existing, os.W_OK) else "permission denied"
    if target.is_dir():
        return "it is a directory"
    if not target.parent.is_dir():
        return f"the folder {str(target.parent)!r} does not exist"
    return None if os.access(target if target.exists() else target.parent, os.W_OK) else "permission denied"


def slack(web: Any, api: str, **params: Any) -> Any:
    """A Slack Web API write (``chat.postMessage``, ``reactions.add``, …) on the SDK client, its payload guarded."""
    return getattr(web, api.replace(".", "_"))(**current().payload(params))


def slack_call(call: Callable[..., Any], ctx: Any, *, update: bool = False, **params: Any) -> Any:
    """chat.postMessage (``update``: chat.update) through mcp_lib's Slack ``call`` (helpbot feedback, helpbot vote):
    the payload guarded."""
    return call(ctx, "chat.update" if update else "chat.postMessage", **current().payload(params))
