"""A real MCP server (the official SDK's low-level ``Server``) serving the enabled platforms' tools with the very
schemas Claude gets. ``Tool.invoke`` validates; a bad call or a failing tool is an ``isError`` result, an
unlisted tool a JSON-RPC ``-32602`` (spec 2025-06-18, server/tools "Error Handling"); images follow as content."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.server import Server
from mcp.server.stdio import stdio_server

from .registry import Registry


def build_server(registry: Registry, only: list[str] | None = None) -> Server[Any]:
    tools = {tool.wire_name: tool for tool in registry.tools(only=only)}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(
            name=tool.wire_name, description=tool.description, input_schema=tool.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=tool.read_only, open_world_hint=tool.platform != "faq"),
        ) for tool in tools.values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name[:100]}")
        result = await anyio.to_thread.run_sync(registry.call, tool.wire_name, params.arguments or {})
        payload = result.to_dict()
        text = types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))
        images = [types.ImageContent(type="image", data=image.data, mime_type=image.media_type)
                  for image in result.images]
        return types.CallToolResult(content=[text, *images], structured_content=payload, is_error=result.is_error)

    return Server("helpbot-mcp-lib", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions="helpbot's read-only tools over the team's FAQ, Slack, Redmine, GitHub and Growi.")


def serve_stdio(registry: Registry, only: list[str] | None = None) -> None:
    server = build_server(registry, only)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
