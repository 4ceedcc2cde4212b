"""The declaration model: schemas derived from signatures, the envelope, limits, errors as values."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from mcp_lib import ArgumentError, Caller, Limits, Platform, Registry, Result, ToolContext, ToolError
from mcp_lib.core import TRUNCATION_MARKER, apply_limits


def make_platform() -> Platform:
    platform = Platform(
        name="demo",
        overview="A platform for tests.",
        scenes=["when testing"],
        security_rules=["read-only"],
        load_config=lambda env: {"token": env["DEMO_TOKEN"]} if env.get("DEMO_TOKEN") else None,
        make_client=lambda config: {"made_with": config["token"]},
    )

    @platform.tool(example="demo:find 在庫 limit=2")
    def find(
        ctx: ToolContext,
        query: Annotated[str, Field(description="What to find.")],
        limit: Annotated[int, Field(description="How many.", ge=1, le=50)] = 5,
        state: Annotated[Literal["open", "closed", "all"], Field(description="Which state.")] = "all",
    ) -> list[dict[str, Any]]:
        """Find things.

        More details for the model."""
        return [{"title": f"{query} {i}", "url": f"https://example.test/{i}", "state": state,
                 "client": ctx.client["made_with"]} for i in range(limit)]

    @platform.tool()
    def get(ctx: ToolContext, thingId: Annotated[int, Field(description="The id.")]) -> dict[str, Any]:
        """Get one thing, with a long body."""
        if thingId == 404:
            raise ToolError("no such thing")
        if thingId == 500:
            raise RuntimeError("boom")
        return {"title": "Thing", "url": "https://example.test/t", "body": "x" * 10_000,
                "secret": "token xoxb-1234567890-abcdefghij"}

    @platform.tool(read_only=False)
    def write(ctx: ToolContext, text: Annotated[str, Field(description="Text.")]) -> dict[str, Any]:
        """Write something (only for testing the read_only flag)."""
        return {"title": text}

    return platform


@pytest.fixture
def registry() -> Registry:
    return Registry(env={"DEMO_TOKEN": "t0ken"}, platforms={"demo": make_platform()})


def test_schema_is_derived_from_the_signature(registry: Registry) -> None:
    tool = registry.find("demo:find")
    schema = tool.input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"] == {"type": "integer", "description": "How many.", "default": 5,
                                             "minimum": 1, "maximum": 50}
    assert schema["properties"]["state"]["enum"] == ["open", "closed", "all"]
    assert schema["additionalProperties"] is False
    assert "ctx" not in schema["properties"]
    assert tool.wire_name == "demo_find" and tool.cli_name == "demo:find"
    assert tool.summary == "Find things."
    assert registry.find("demo_find") is tool


def test_read_only_flag_and_docstring_required() -> None:
    platform = make_platform()
    assert platform.tools["find"].read_only and not platform.tools["write"].read_only
    with pytest.raises(ValueError, match="docstring"):
        platform.tool()(lambda ctx: [])


def test_get_mcp_binds_positional_and_keyword_arguments(registry: Registry) -> None:
    functions = registry.get_mcp("demo").functions
    by_position = functions["find"]("在庫", 2)
    by_keyword = functions["find"](query="在庫", limit=2)
    assert by_position == by_keyword
    assert [i["title"] for i in by_position.items] == ["在庫 0", "在庫 1"]
    assert by_position.items[0]["client"] == "t0ken"  # the client came from make_client(config)
    assert by_position.sources() == [{"url": "https://example.test/0", "title": "在庫 0"},
                                     {"url": "https://example.test/1", "title": "在庫 1"}]


def test_errors_are_values(registry: Registry) -> None:
    get = registry.get_mcp("demo").functions["get"]
    assert get(404) == Result.error("demo_get", "no such thing")
    crashed = get(500)
    assert crashed.is_error and "RuntimeError: boom" in (crashed.message or "")
    invalid = get("not a number")
    assert invalid.is_error and "thingId" in (invalid.message or "")
    assert registry.call("demo_nope", {}).is_error
    assert registry.call("other:thing", {}).is_error


def test_validate_coerces_and_rejects(registry: Registry) -> None:
    tool = registry.find("demo:find")
    assert tool.validate({"query": "x", "limit": "3"})["limit"] == 3
    with pytest.raises(ArgumentError, match="state"):
        tool.validate({"query": "x", "state": "pending"})
    with pytest.raises(ArgumentError, match="extra"):
        tool.validate({"query": "x", "bogus": 1})


def test_results_are_cut_with_a_marker_and_redacted(registry: Registry) -> None:
    result = registry.get_mcp("demo").functions["get"](1)
    body = result.item["body"]  # type: ignore[index]
    assert len(body) < 2000 and body.endswith(TRUNCATION_MARKER.format(n=10_000 - Limits().max_field_chars))
    assert "xoxb" not in result.to_json() and "[REDACTED]" in result.item["secret"]  # type: ignore[index]
    assert any("cut" in note for note in result.notes)


def test_limits_bound_the_whole_result() -> None:
    many = Result(tool="t", items=[{"title": str(i), "url": f"u{i}", "text": "y" * 1000} for i in range(100)])
    limited = apply_limits(many, Limits(max_items=50, max_field_chars=800, max_result_chars=5000))
    assert len(limited.to_json()) <= 5000
    assert 0 < len(limited.items) < 50
    assert any("showing 50 of 100" in n for n in limited.notes)
    assert any("left out" in n for n in limited.notes)


def test_limits_from_env_and_per_registry() -> None:
    limits = Limits.from_env({"HELPBOT_TOOL_MAX_ITEMS": "3"})
    assert limits.max_items == 3
    registry = Registry(env={"DEMO_TOKEN": "x"}, platforms={"demo": make_platform()}, limits=limits)
    assert len(registry.get_mcp("demo").functions["find"]("q", limit=10).items) == 3


def test_platform_enabled_exactly_when_configured() -> None:
    assert not Registry(env={}, platforms={"demo": make_platform()}).is_enabled("demo")
    registry = Registry(env={}, platforms={"demo": make_platform()})
    result = registry.call("demo_find", {"query": "x"})
    assert result.is_error and "not configured" in (result.message or "")
    assert Registry(env={}, platforms={"demo": make_platform()}).tools() == []


def test_injected_client_wins_and_caller_reaches_the_tool() -> None:
    seen: list[Caller] = []
    platform = make_platform()

    @platform.tool()
    def who(ctx: ToolContext) -> list[dict[str, Any]]:
        """Report the caller."""
        seen.append(ctx.caller)
        return []

    caller = Caller(user="U1", answer_channel="C1")
    registry = Registry(env={"DEMO_TOKEN": "x"}, platforms={"demo": platform},
                        clients={"demo": {"made_with": "fake"}}, caller=caller)
    assert registry.call("demo:find", {"query": "q", "limit": 1}).items[0]["client"] == "fake"
    registry.call("demo_who", {})
    assert seen == [caller]


def test_real_registry_always_has_faq() -> None:
    registry = Registry(env={})
    assert [p.name for p in registry.enabled()] == ["faq"]
    assert {t.wire_name for t in registry.tools()} >= {"faq_search", "faq_getEntry"}
    json.dumps([t.input_schema for t in registry.tools(enabled_only=False)])  # every schema is JSON
