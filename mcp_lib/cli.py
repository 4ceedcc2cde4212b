"""``mcp-lib``: run one tool, print the docs, write/check ``tools_docs/``, print Claude schemas, serve MCP.

    mcp-lib all-commands
    mcp-lib faq:search "在庫 同期 遅い" limit=3
    mcp-lib docs --write | --check [--dir DIR]
    mcp-lib schemas [--only faq,redmine]
    mcp-lib serve [--only ...]

Arguments of a tool are positional (in the order of its parameters) or ``name=value`` for one of its parameter
names; anything else with ``=`` in it (``"在庫=0になる"``) is an ordinary value.

Exit codes: 0 done; 1 a tool ran but failed (its error result is printed as JSON), or ``docs --check`` found
stale files; 2 bad input -- an unknown tool, command or ``--only`` name, or bad arguments (the problem, then the
tool's usage) -- or bad configuration and rejected credentials (one line naming the variable)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from .core import Tool
from .errors import ArgumentError, BadInput, ConfigError, ExitError, UnknownTool, exit_code
from .registry import Registry

DOCS_DIR = Path(__file__).resolve().parents[1] / "tools_docs"
USAGE = """usage: mcp-lib PLATFORM:FUNCTION [positional ...] [key=value ...]
       mcp-lib all-commands | docs --write|--check [--dir DIR] | schemas [--only NAMES] | serve [--only NAMES]"""

# ASCII digits only: str.isdigit() also accepts "²" and "٣", which int() then refuses. Longer numbers stay text
# and the schema check says what is wrong with them.
_INTEGER = re.compile(r"^-?[0-9]{1,18}$")
_NUMBER = re.compile(r"^-?[0-9]{1,18}(?:\.[0-9]{1,18})?(?:[eE][-+]?[0-9]{1,3})?$")
_PARAMETER_LIKE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")  # a token that starts like ``name=value``


def coerce(value: str, schema: dict[str, Any]) -> Any:
    """A command-line string as the schema's type; pydantic then checks it strictly."""
    kinds = [schema.get("type")] + [s.get("type") for s in schema.get("anyOf", [])]
    if "integer" in kinds and _INTEGER.match(value):
        return int(value)
    if "number" in kinds and _NUMBER.match(value):
        return float(value)
    if "boolean" in kinds and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if ("array" in kinds or "object" in kinds) and value.startswith(("[", "{")):
        return _json(value)
    if "array" in kinds:
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, numbers past the digit limit, deep nesting
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise BadInput(f"{text[:80]!r} is not valid JSON: {reason}") from None


def parse_tool_args(tool: Tool, argv: list[str]) -> dict[str, Any]:
    """Positional values fill the parameters in order; ``name=value`` sets a parameter only when ``name`` is
    one of the tool's parameters (otherwise the whole token is a value: a query may contain ``=``)."""
    params = {p.name: p for p in tool.params}
    arguments: dict[str, Any] = {}
    for token in argv:
        key, sep, value = token.partition("=")
        if sep and key in params:
            name = key
        elif token.startswith("{") and not arguments:
            loaded = _json(token)  # the old library's JSON form: mcp-lib redmine:getIssues '{"subject": "~在庫"}'
            if not isinstance(loaded, dict):
                raise BadInput(f"{token[:80]!r} is not a JSON object of arguments")
            arguments.update(loaded)
            continue
        else:
            unfilled = [n for n in params if n not in arguments]
            if not unfilled:
                raise BadInput(f"too many arguments: {token!r}")
            name, value = unfilled[0], token
        if name in arguments:
            raise BadInput(f"{name} given twice")
        arguments[name] = coerce(value, params[name].schema)
    return arguments


