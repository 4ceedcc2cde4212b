"""mcp_lib: helpbot's tools, declared once per platform and served to the CLI, docs, Claude and MCP."""

from .core import ArgumentError, Caller, Limits, Platform, Result, Tool, ToolContext, ToolError
from .registry import Registry, default_registry, get_mcp

__all__ = [
    "ArgumentError",
    "Caller",
    "Limits",
    "Platform",
    "Registry",
    "Result",
    "Tool",
    "ToolContext",
    "ToolError",
    "default_registry",
    "get_mcp",
]
