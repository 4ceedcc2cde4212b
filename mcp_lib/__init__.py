"""mcp_lib: tools declared once per platform and served to the CLI, docs, Claude and MCP.

The public names below are imported on first use, so a submodule (``mcp_lib.config``) imports alone."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import ArgumentError, Caller, Limits, Platform, Result, Tool, ToolContext, ToolError
    from .registry import Registry, default_registry, get_mcp

_WHERE = {
    **dict.fromkeys(("ArgumentError", "Caller", "Limits", "Platform", "Result", "Tool", "ToolContext", "ToolError"),
                    "mcp_lib.core"),
    **dict.fromkeys(("Registry", "default_registry", "get_mcp"), "mcp_lib.registry"),
}
__all__ = ["ArgumentError", "Caller", "Limits", "Platform", "Registry", "Result", "Tool", "ToolContext", "ToolError",
           "default_registry", "get_mcp"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'mcp_lib' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
