"""A stdio MCP server (official SDK, low-level ``Server``) as strict as the specification (2025-06-18): its tool
list comes in pages of two, and its tools answer images and the other content types.

- ``tools/list`` is paginated (basic/utilities/pagination): ``nextCursor`` is opaque, a cursor this server did
  not give is JSON-RPC ``-32602`` ("Invalid cursors SHOULD result in an error with code -32602").
- ``tools/call`` of a tool it does not list is JSON-RPC ``-32602`` (server/tools "Error Handling": unknown tools
  are protocol errors); every tool is marked read-only.
- Content (server/tools "Tool Result"): ``image`` with base64 ``data`` and ``mimeType``, ``audio``,
  ``resource_link`` and embedded ``resource`` (text or blob).

``PAGED_SERVER_MODE``: ``repeat`` -- the third page points back at the second (a loop); ``endless`` -- a new
cursor and a new tool on every page, forever. ``PAGED_SERVER_LOG``: a file each ``tools/list`` request is
appended to (its cursor), so a test sees how often the server was asked.
"""

from __future__ import annotations

import base64
import os
import struct
import zlib
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.server import Server
from mcp.server.stdio import stdio_server

MODE = os.environ.get("PAGED_SERVER_MODE", "")
LOG = os.environ.get("PAGED_SERVER_LOG", "")
PAGE = 2
NAMES = ["echo", "chart", "mixed", "bad_images", "many_images", "big_images", "last_page_tool"]  # 4 pages


def png(width: int, height: int) -> bytes:
    """A real (tiny, grey) PNG of the given size (as tests/agent/slack/test_attachments.py makes them; not imported
    from there: this server starts in a few hundred milliseconds without the agent's modules)."""
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def image(data: bytes, mime: str = "image/png") -> types.ImageContent:
    return types.ImageContent(type="image", data=b64(data), mime_type=mime)


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def contents(name: str) -> list[Any]:
    if name == "echo":
        return [text('{"echo": "hello"}')]
    if name == "chart":
        return [text("sales by month"), image(png(3, 2))]
    if name == "mixed":
        return [
            text("mixed content"),
            image(png(4, 4)),
            types.AudioContent(type="audio", data=b64(b"RIFF\x00\x00\x00\x00WAVE"), mime_type="audio/wav"),
            types.ResourceLink(type="resource_link", uri="file:///reports/q1.pdf", name="q1.pdf"),
            types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                uri="file:///notes/readme.txt", mime_type="text/plain", text="embedded notes")),
            types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
                uri="file:///data/blob.bin", mime_type="application/octet-stream", blob=b64(b"\x00\x01"))),
        ]
    if name == "bad_images":
        return [
            image(b"BM" + b"\x00" * 60, "image/bmp"),  # a bitmap: no media type the model takes
            image(b"not an image at all, though it says png"),
            image(png(9000, 2)),  # wider than 8000 px
            types.ImageContent(type="image", data="%%% not base64 %%%", mime_type="image/png"),
            image(png(2, 2), "image/jpeg"),  # declared JPEG, really PNG: shown as what it is
        ]
    if name == "many_images":
        return [image(png(n, n)) for n in range(1, 6)]
    if name == "big_images":  # two images of 2.5 MB each: over one result's bytes together
        return [image(png(2, 2) + b"\x00" * 2_500_000), image(png(3, 3) + b"\x00" * 2_500_000)]
    return [text(f"{name} answered")]


def tool(name: str) -> types.Tool:
    return types.Tool(name=name, description=f"the {name} tool", input_schema={"type": "object", "properties": {}},
                      annotations=types.ToolAnnotations(read_only_hint=True))


def cursor_of(page: int) -> str:
    return b64(f"page-{page}".encode())


def page_of(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        decoded = base64.b64decode(cursor, validate=True).decode()
    except ValueError:
        decoded = ""
    if not decoded.startswith("page-") or not decoded[5:].isdigit():
        raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
    return int(decoded[5:])


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    cursor = params.cursor if params is not None else None
    if LOG:
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(f"{cursor}\n")
    page = page_of(cursor)
    if MODE == "endless":
        return types.ListToolsResult(tools=[tool(f"endless_{page}")], next_cursor=cursor_of(page + 1))
    names = NAMES[page * PAGE:(page + 1) * PAGE]
    if not names:
        raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
    last = (page + 1) * PAGE >= len(NAMES)
    following = None if last else cursor_of(1 if MODE == "repeat" and page == 2 else page + 1)
    return types.ListToolsResult(tools=[tool(name) for name in names], next_cursor=following)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in NAMES:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    return types.CallToolResult(content=contents(params.name))


server = Server("paged", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
