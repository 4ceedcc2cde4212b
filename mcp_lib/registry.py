"""The registry: which platforms exist, which are enabled (exactly those configured; FAQ always), and their tools
bound to clients made on first use or handed in (``clients={"slack": fake}``); in-house MCP servers from
helpbot.toml join as platforms. ``get_mcp("faq").functions["search"]("在庫 同期")`` for a script."""

from __future__ import annotations

import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .clock import SYSTEM_CLOCK, Clock
from .config import env_str
from .core import Caller, Limits, Platform, Result, Tool, ToolContext
from .errors import ConfigError, UnknownTool

if TYPE_CHECKING:
    from .sessions import ServerLog

PLATFORM_NAMES = ("faq", "slack", "redmine", "github", "growi")


@dataclass
class BoundPlatform:
    """A platform whose tools are callables: ``functions["getIssue"](1)`` or ``(issueId=1)``."""

    platform: Platform
    functions: dict[str, Callable[..., Result]]


class Registry:
    def __init__(self, env: Mapping[str, str] | None = None, *, clients: Mapping[str, Any] | None = None,
                 caller: Caller | None = None, limits: Limits | None = None, clock: Clock = SYSTEM_CLOCK,
                 platforms: Mapping[str, Platform] | None = None, server_log: ServerLog | None = None):
        self.env = dict(os.environ if env is None else env)
        self.caller = caller or Caller()
        if limits is None:  # masked: the secret patterns and the exact values of the credentials in env
            from .external import credential_values
            from .redact import Masker

            limits = Limits.from_env(self.env, Masker(values=credential_values(self.env)).mask)
        self.limits = limits
        self.clock = clock
        self._clients: dict[str, Any] = dict(clients or {})
        self._configs: dict[str, Any] = {}
        self._platforms = dict(platforms) if platforms is not None else None
        self.server_log = server_log  # in-house stdio servers' stderr lines (None: masked on this stderr)
        self._lock = threading.RLock()  # platforms() under context()'s hold

    def builtin_platforms(self) -> dict[str, Platform]:
        """The platforms declared in this package, enabled or not (``tools_docs/`` describes exactly these)."""
        return {name: importlib.import_module(f"mcp_lib.platforms.{name}").PLATFORM for name in PLATFORM_NAMES}

    def platforms(self) -> dict[str, Platform]:
        """Built-in platforms plus the in-house MCP servers listed in helpbot.toml (not contacted here), built
        once: two first tool calls at the same time must share one server session, not start two."""
        with self._lock:
            if self._platforms is None:
                from .external import credential_values, remote_platform, server_entries
                from .redact import Masker
                from .sessions import stderr_log

                platforms = self.builtin_platforms()
                entries = server_entries(self.env)
                # their stderr (None given: this process's) and what they say of their tools masked for the
                # credentials of env too, as their answers are
                held = credential_values(self.env) if entries else []
                log = self.server_log or stderr_log(Masker(personal=True, cards=True, values=held).mask)
                masker = Masker(values=held)
                for entry in entries:
                    if entry.platform_name in platforms:
                        raise ConfigError("helpbot.toml mcp_servers",
                                          f"name {entry.platform_name!r} is taken by a built-in platform")
                    platforms[entry.platform_name] = remote_platform(entry, self.env, log, masker)
                self._platforms = platforms
            return self._platforms

    def narrowed(self, names: Iterable[str] | None) -> Registry:
        """The same registry (clients, caller, limits) offering only the platforms in ``names`` (None: all)."""
        if names is None:
            return self
        keep = set(names)
        return Registry(self.env, clients=self._clients, caller=self.caller, limits=self.limits, clock=self.clock,
                        platforms={n: p for n, p in self.platforms().items() if n in keep}, server_log=self.server_log)

    def close(self) -> None:
        """The end of the run: what the platforms hold open (in-house MCP servers and their processes) ends."""
        for platform in (self._platforms or {}).values():
            if platform.close is not None:
                platform.close()

    def config(self, name: str) -> Any | None:
        """The platform's configuration, None when not configured; ConfigError when misconfigured."""
        if name not in self._configs:
            self._configs[name] = self.platforms()[name].load_config(self.env)
        return self._configs[name]

    def is_enabled(self, name: str) -> bool:
        return self.config(name) is not None

    def enabled(self) -> list[Platform]:
        return [p for name, p in self.platforms().items() if self.is_enabled(name)]

    def missing(self, tool: Tool) -> list[str]:
        """The variables ``tool`` needs that are unset: the tool is then not offered, and a call says why."""
        return [name for name in tool.needs if env_str(self.env, name) is None]

    def half_configured(self, name: str) -> str | None:
        """Why a platform is off although some of what configures it is set (variable names), or None."""
        platform = self.platforms()[name]
        given = [v for v in platform.variables if env_str(self.env, v) is not None]
        if not given or self.is_enabled(name):
            return None
        unset = [v for v in platform.variables if v not in given]
        return f"{' and '.join(given)} set but {' and '.join(unset)} not: the platform is off"

    def unoffered(self, name: str) -> list[str]:
        """The tools of an enabled platform that are not offered, and why (an MCP server's: once listed)."""
        platform = self.platforms()[name]
        if platform.load_tools is not None or not self.is_enabled(name):
            return []
        return [f"{tool.wire_name} is not offered: {' and '.join(missing)} not set"
                for tool in platform.tools.values() if (missing := self.missing(tool))]

    def warnings(self) -> list[str]:
        """What is configured by half: platforms left off, tools not offered (variable names, never values)."""
        lines = []
        for name in self.platforms():
            if half := self.half_configured(name):
                lines.append(f"{name}: {half}")
            lines += self.unoffered(name)
        return lines

    def context(self, name: str) -> ToolContext:
        config = self.config(name)
        with self._lock:
            if name not in self._clients:
                if config is None:
                    raise UnknownTool(f"platform {name!r} is not configured; see `mcp-lib all-commands`")
                self._clients[name] = self.platforms()[name].make_client(config)
        return ToolContext(client=self._clients[name], config=config, caller=self.caller, limits=self.limits,
                           clock=self.clock)

    def tools(self, only: list[str] | None = None) -> list[Tool]:
        """The offered tools of the enabled platforms; ``only`` picks platforms or tools (``faq``, ``faq_search``)."""
        return [tool for platform in self.enabled() for tool in platform.tools.values()
                if not self.missing(tool)
                and (only is None or platform.name in only or tool.wire_name in only or tool.cli_name in only)]

    def resolve_only(self, names: Iterable[str]) -> list[str]:
        """``--only`` names, stripped, checked against the enabled platforms and tools (UnknownTool: the choices)."""
        known = [name for p in self.enabled() for name in (p.name, *(t.wire_name for t in p.tools.values()))]
        choices = ", ".join(known)
        known += [t.cli_name for t in self.tools()]
        wanted = [name.strip() for name in names if name.strip()]
        if not wanted:
            raise UnknownTool(f"--only names nothing; give platforms or tools (known: {choices})")
        unknown = [name for name in wanted if name not in known]
        if unknown:
            disabled = [name for name in unknown if name in self.platforms()]
            hint = f"; not configured here: {', '.join(disabled)}" if disabled else ""
            raise UnknownTool(f"unknown name in --only: {', '.join(unknown)}{hint} (known: {choices})")
        return wanted

    def find(self, name: str) -> Tool:
        """Look up by wire name (``redmine_getIssue``) or CLI name (``redmine:getIssue``)."""
        platform_name, sep, function = name.replace(":", "_", 1).partition("_")
        if platform_name not in self.platforms():
            raise UnknownTool(f"unknown platform {platform_name!r} (known: {', '.join(self.platforms())})")
        platform = self.platforms()[platform_name]
        if not sep or function not in platform.tools:
            known = ", ".join(t.cli_name for t in platform.tools.values())
            raise UnknownTool(f"unknown tool {name!r} (tools of {platform_name}: {known})")
        return platform.tools[function]

    def call(self, name: str, arguments: Mapping[str, Any]) -> Result:
        """Run one tool by name. Unknown or disabled tools come back as error results, never exceptions."""
        try:
            tool = self.find(name)
            if missing := self.missing(tool):
                return Result.error(name, f"{tool.wire_name} is not offered here: {' and '.join(missing)} not set")
            ctx = self.context(tool.platform)
        except UnknownTool as exc:
            return Result.error(name, str(exc))
        except Exception as exc:  # a client that cannot even be built is still only a failed tool call
            return Result.error(name, f"{type(exc).__name__}: {exc}")
        return tool.invoke(ctx, arguments)

    def get_mcp(self, name: str) -> BoundPlatform:
        platform = self.platforms()[name]

        def bind(tool: Tool) -> Callable[..., Result]:
            def call(*args: Any, **kwargs: Any) -> Result:
                names = [p.name for p in tool.params]
                if len(args) > len(names):
                    return Result.error(tool.wire_name, f"too many positional arguments; parameters: {names}")
                return self.call(tool.wire_name, {**dict(zip(names, args, strict=False)), **kwargs})

            call.__doc__ = tool.description
            return call

        return BoundPlatform(platform, {fname: bind(tool) for fname, tool in platform.tools.items()})


@functools.cache
def default_registry() -> Registry:
    return Registry()


def get_mcp(name: str) -> BoundPlatform:
    """``get_mcp("redmine").functions["getIssue"](57442)``, as users of the old library know it."""
    return default_registry().get_mcp(name)
