"""``mcp-lib``: run one tool, print the docs, write/check ``tools_docs/``, print Claude schemas, serve MCP.

    mcp-lib all-commands
    mcp-lib faq:search "在庫 同期 遅い" limit=3
    mcp-lib docs --write | --check
    mcp-lib schemas [--only faq,redmine]
    mcp-lib serve [--only ...]

Bad input (unknown tool, bad arguments, bad configuration) prints one line plus the right usage and exits 2.
A tool that runs but fails prints its error result and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .config import ConfigError
from .core import ArgumentError, Tool
from .registry import Registry, UnknownTool

DOCS_DIR = Path(__file__).resolve().parents[1] / "tools_docs"
USAGE = """usage: mcp-lib PLATFORM:FUNCTION [positional ...] [key=value ...]
       mcp-lib all-commands | docs --write|--check [--dir DIR] | schemas [--only NAMES] | serve [--only NAMES]"""


class BadInput(Exception):
    """Exit 2 with this message."""


def coerce(value: str, schema: dict[str, Any]) -> Any:
    """A command-line string as the schema's type; pydantic then checks it strictly."""
    kinds = [schema.get("type")] + [s.get("type") for s in schema.get("anyOf", [])]
    if "integer" in kinds and value.lstrip("-").isdigit():
        return int(value)
    if "number" in kinds:
        try:
            return float(value)
        except ValueError:
            pass
    if "boolean" in kinds and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if ("array" in kinds or "object" in kinds) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{value!r} is not valid JSON: {exc.msg}") from None
    if "array" in kinds:
        return [part for part in value.split(",") if part]
    return value


def parse_tool_args(tool: Tool, argv: list[str]) -> dict[str, Any]:
    params = {p.name: p for p in tool.params}
    order = list(params)
    arguments: dict[str, Any] = {}
    positional = 0
    for token in argv:
        key, sep, value = token.partition("=")
        if sep and key in params:
            name = key
        elif token.startswith("{") and positional == 0 and not arguments:
            try:  # the old library's JSON form: mcp-lib redmine:getIssues '{"subject": "~在庫"}'
                loaded = json.loads(token)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{token!r} is not valid JSON: {exc.msg}") from None
            arguments.update(loaded)
            continue
        else:
            unfilled = [n for n in order if n not in arguments]
            if sep and key.isidentifier():
                raise BadInput(f"unknown parameter {key!r}; parameters: {', '.join(order) or '(none)'}")
            if not unfilled:
                raise BadInput(f"too many arguments: {token!r}")
            name, value = unfilled[0], token
            positional += 1
        if name in arguments:
            raise BadInput(f"{name} given twice")
        arguments[name] = coerce(value, params[name].schema)
    return arguments


def tool_usage(tool: Tool) -> str:
    args = " ".join(f"<{p.name}>" if p.required else f"[{p.name}=…]" for p in tool.params)
    lines = [f"usage: mcp-lib {tool.cli_name} {args}".rstrip()]
    lines += [f"  {p.name}: {p.description}" for p in tool.params]
    if tool.example:
        lines.append(f"example: mcp-lib {tool.example}")
    return "\n".join(lines)


def run_tool(registry: Registry, name: str, argv: list[str]) -> int:
    try:
        tool = registry.find(name)
    except UnknownTool as exc:
        raise BadInput(f"{exc}\n{USAGE}") from None
    try:
        arguments = tool.validate(parse_tool_args(tool, argv))
    except (ArgumentError, BadInput) as exc:
        raise BadInput(f"{tool.cli_name}: {exc}\n{tool_usage(tool)}") from None
    if not registry.is_enabled(tool.platform):
        setup = registry.platforms()[tool.platform].setup
        raise BadInput(f"platform {tool.platform!r} is not configured. {setup}")
    result = tool.invoke(registry.context(tool.platform), arguments)
    if result.kind == "credentials":
        raise ConfigError(tool.platform, result.message or "credentials rejected")
    print(result.to_json(indent=2))
    return 1 if result.is_error else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except BadInput as exc:
        print(f"mcp-lib: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"mcp-lib: configuration: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


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
    parser.add_argument("--only", help="comma-separated platforms or tool names", default=None)
    if command == "docs":
        from . import docs

        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--write", action="store_true")
        mode.add_argument("--check", action="store_true")
        parser.add_argument("--dir", type=Path, default=DOCS_DIR)
        args = _parse(parser, rest)
        platforms = list(registry.builtin_platforms().values())
        if args.write:
            for name in docs.write(platforms, args.dir):
                print(f"wrote {args.dir / name}")
            return 0
        stale = docs.check(platforms, args.dir)
        if stale:
            print(f"mcp-lib: tools_docs is stale ({', '.join(stale)}); run `uv run mcp-lib docs --write`",
                  file=sys.stderr)
            return 1
        print("tools_docs is up to date")
        return 0
    if command in ("schemas", "serve"):
        args = _parse(parser, rest)
        only = args.only.split(",") if args.only else None
        if command == "schemas":
            from .schemas import claude_tools

            print(json.dumps(claude_tools(registry, only), ensure_ascii=False, indent=2))
            return 0
        from .server import serve_stdio

        serve_stdio(registry, only)
        return 0
    raise BadInput(f"unknown command {command!r}\n{USAGE}")


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its message
        raise SystemExit(2 if exc.code else 0) from None


if __name__ == "__main__":
    sys.exit(main())
