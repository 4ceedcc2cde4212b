"""Claude tool schemas, derived from the same declarations as the CLI, the docs and the MCP server."""

from __future__ import annotations

from typing import Any

from .core import Tool
from .registry import Registry


def claude_tool(tool: Tool) -> dict[str, Any]:
    example = f"\n\nExample (CLI form): mcp-lib {tool.example}" if tool.example else ""
    return {"name": tool.wire_name, "description": tool.description + example, "input_schema": tool.input_schema}


def claude_tools(registry: Registry, only: list[str] | None = None) -> list[dict[str, Any]]:
    """Tool entries for the Messages API ``tools=`` parameter: the enabled platforms, or a chosen subset."""
    return [claude_tool(tool) for tool in registry.tools(only=only)]


def platform_guide(registry: Registry) -> str:
    """Each enabled platform's overview, usage scenes and security rules: the tool part of the system prompt."""
    parts = []
    for p in registry.enabled():
        lines = [f"## {p.name}", p.overview, "使用場面 (when to use):", *(f"- {scene}" for scene in p.scenes),
                 "セキュリティルール (enforced):", *(f"- {rule}" for rule in p.security_rules)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