def _values_that_look_like_parameters(tool: Tool, argv: list[str]) -> str:
    """A hint for a mistyped ``name=value``: it was read as a value, and may be why the arguments failed."""
    names = [p.name for p in tool.params]
    odd = [match for token in argv if (match := _PARAMETER_LIKE.match(token)) and match[1] not in names]
    if not odd:
        return ""
    listed = ", ".join(repr(m[1]) for m in odd)
    return (f"\n(note: {tool.cli_name} has no parameter {listed}, so {', '.join(repr(m.string) for m in odd)} was "
            f"read as a value; parameters: {', '.join(names) or '(none)'})")


def run_tool(registry: Registry, name: str, argv: list[str]) -> int:
    try:
        tool = registry.find(name)
    except UnknownTool as exc:
        raise BadInput(f"{exc}\n{USAGE}") from None
    try:
        arguments = tool.validate(parse_tool_args(tool, argv))
    except (ArgumentError, BadInput) as exc:
        usage = [f"usage: {tool.usage}", *(f"  {p.name}: {p.description}" for p in tool.params)]
        usage += [f"example: mcp-lib {tool.example}"] if tool.example else []
        hint = _values_that_look_like_parameters(tool, argv)
        raise BadInput(f"{tool.cli_name}: {exc}{hint}\n" + "\n".join(usage)) from None
    if not registry.is_enabled(tool.platform):
        raise BadInput(f"platform {tool.platform!r} is not configured. {registry.platforms()[tool.platform].setup}")
    result = tool.invoke(registry.context(tool.platform), arguments)
    if result.kind == "credentials":
        raise ConfigError(tool.platform, result.message or "credentials rejected")
    print(result.to_json(indent=2))
    return 1 if result.is_error else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from . import logs

    policy = logs.Masking.from_env(os.environ)  # libraries' logging (the mcp SDK's) masked like our lines
    try:
        with logs.installed(lambda: policy, env=os.environ):
            return _main(argv)
    except (ExitError, KeyboardInterrupt) as exc:  # the one exception -> exit code mapping of mcp-lib
        if not isinstance(exc, KeyboardInterrupt):
            print(f"mcp-lib: {'configuration: ' if isinstance(exc, ConfigError) else ''}{exc}", file=sys.stderr)
        return exit_code(exc)


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if argv else 2
    registry = Registry()
    command, rest = argv[0], argv[1:]
    if ":" in command:
        return run_tool(registry, command, rest)
    if command == "all-commands":
        from .docs import all_commands

        print(all_commands(list(registry.platforms().values())))
        return 0
    parser = argparse.ArgumentParser(prog=f"mcp-lib {command}")
    if command == "docs":
        return _docs(registry, parser, rest)
    if command in ("schemas", "serve"):
        parser.add_argument("--only", help="comma-separated platforms or tool names", default=None)
        args = parser.parse_args(rest)
        try:
            only = registry.resolve_only(args.only.split(",")) if args.only is not None else None
        except UnknownTool as exc:
            raise BadInput(str(exc)) from None
        if command == "schemas":
            from .schemas import claude_tools

            print(json.dumps(claude_tools(registry, only), ensure_ascii=False, indent=2))
        else:
            from .server import serve_stdio

            serve_stdio(registry, only)
        return 0
    raise BadInput(f"unknown command {command!r}\n{USAGE}")


def _docs(registry: Registry, parser: argparse.ArgumentParser, rest: list[str]) -> int:
    from . import docs

    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    parser.add_argument("--dir", type=Path, default=DOCS_DIR)
    args = parser.parse_args(rest)
    platforms = list(registry.builtin_platforms().values())
    try:
        if args.write:
            for name in docs.write(platforms, args.dir):
                print(f"wrote {args.dir / name}")
            return 0
        stale = docs.check(platforms, args.dir)
    except OSError as exc:
        raise BadInput(f"docs: cannot {'write' if args.write else 'read'} {args.dir}: {exc.strerror or exc}") from None
    if stale:
        print(f"mcp-lib: tools_docs is stale ({', '.join(stale)}); run `uv run mcp-lib docs --write`", file=sys.stderr)
        return 1
    print("tools_docs is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
