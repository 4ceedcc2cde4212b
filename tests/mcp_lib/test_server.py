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
    ("name", "arguments", "expected", "kind"),
    [
        ("faq_search", {}, "query: field required", "arguments"),
        ("faq_search", {"query": "x", "limit": "five"}, "limit: input should be a valid integer", "arguments"),
        ("faq_search", {"query": "x", "extra": 1}, "extra: extra inputs are not permitted", "arguments"),
        ("faq_getEntry", {"id": "no-such-entry"}, "no FAQ entry", "failed"),
        ("redmine_getIssue", {"issueId": 1}, "unknown tool", "failed"),
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
async def test_over_stdio_with_the_real_command() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_lib.cli", "serve"], cwd=str(ROOT),
                                   env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    async with Client(params) as client:
        listed = await client.list_tools()
        result = await client.call_tool("faq_search", {"query": "CSV 文字化け", "limit": 1})
    assert "faq_search" in {tool.name for tool in listed.tools}
    assert not result.is_error
