"""The MCP server through real client sessions: in memory and over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from mcp_lib import Registry
from mcp_lib.schemas import claude_tools
from mcp_lib.server import build_server

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
    ("name", "arguments", "expected"),
    [
        ("faq_search", {}, "'query' is a required property"),
        ("faq_search", {"query": "x", "limit": "five"}, "limit"),
        ("faq_search", {"query": "x", "extra": 1}, "Additional properties"),
        ("faq_getEntry", {"id": "no-such-entry"}, "no FAQ entry"),
        ("redmine_getIssue", {"issueId": 1}, "unknown tool"),
    ],
)
async def test_bad_calls_are_is_error_results(name: str, arguments: dict, expected: str) -> None:
    async with Client(build_server(Registry(env={}))) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error
    assert expected in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_over_stdio_with_the_real_command() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_lib.cli", "serve"], cwd=str(ROOT),
                                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    async with Client(params) as client:
        listed = await client.list_tools()
        result = await client.call_tool("faq_search", {"query": "CSV 文字化け", "limit": 1})
    assert "faq_search" in {tool.name for tool in listed.tools}
    assert not result.is_error
