"""The egress guard: the one place that decides what of a text may leave helpbot, on every outward channel.

The model is hostile: its tool names, arguments and answer are attacker-chosen, and so is every text a tool
read. Whatever goes out -- a Slack post or update, message metadata, a stdout/stderr line, the job summary, the
trace file, a saved transcript, the feedback report -- passes a :class:`Guard` first, which applies in one place:

- masking (:class:`mcp_lib.redact.Masker`, the one pattern library): secrets by pattern, the exact values of
  every credential helpbot holds (any length, as Actions' ``add-mask``), card numbers (Luhn-checked), and
  e-mail addresses and phone numbers unless ``HELPBOT_MASK_PERSONAL=false``;
- only names helpbot defined: a tool name, platform label or other model-chosen identifier is shown when it is a
  registered tool name, else as ``unknown_tool`` (:meth:`Guard.name`);
- private-run withholding: for a private channel's answer, the log, summary and trace keep nothing the model
  chose or a private message holds -- no text, numbers, names or call patterns (covert channels): the trace
  keeps how the run ended (:meth:`Guard.event`), the summary and log say :data:`PRIVATE_RUN`;
- for markdown that is rendered (Slack posts, the job summary): every Slack mention form defused,
  case-insensitively (users, channels, subteams, here, channel, everyone, and the ``@here`` spellings), no
  images, and a link to a host that is neither a configured platform nor a consulted source keeps scheme, host
  and path only (:meth:`Guard.markdown`).

The doors (:func:`out`, :func:`err`, :func:`server_err`, :func:`append`, :func:`write_file`, :func:`slack`,
:func:`slack_call`, logging's :func:`logging_installed`) are the only code in ``agent/`` that prints or writes
(``tests/agent/test_outward.py`` enumerates the writers and fails on a new one). They apply the guard in effect
(:func:`current`): each command installs one built from its environment (:func:`installed`), and the answer front
narrows it for the run (registered names, consulted hosts, private or not).

Guarding is idempotent; a text meets it before its door only where the door cannot see it whole: before a cut
(no secret straddles it) and before JSON escaping (which would hide a credential holding ``"`` from the mask).
It cannot recognise a secret no pattern knows and helpbot does not hold, nor private text written in a public
channel; docs/security.md lists what is masked where.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from agent.config import env_bool
from mcp_lib.config import env_str
from mcp_lib.redact import Masker

UNKNOWN_TOOL = "unknown_tool"
WITHHELD = "[withheld: private channel]"
PRIVATE_RUN = "private run: details withheld"

# A private run's trace: the events that stay and the fields they keep besides ``t`` and ``event`` -- how the run
# ended, nothing the model chose (how many events there are, and their order, would be a channel too). The
# run's duration (``t`` of the last event, the Actions job's own times) is the one channel left: see docs/security.md.
_PRIVATE_EVENTS: Mapping[str, frozenset[str]] = {
    "front.done": frozenset({"degraded"}), "front.failure": frozenset(), "front.interrupted": frozenset(),
}
_NAME_FIELDS = frozenset({"name", "tools", "tool_uses", "searches", "tool", "platform"})
# Model-chosen identifiers in the trace: a stop reason only as one the API defines.
_STOP_REASONS = frozenset({"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal",
                           "model_context_window_exceeded"})


# The configured platforms' URLs: links to their hosts keep their query and fragment.
_PLATFORM_URLS = ("SLACK_API_URL", "REDMINE_URL", "GROWI_URL", "GITHUB_API_URL", "GITHUB_SERVER_URL",
                  "HELPBOT_FAQ_BASE_URL")


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


# GitHub's mentions (@user, @org/team) in a pull request's title or body notify people. GitHub looks for them in
# the rendered HTML's text, after markdown took its delimiters away: `_@a_`, `*@a*`, `~~@a~~`, `[@a](u)`, `\@a`,
# `<b>@a</b>` all start a text node with @a. So an @ is safe only straight after an ASCII letter or digit (which
# no markdown removes: `a@b.com` stays an address, and GitHub notifies nobody for it); after anything else -- an
# underscore, punctuation, kana, full-width letters -- it is written ＠ (full width), which GitHub never reads.
# The @ may also be an HTML character reference (&#64;, &#x40;, &commat;), and so may the name's first letter.
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


_URL_CHARS = r"[A-Za-z0-9\-._~:/?#@!$&*+,;=%]"  # ASCII: 「…はhttps://wiki/xを参照」 ends before を
_LINKS = re.compile(
    r"!\[(?P<alt>[^\]\n]*)\]\((?P<image>[^)\n]*)\)"  # an image: never shown
    r"|\[(?P<label>[^\]\n]*)\]\(\s*<?(?P<href>[^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)"  # [label](url "title")
    r"|<(?P<slack>[A-Za-z][A-Za-z0-9+.-]*:[^|>\s]*)(?:\|(?P<slack_label>[^>]*))?>"  # Slack's <url|label>
    rf"|(?P<bare>(?<![A-Za-z0-9+.\-/@])(?:https?://|www\.){_URL_CHARS}+)",  # a bare URL (Slack links www. too)
    re.IGNORECASE,
)


_IMAGE_MARK = re.compile(r"!(?=\[)")  # what is left of an image after _LINKS: reference-style, alt over lines
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
    # Records (log, summary, trace) keep nothing private: the answer goes to a private channel (or one whose privacy
    # is unknown), or the run's records are public (a public repository, see :func:`records_public`).
    private: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, names: Iterable[str] = (), hosts: Iterable[str] = (),
                 private: bool = False) -> Guard:
        """Masking as configured (``HELPBOT_MASK_PERSONAL``), with the credentials of ``env``."""
        from mcp_lib.external import credential_values  # the tool results' list too

        personal = env_bool(env, "HELPBOT_MASK_PERSONAL")
        masker = Masker(personal=personal, cards=True, values=credential_values(env))
        configured = [h for name in _PLATFORM_URLS if (h := host_of(env.get(name, "")))]
        if any(h == "api.github.com" for h in configured) or env.get("GITHUB_TOKEN"):
            configured.append("github.com")
        return cls(masker, frozenset(names), frozenset(h.lower() for h in [*hosts, *configured]),
                   private or records_public(env))

    def for_run(self, *, names: Iterable[str] = (), hosts: Iterable[str] = (), private: bool | None = None) -> Guard:
        """This guard, knowing more names and hosts (and, when given, whether the run is private: a run's records
        only ever become more private)."""
        return replace(self, names=self.names | frozenset(names),
                       hosts=self.hosts | {h.lower() for h in hosts if h}, private=self.private or bool(private))

    def keeping_personal(self) -> Guard:
        """This guard without e-mail and phone masking (``HELPBOT_MASK_PERSONAL=false``); cards stay masked."""
        return replace(self, masker=Masker(personal=False, cards=True, values=self.masker.values))

    # -- text -------------------------------------------------------------------------------------------------------
    def text(self, text: str) -> str:
        """Any outward text: secrets, credentials, cards and (unless configured otherwise) personal data masked."""
        return self.masker.mask(text)

    def markdown(self, text: str) -> str:
        """Text that is rendered (a Slack post, the job summary): masked, mentions defused, links cleaned, no
        images (inline, reference-style or HTML: an HTML tag is shown as text)."""
        text = _IMAGE_MARK.sub("", self._links(_HTML_TAG.sub("＜", text)))
        return _MENTION.sub(_defused, self.text(self._no_queries(text)))

    def github(self, text: str) -> str:
        """Text GitHub renders and notifies on -- a pull request's title and body, a file, any issue or comment:
        masked, every ``@user`` and ``@org/team`` that markdown may leave at a text's start written with ＠
        (full width), which GitHub does not read as a mention; an e-mail address stays as it is."""
        return _GITHUB_MENTION.sub("＠", self.text(text))

    def name(self, name: object) -> str:
        """A registered tool (or platform) name as it is; anything else as ``unknown_tool``."""
        return name if isinstance(name, str) and name in self.names else UNKNOWN_TOOL

    # -- structured values ------------------------------------------------------------------------------------------
    def event(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """A trace event: names checked, text masked -- or, in a private run, None unless it says how the run
        ended (:data:`_PRIVATE_EVENTS`), and then with only the fields that say so."""
        if self.private:
            kept = _PRIVATE_EVENTS.get(str(event.get("event")))
            if kept is None:
                return None
            return {key: value for key, value in event.items() if key in ("t", "event") or key in kept}
        out: dict[str, Any] = {}
        for key, value in event.items():
            if key in _NAME_FIELDS:
                out[key] = self._names(value)
            elif key == "stop_reason":
                out[key] = value if value is None or value in _STOP_REASONS else "other"
            else:
                out[key] = self.deep(value)
        return out

    def deep(self, value: Any) -> Any:
        """Every string inside a JSON-like value masked."""
        return self.masker.deep(value)

    def metadata(self, value: Any) -> Any:
        """Slack message metadata (or any record): names checked wherever a name field is, every string masked."""
        if isinstance(value, Mapping):
            return {key: self._names(inner) if key in _NAME_FIELDS else self.metadata(inner)
                    for key, inner in value.items()}
        if isinstance(value, list | tuple):
            return [self.metadata(inner) for inner in value]
        return self.deep(value)

    def payload(self, payload: Any) -> Any:
        """A Slack payload (``text``, blocks, metadata): every ``text`` as rendered markdown, links in blocks
        cleaned, the metadata through :meth:`metadata`."""
        if isinstance(payload, dict):
            out: dict[str, Any] = {}
            for key, value in payload.items():
                if key in ("channel", "ts", "thread_ts", "timestamp", "name"):  # ids and a reaction's name
                    out[key] = value
                elif key == "metadata" and isinstance(value, Mapping):
                    out[key] = self.metadata(value)
                elif key == "text" and isinstance(value, str):
                    out[key] = self.markdown(value)
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

    # -- helpers ----------------------------------------------------------------------------------------------------
    def _no_queries(self, text: str) -> str:
        """Whatever a renderer may read as one URL to an unknown host (up to whitespace or ``<``, or all of
        ``<…>``) has no ``?`` or ``#`` left: the link regex cannot know where CommonMark, GFM or Slack end a URL
        (``(q)?``, ``\\)?``, ``<a b?>``, ``パス?``), so a query or fragment it missed becomes part of the path."""
        def fix(match: re.Match[str]) -> str:
            url = match.group("angled") or match.group("run")
            url = url if "://" in url[:8] else "http://" + url
            if host_of(url.replace("\\", "/")) in self.hosts:  # browsers read a backslash as a slash
                return match.group()
            return match.group().replace("?", "%3F").replace("#", "%23")

        return _URL_RUN.sub(fix, text)

    def _names(self, value: Any) -> Any:
        if value == "":  # no names (an answer that used no tool), not an unknown one
            return value
        if isinstance(value, str):  # metadata joins names with commas
            return ",".join(self.name(part) for part in value.split(",")) if "," in value else self.name(value)
        if isinstance(value, Sequence):
            return [self._names(v) for v in value]
        if isinstance(value, Mapping):  # e.g. {"tool": count}
            return {self.name(k): self._names(v) if not isinstance(v, int | float) else v for k, v in value.items()}
        return value

    def _url(self, url: str) -> str | None:
        """``url`` when it may stay as it is; scheme, host and path only for an unknown host; None when it is no
        web link (javascript:, data:, …)."""
        try:
            parts = urlsplit(url.strip())
        except ValueError:
            return None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return None
        host = parts.hostname.lower()
        netloc = host + (f":{parts.port}" if parts.port else "") if "@" in parts.netloc else parts.netloc
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
                url = self._url(groups["slack"])
                label = groups["slack_label"]
                if url is None:
                    return label or ""
                return f"<{url}|{label}>" if label else f"<{url}>"
            bare = groups["bare"]
            www = bare[:4].lower() == "www."
            url = self._url("http://" + bare if www else bare)
            return (url.removeprefix("http://") if www else url) if url else ""

        return _LINKS.sub(clean, text)


# -- the doors ------------------------------------------------------------------------------------------------------
_installed: list[Guard] = []


_from_process: dict[int, Guard] = {}


def current() -> Guard:
    """The guard in effect: the innermost :func:`installed` one, else one from the process environment."""
    if _installed:
        return _installed[-1]
    key = hash(frozenset(os.environ.items()))
    if key not in _from_process:  # compiled once per environment, not per call
        _from_process.clear()
        _from_process[key] = Guard.from_env(os.environ)
    return _from_process[key]


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
    if _installed:
        _installed[-1] = guard
    else:
        _installed.append(guard)
    return guard


def logging_installed(env: Mapping[str, str], stream: Callable[[], object] = lambda: sys.stderr
                      ) -> contextlib.AbstractContextManager[Any]:
    """Python logging (ours and every library's) through the guard in effect, for the block: masked, one line,
    tracebacks only with ``HELPBOT_DEBUG``, and in a private run only logger and level (:mod:`mcp_lib.logs`)."""
    from mcp_lib import logs

    return logs.installed(current, withheld=PRIVATE_RUN, env=env, stream=stream)


def out(text: str, file: IO[str] | None = None) -> None:
    """A line (or lines) on stdout, or on ``file``: masked."""
    print(current().text(text), file=file or sys.stdout, flush=True)


def err(text: str) -> None:
    """A line on stderr (the Actions log): masked."""
    print(current().text(text), file=sys.stderr, flush=True)


def server_err(server: str, line: str) -> None:
    """A line an in-house MCP server wrote on its stderr (:data:`mcp_lib.sessions.ServerLog`): masked and cut, on
    stderr under the server's name -- nothing in a private run, where the server may echo what the model chose
    or a private message held."""
    from mcp_lib.result import excerpt
    from mcp_lib.sessions import LINE_CHARS

    guard = current()
    if not guard.private:
        print(excerpt(guard.text(f"MCP server {server!r}: {line}"), LINE_CHARS), file=sys.stderr, flush=True)


def append(path: str | os.PathLike[str], text: str, *, rendered: bool = False) -> None:
    """Text appended to a file (the trace; the job summary, ``rendered`` markdown): masked. OSError goes to the
    caller."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(current().markdown(text) if rendered else current().text(text))


def markdown(text: str) -> str:
    """Rendered text through the guard before it is cut (the doors guard it again, which changes nothing)."""
    return current().markdown(text)


def write_file(path: str | os.PathLike[str], text: str) -> None:
    """A whole file (a saved transcript, a FAQ draft): masked."""
    Path(path).write_text(current().text(text), encoding="utf-8")


def unwritable(path: str | os.PathLike[str], *, folder: bool = False) -> str | None:
    """Why :func:`write_file` could not write ``path`` (or files into the folder ``path``), or None: asked
    before a run whose result is paid for, so a bad ``--save``/``--out`` is one line and not a lost answer."""
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
    """A Slack Web API write (``chat.postMessage``, ``chat.update``, ``chat.delete``, ``reactions.add``, …) through
    the SDK client: the payload guarded (:meth:`Guard.payload`)."""
    return getattr(web, api.replace(".", "_"))(**current().payload(params))


def slack_call(call: Callable[..., Any], ctx: Any, **params: Any) -> Any:
    """chat.postMessage through mcp_lib's Slack ``call`` (helpbot feedback): the payload guarded."""
    return call(ctx, "chat.postMessage", **current().payload(params))
