"""In-house MCP servers from ``helpbot.toml`` (``[[mcp_servers]]``): their allowlisted tools join the catalog as
ordinary :class:`Tool`\\ s (same invoke: schema, limits, masking, errors as values). A server is contacted when its
tools are first needed, listed once per run within bounds, and held in one session (:mod:`mcp_lib.sessions`)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from .config import DECLARED, ConfigError, check_url, env_str, validation_problem
from .core import ArgumentError, Platform, Result, Tool, ToolContext, ToolError
from .cutting import keep_start, keep_start_masked
from .doors import NEVER_SENT, WHERE, door
from .redact import SECRETS, Masker
from .result import from_call_result
from .sessions import ServerLog, ServerSession, group_command, masked_stderr

CONFIG_FILE = "helpbot.toml"
WIRE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what MCP clients and the Messages API accept
MAX_LIST_PAGES = 50  # of tools/list, against a server that pages forever
MAX_LISTED_TOOLS = 2000
# What of one listed tool goes into every model request: a longer description is cut, a larger schema not offered
MAX_DESCRIPTION_CHARS = 4000
MAX_SCHEMA_CHARS = 20_000


class ServerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    prefix: str | None = None  # tool names become PREFIX_tool; default: the name
    description: str = ""
    scenes: list[str] = []
    command: str | None = None
    args: list[str] = []
    env: list[str] = []
    cwd: str | None = None
    url: str | None = None
    header: str = "Authorization"
    header_env: str | None = None
    header_prefix: str = "Bearer "
    tools: list[str]
    allow_writes: bool = False
    timeout_s: float = 60.0
    list_timeout_s: float = 20.0  # connecting, and listing the tools; a hung server must not hang the catalog

    @field_validator("name", "prefix")
    @classmethod
    def _word(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Lower-case letters and digits: both prefix tool names (a prefix may end in '_', which is dropped)."""
        prefix = info.field_name == "prefix"
        word = value.rstrip("_") if value is not None and prefix else value
        if word is not None and not re.fullmatch(r"[a-z][a-z0-9]{0,20}", word):
            raise ValueError("must be lower-case letters and digits"
                             + (", optionally ending in '_'" if prefix else " (it prefixes tool names)"))
        return word or None

    @field_validator("env", "header_env")
    @classmethod
    def _not_ours(cls, value: Any) -> Any:
        """helpbot's own credentials (every declared secret, :mod:`mcp_lib.doors`) never reach an in-house server."""
        names = set([value] if isinstance(value, str) else value or [])
        ours = sorted(n for n in names if n in WHERE or n in NEVER_SENT or (n in DECLARED and DECLARED[n].secret))
        if ours:
            raise ValueError(f"{', '.join(ours)} may not be passed to an MCP server: it goes only to its own "
                             "service; give the server a credential of its own")
        return value

    @property
    def platform_name(self) -> str:
        return self.prefix or self.name

    @model_validator(mode="after")
    def _transport(self) -> ServerEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if not self.tools:
            raise ValueError("`tools` (the allowlist) must name at least one tool")
        return self


