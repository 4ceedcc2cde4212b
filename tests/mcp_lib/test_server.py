"""The MCP server through real client sessions: in memory and over stdio."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import INVALID_PARAMS

from mcp_lib import Platform, Registry, Result, ToolContext
from mcp_lib.result import Image
from mcp_lib.schemas import claude_tools
from mcp_lib.server import build_server
from tests.fakes.attachments import png

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_lists_the_same_tools_and_schemas_claude_gets() -> None:
    registry = Registry(env={})
    async with Client(build_server(registry)) as client:
        listed = await client.list_tools()
    served = {tool.name: tool.input_schema for tool in listed.tools}
    assert served == {entry["name"]: entry["input_schema"] for entry in claude_tools(registry)}
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in listed.tools)


@pytest.mark.anyio
async def test_calls_a_tool_and_returns_structured_content() -> None:
    async with Client(build_server(Registry(env={}))) as client:
        result = await client.call_tool("faq_search", {"query": "楽天 注文", "limit": 2})
    assert not result.is_error
    payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert payload["status"] == "ok" and payload["items"]
    assert result.structured_content == payload


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "arguments", "expected", "kind"),
    [
        ("faq_search", {}, "query: field required", "arguments"),
        ("faq_search", {"query": "x", "limit": "five"}, "limit: input should be a valid integer", "arguments"),
        ("faq_search", {"query": "x", "extra": 1}, "extra: extra inputs are not permitted", "arguments"),
        ("faq_getEntry", {"id": "no-such-entry"}, "no FAQ entry", "failed"),
    ],
)
async def test_bad_calls_are_is_error_results(name: str, arguments: dict, expected: str, kind: str) -> None:
    """Arguments are checked once, by Tool.invoke, as on every other surface; the kind says it was them."""
    async with Client(build_server(Registry(env={}))) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert expected in text
    assert json.loads(text) == result.structured_content and json.loads(text)["kind"] == kind


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["redmine_getIssue", "no_such_tool"])
async def test_an_unknown_tool_is_a_protocol_error(name: str) -> None:
    """Spec 2025-06-18, server/tools "Error Handling": unknown tools are JSON-RPC errors (-32602), not results.
    redmine is not configured here, so its tools are not listed either."""
    async with Client(build_server(Registry(env={}))) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool(name, {"issueId": 1})
    assert raised.value.code == INVALID_PARAMS and name in raised.value.message


@pytest.mark.scenario
@pytest.mark.anyio
async def test_over_stdio_with_the_real_command() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_lib.cli", "serve"], cwd=str(ROOT),
                                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    async with Client(params) as client:
        listed = await client.list_tools()
        result = await client.call_tool("faq_search", {"query": "CSV 文字化け", "limit": 1})
        with pytest.raises(MCPError) as raised:  # on the wire: a JSON-RPC error response
            await client.call_tool("faq_nothing", {})
    assert "faq_search" in {tool.name for tool in listed.tools}
    assert not result.is_error
    assert raised.value.code == INVALID_PARAMS


@pytest.mark.anyio
async def test_a_results_images_follow_its_json_text() -> None:
    image = Image(media_type="image/png", data=base64.b64encode(png(2, 2)).decode())
    platform = Platform(name="pics", overview="", scenes=[], security_rules=[], load_config=lambda env: {},
                        make_client=lambda config: config)

    @platform.tool()
    def chart(ctx: ToolContext) -> Result:
        """A chart."""
        return Result(item={"title": "chart"}, images=[image])

    async with Client(build_server(Registry(env={}, platforms={"pics": platform}))) as client:
        result = await client.call_tool("pics_chart", {})
    text, shown = result.content
    assert json.loads(text.text)["item"] == {"title": "chart"}  # type: ignore[union-attr]
    assert shown.type == "image" and shown.mime_type == "image/png" and shown.data == image.data