def load_file_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The parsed ``HELPBOT_CONFIG``, else -- for the process environment only -- ``./helpbot.toml`` when it
    exists; empty when there is none."""
    import tomllib

    configured = env_str(env, "HELPBOT_CONFIG")
    path = Path(configured) if configured else Path.cwd() / CONFIG_FILE
    if configured and not path.is_file():
        raise ConfigError("HELPBOT_CONFIG", f"{configured!r} is not a file")
    if not path.is_file() or (not configured and env is not os.environ and dict(env) != dict(os.environ)):
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), f"not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(str(path), f"cannot be read ({exc.strerror or exc})") from None


def server_entries(env: Mapping[str, str]) -> list[ServerEntry]:
    raw = load_file_config(env).get("mcp_servers", [])
    entries = []
    for index, item in enumerate(raw if isinstance(raw, list) else [raw]):
        try:
            entries.append(ServerEntry.model_validate(item))
        except ValidationError as exc:
            raise ConfigError(f"helpbot.toml mcp_servers[{index}]", validation_problem(exc, "entry")) from None
        if entries[-1].url is not None:  # the platform URLs' check: no user:pass@ (the error names the setting)
            check_url(f"helpbot.toml mcp_servers[{index}].url", entries[-1].url)
    names = [e.platform_name for e in entries]
    if len(names) != len(set(names)):
        raise ConfigError("helpbot.toml mcp_servers", "two servers share a name or prefix")
    return entries


def _transport(entry: ServerEntry, env: Mapping[str, str], pidfile: Path, errlog: TextIO) -> Any:
    if entry.command is not None:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        # A command that does not exist is named as such (through /bin/sh, it would only be a closed connection).
        if "/" in entry.command:
            found = os.access(Path(entry.cwd or ".") / entry.command, os.X_OK)
        else:
            path = env["PATH"] if "PATH" in entry.env and "PATH" in env else None  # None: this process's PATH
            found = shutil.which(entry.command, path=path) is not None
        if not found:
            raise FileNotFoundError(f"command {entry.command!r} not found")
        passed = {name: env[name] for name in entry.env if name in env}
        command, args = group_command(entry.command, entry.args, pidfile)
        return stdio_client(StdioServerParameters(command=command, args=args, env=passed, cwd=entry.cwd),
                            errlog=errlog)
    import httpx2  # the client type streamable_http_client takes (mcp's public API)
    from mcp.client.streamable_http import streamable_http_client

    headers = {}
    hooks = []
    assert entry.url is not None
    if entry.header_env:  # the header token goes to the server's origin only (its door)
        token = env_str(env, entry.header_env)
        if token is None:
            raise ConfigError(entry.header_env, f"needed by MCP server {entry.name!r} but not set")
        headers[entry.header] = entry.header_prefix + token
        hooks.append(door(entry.header_env, entry.url, token).async_hook())
    # mcp's own defaults: 30 s to connect/write, 300 s to read (a server may hold its event stream open); no
    # redirect followed by the client (mcp follows same-origin ones itself, through the same hooks).
    client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=False,
                                event_hooks={"request": hooks})
    return streamable_http_client(entry.url, http_client=client)


def _checked_part(schema: dict[str, Any]) -> dict[str, Any]:
    """What of a server's input schema helpbot checks the model's arguments against: all of it, unless it holds a
    regular expression (``pattern``, ``patternProperties``) -- Python's engine backtracks without bound, holding
    the GIL (``^(a+)+$`` on 40 ``a`` and a ``b``: hours) -- or ``uniqueItems`` (jsonschema compares unsortable
    items pairwise: 8000 objects, a minute), so the server, which checks its own input, judges those."""
    todo: list[Any] = [schema]
    while todo:  # not recursive: a schema may nest deeper than the stack
        node = todo.pop()
        if isinstance(node, dict):
            if (isinstance(node.get("pattern"), str) or isinstance(node.get("patternProperties"), dict)
                    or node.get("uniqueItems") is True):
                return {"type": "object"}
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return schema


def _schema_checked(schema: dict[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    import jsonschema  # here: the guard reads helpbot.toml through this module, also in the Lambda relay's package

    checker = jsonschema.validators.validator_for(schema)
    checker.check_schema(schema)  # as jsonschema.validate does; but only its first error, not best_match of all:
    # 20,000 wrong items under a 50-way anyOf were 1,000,000 errors built (9 s) to name one
    exc = next(checker(schema).iter_errors(dict(arguments)), None)
    if exc is not None:
        raise ArgumentError(f"{'/'.join(map(str, exc.absolute_path)) or 'arguments'}: {exc.message}")
    return dict(arguments)


def remote_platform(entry: ServerEntry, env: Mapping[str, str], log: ServerLog = masked_stderr,
                    masker: Masker = SECRETS) -> Platform:
    """The server as a platform whose tools are listed on first use; one that cannot be reached in time yields no
    tools and its overview says why. Its stderr lines go to ``log``; what it says of its tools (descriptions,
    schemas, why it failed), which the model reads, through ``masker``."""

    def connect(pidfile: Path, errlog: TextIO) -> AbstractAsyncContextManager[Any]:
        from mcp import Client  # on first use: the mcp SDK's import is ~300 modules, none of the check's

        return Client(_transport(entry, env, pidfile, errlog))

    session = ServerSession(entry.name, connect, log=log)  # the calls bound their own time
    platform = Platform(
        name=entry.platform_name, overview=entry.description or f"In-house MCP server {entry.name!r}.",
        scenes=entry.scenes,
        security_rules=[
            f"Only these tools are offered: {', '.join(entry.tools)}",
            "Write tools are offered" if entry.allow_writes else "Read-only: tools that may write are never offered",
        ],
        load_config=lambda _env: entry, make_client=lambda config: config,
        setup=f"helpbot.toml [[mcp_servers]] name = {entry.name!r}",
        load_tools=lambda platform: _list_tools(platform, entry, session, masker), close=session.close,
    )
    platform.check = lambda ctx: _check(platform, entry)
    return platform


def _check(platform: Platform, entry: ServerEntry) -> list[str]:
    """``helpbot doctor``: the server starts and lists every allowlisted tool (writes only if allowed)."""
    offered = set(platform.tools)  # starts the server and lists its tools
    if not offered and "(unavailable" in platform.overview:
        raise ToolError(platform.overview.rsplit("(unavailable", 1)[1].strip(" :)"))
    absent = [name for name in entry.tools if name not in offered]
    if absent:
        raise ToolError(f"helpbot.toml lists {', '.join(absent)} for {entry.name!r}, but the server offers no such "
                        "tool (or it may write and allow_writes is off)")
    return [f"{len(offered)} allowlisted tools listed"]


async def _list_pages(client: Any) -> tuple[list[Any], str]:
    """Every page of ``tools/list`` by ``nextCursor`` (spec 2025-06-18, basic/utilities/pagination), within the
    bounds (a cursor seen before ends it too): the tools, and why the listing was cut short if it was."""
    tools: list[Any] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools[: MAX_LISTED_TOOLS - len(tools)]
        cursor = page.next_cursor
        if cursor is None:
            return tools, ""
        if len(tools) >= MAX_LISTED_TOOLS:
            return tools, f"more than {MAX_LISTED_TOOLS} tools"
        if cursor in seen:
            return tools, "the server repeated a page cursor"
        seen.add(cursor)
    return tools, f"more than {MAX_LIST_PAGES} pages"


def _list_tools(platform: Platform, entry: ServerEntry, session: ServerSession, masker: Masker = SECRETS) -> None:
    """The allowlisted tools, listed once for the run: :attr:`Platform.tools` holds its lock while this runs,
    so concurrent first calls wait for this one listing."""
    try:
        listed, cut_short = session.call(_list_pages, entry.list_timeout_s, entry.list_timeout_s)
    except ConfigError:
        raise
    except Exception as exc:
        why = (f"no tool list within {entry.list_timeout_s:g} s" if isinstance(exc, TimeoutError)
               else keep_start(f"{type(exc).__name__}: {exc}", 300))  # the server's words: in the system prompt
        platform.overview += f" (unavailable: {masker.mask(why)})"
        return

    badly_named, too_large = [], []
    for remote in listed:
        if remote.name not in entry.tools:
            continue
        if not WIRE_NAME.match(f"{entry.platform_name}_{remote.name}"):
            badly_named.append(remote.name)
            continue
        read_only = bool(remote.annotations and remote.annotations.read_only_hint)  # silence counts as writing
        if not read_only and not entry.allow_writes:
            continue
        schema = masker.deep(dict(remote.input_schema))
        if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
            too_large.append(remote.name)
            continue
        platform.tools[remote.name] = Tool(
            platform=entry.platform_name, function=remote.name, fn=_caller(entry, session, remote.name),
            description=keep_start_masked(remote.description or remote.name, MAX_DESCRIPTION_CHARS, masker.mask)[0],
            input_schema=schema,
            validate=functools.partial(_schema_checked, _checked_part(schema)), read_only=read_only)
    if cut_short:
        platform.overview += f" (tool list cut short: {cut_short})"
    missing = [name for name in entry.tools if name not in {remote.name for remote in listed}]
    if missing:
        platform.overview += f" (allowlisted tools the server did not list: {', '.join(map(repr, missing))})"
    if badly_named:
        platform.overview += (f" (skipped tools whose names cannot be used: {', '.join(map(repr, badly_named))}; "
                              "a name must fit [A-Za-z0-9_-], 64 characters with the prefix)")
    if too_large:
        platform.overview += (f" (skipped tools whose input schema is over {MAX_SCHEMA_CHARS} characters: "
                              f"{', '.join(map(repr, too_large))})")


def _caller(entry: ServerEntry, session: ServerSession, tool_name: str) -> Any:
    def call(ctx: ToolContext, **arguments: Any) -> Result:
        try:
            called = session.call(lambda client: client.call_tool(tool_name, arguments), entry.timeout_s,
                                  entry.list_timeout_s)
        except TimeoutError:
            raise ToolError(f"MCP server {entry.name!r} did not answer within {entry.timeout_s:g} s "
                            "(it was stopped; the next call starts it again)") from None
        except Exception as exc:
            raise ToolError(f"MCP server {entry.name!r} failed: {type(exc).__name__}: {exc}") from None
        return from_call_result(f"{entry.platform_name}_{tool_name}", called)  # nested rows: held by apply_limits

    return call


# Credentials by name, besides the variables declared secret: an Actions runtime token, an in-house MCP server's
# ``header_env``, whatever a deployment adds. ``*_FILE`` names a path, not a secret.
_CREDENTIAL_NAME = re.compile(r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY"
                              r"|SIGNING_SECRET|CREDENTIALS?)(?:_[A-Z0-9]+)?$")


def credential_values(env: Mapping[str, str]) -> list[str]:
    """The values of every credential in ``env`` (declared secrets, variables named like one, in-house servers'
    ``header_env``): masked by their exact values in tool results and by helpbot's egress guard."""
    try:
        tokens = {entry.header_env for entry in server_entries(env) if entry.header_env}
    except ConfigError:  # the registry reports a bad helpbot.toml; the rest is still masked
        tokens = set()
    values = []
    for name, value in env.items():
        declared = DECLARED.get(name)
        secret = (declared.secret if declared is not None
                  else name in tokens or (bool(_CREDENTIAL_NAME.search(name)) and not name.endswith("_FILE")))
        if secret and value.strip():
            values.append(value.strip())
    return values
