"""The declaration model: schemas derived from signatures, the envelope, limits, errors as values."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import pytest
from mcp import types
from pydantic import Field

from mcp_lib import ArgumentError, Caller, Limits, Platform, Registry, Result, ToolContext, ToolError
from mcp_lib.cutting import TRUNCATION_MARKER, keep_start_masked
from mcp_lib.result import MAX_MESSAGE_CHARS, apply_limits, from_call_result
from tests.fakes.clock import FakeClock


def make_platform() -> Platform:
    platform = Platform(
        name="demo",
        overview="A platform for tests.",
        scenes=["when testing"],
        security_rules=["read-only"],
        load_config=lambda env: {"token": env["DEMO_SITE"]} if env.get("DEMO_SITE") else None,
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
    return Registry(env={"DEMO_SITE": "t0ken"}, platforms={"demo": make_platform()})


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
    assert registry.find("demo_find") is tool


def test_read_only_flag_and_docstring_required() -> None:
    platform = make_platform()
    assert platform.tools["find"].read_only and not platform.tools["write"].read_only
    def undocumented(ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    with pytest.raises(ValueError, match="docstring"):
        platform.tool()(undocumented)


def test_the_context_parameter_is_found_by_its_annotation_not_its_position() -> None:
    platform = make_platform()

    @platform.tool()
    def late(query: Annotated[str, Field(description="What.")], context: ToolContext,
             limit: Annotated[int, Field(description="How many.")] = 1) -> dict[str, Any]:
        """A tool whose context is not its first parameter."""
        return {"title": f"{query} {limit} {context.client['made_with']}"}

    tool = platform.tools["late"]
    assert list(tool.input_schema["properties"]) == ["query", "limit"] and tool.input_schema["required"] == ["query"]
    registry = Registry(env={"DEMO_SITE": "t0ken"}, platforms={"demo": platform})
    assert registry.get_mcp("demo").functions["late"]("在庫", 3).item == {"title": "在庫 3 t0ken"}


def test_a_tool_without_a_context_parameter_is_refused_when_declared() -> None:
    platform = make_platform()

    def no_context(query: Annotated[str, Field(description="What.")]) -> dict[str, Any]:
        """Looks like a tool, but would lose its first argument to the injected context."""
        return {"title": query}

    with pytest.raises(TypeError, match="no parameter annotated ToolContext"):
        platform.tool()(no_context)
    assert "no_context" not in platform.tools


def test_get_mcp_binds_positional_and_keyword_arguments(registry: Registry) -> None:
    functions = registry.get_mcp("demo").functions
    by_position = functions["find"]("在庫", 2)
    by_keyword = functions["find"](query="在庫", limit=2)
    assert by_position == by_keyword
    assert [i["title"] for i in by_position.items] == ["在庫 0", "在庫 1"]
    assert by_position.items[0]["client"] == "t0ken"  # the client came from make_client(config)
    assert [i["url"] for i in by_position.items] == ["https://example.test/0", "https://example.test/1"]


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
    registry = Registry(env={"DEMO_SITE": "x"}, platforms={"demo": make_platform()}, limits=limits)
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

    caller = Caller(answer_channel="C1")
    registry = Registry(env={"DEMO_SITE": "x"}, platforms={"demo": platform},
                        clients={"demo": {"made_with": "fake"}}, caller=caller)
    assert registry.call("demo:find", {"query": "q", "limit": 1}).items[0]["client"] == "fake"
    registry.call("demo_who", {})
    assert seen == [caller]


def test_real_registry_always_has_faq() -> None:
    registry = Registry(env={})
    assert [p.name for p in registry.enabled()] == ["faq"]
    assert {t.wire_name for t in registry.tools()} >= {"faq_search", "faq_getEntry"}
    json.dumps([t.input_schema for p in registry.platforms().values() for t in p.tools.values()])  # all JSON


# -- limits on nested payloads: the size cap really holds --------------------------------------------------------
def nested_result(files: int, patch: int, comments: int = 0) -> Result:
    return Result(tool="t", item={
        "title": "Rename every module " + "T" * 300, "url": "https://example.test/pull/1?" + "q" * 400,
        "issueId": 7, "body": "b" * 20_000,
        "files": [{"filename": f"src/{n:03d}/" + "long_name_" * 8 + ".py", "patch": "+" * patch,
                   "url": f"https://example.test/f/{n}"} for n in range(files)],
        "comments": [{"author": "a", "body": "c" * 3000, "reactions": list(range(50))} for _ in range(comments)],
    })


@pytest.mark.parametrize(("files", "patch", "comments"), [(100, 1500, 0), (500, 10, 0), (3, 50_000, 40),
                                                          (0, 0, 200), (30, 3000, 30)])
@pytest.mark.parametrize("cap", [1000, 5000, 16000])
def test_the_size_cap_holds_for_nested_payloads(files: int, patch: int, comments: int, cap: int) -> None:
    original = nested_result(files, patch, comments)
    assert original.item is not None
    limited = apply_limits(original, Limits(max_result_chars=cap))
    assert len(limited.to_json()) <= cap
    assert limited.notes
    if limited.item is not None:  # what identifies the item is never cut
        assert limited.item["url"] == original.item["url"] and limited.item["title"] == original.item["title"]
        assert limited.item["issueId"] == 7
        names = {f["filename"] for f in original.item["files"]}
        assert all(f["filename"] in names for f in limited.item.get("files", []))


def test_nested_lists_are_trimmed_with_a_note_naming_where() -> None:
    limited = apply_limits(nested_result(files=30, patch=10, comments=0), Limits(max_items=5))
    assert limited.item is not None and len(limited.item["files"]) == 5
    assert "showing 5 of 30 entries at item.files" in limited.notes
    many = Result(tool="t", items=[{"title": f"t{i}", "url": f"u{i}", "labels": list(range(i * 4))}
                                   for i in range(3)])
    trimmed = apply_limits(many, Limits(max_items=5))
    assert [len(i["labels"]) for i in trimmed.items] == [0, 4, 5]
    assert "lists at items[].labels cut to 5 entries (the longest had 8)" in trimmed.notes


def test_a_deep_nest_of_long_keys_costs_memory_linear_in_its_size() -> None:
    """An in-house server's item nested 300 deep, each key 2000 characters (600 kB): the path a note would name
    was built whole at every level (90 MB held at once, quadratic); held to a note's length, a few MB."""
    import tracemalloc

    item: Any = "leaf"
    for depth in range(300):
        item = {f"k{depth}" + "x" * 2000: item}
    tracemalloc.start()
    try:
        limited = apply_limits(Result(tool="t", item=item), Limits())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert limited.notes and peak < 20_000_000


def test_markers_count_what_was_left_of_the_original_and_the_note_names_the_final_limit() -> None:
    original = Result(tool="t", item={"title": "x", "url": "u", "body": "a" * 50_000})
    limited = apply_limits(original, Limits(max_field_chars=4000, max_result_chars=2000))
    body = limited.item["body"]  # type: ignore[index]
    kept = body.split("…[truncated:")[0]
    assert body == kept + TRUNCATION_MARKER.format(n=50_000 - len(kept))
    assert body.count("truncated") == 1
    assert f"long fields cut to {len(kept)} characters" in limited.notes
    assert len(limited.to_json()) <= 2000


def test_a_platform_cut_and_a_limit_cut_make_one_marker_with_the_full_count() -> None:
    text, cut = keep_start_masked("z" * 10_000, 6000)  # the platform's own cut
    assert cut
    limited = apply_limits(Result(tool="t", item={"body": text}), Limits(max_field_chars=1500))
    assert limited.item == {"body": "z" * 1500 + TRUNCATION_MARKER.format(n=8500)}


def test_url_title_and_ids_are_never_cut() -> None:
    long_url = "https://example.test/" + "p" * 5000
    item = {"url": long_url, "title": "T" * 3000, "pageId": "i" * 2000, "channel_id": "C" * 2000,
            "path": "/" + "d/" * 1000, "text": "t" * 5000}
    limited = apply_limits(Result(tool="t", items=[item]), Limits(max_field_chars=100, max_result_chars=20_000))
    assert {k: v for k, v in limited.items[0].items() if k != "text"} == {k: v for k, v in item.items()
                                                                          if k != "text"}
    assert len(limited.items[0]["text"]) < 200


# -- masking before cutting ----------------------------------------------------------------------------------------
GITHUB_SECRET = "ghp_" + "A1b2C3d4E5" * 3 + "xyz123"


def test_a_secret_across_the_field_limit_is_masked_whole() -> None:
    platform = make_platform()

    @platform.tool()
    def leak(ctx: ToolContext) -> dict[str, Any]:
        """Return a body with a token right at the field limit."""
        return {"title": "t", "url": "u", "body": "x" * (1500 - 10) + GITHUB_SECRET + " tail"}

    result = Registry(env={"DEMO_SITE": "x"}, platforms={"demo": platform}).call("demo_leak", {})
    assert result.status == "ok" and "ghp_" not in result.to_json() and "A1b2" not in result.to_json()


def test_a_results_keys_are_masked_as_its_text_is() -> None:
    """A peer's JSON may key rows by their text (a grouped query's ``{"<row>": count}``): the model reads a secret
    or a held credential in a key no more than in a value."""
    platform = make_platform()

    @platform.tool()
    def grouped(ctx: ToolContext) -> dict[str, Any]:
        """Rows keyed by their text."""
        return {"title": "t", "url": "u", "counts": {GITHUB_SECRET: 1, "key k9zHeldValue": 2, "plain": 3}}

    registry = Registry(env={"DEMO_SITE": "x", "SALES_API_KEY": "k9zHeldValue"}, platforms={"demo": platform})
    result = registry.call("demo_grouped", {})
    shown = result.to_json()
    assert result.status == "ok" and "A1b2" not in shown and "k9zHeldValue" not in shown and '"plain": 3' in shown


# -- invoke never raises -------------------------------------------------------------------------------------------
def test_invoke_never_raises_and_makes_results_json_safe() -> None:
    platform = make_platform()

    @platform.tool()
    def dated(ctx: ToolContext) -> list[dict[str, Any]]:
        """Items with values JSON does not know."""
        return [{"title": "t", "url": "u", "when": datetime(2025, 5, 15, 10, 0, tzinfo=UTC),
                 "tags": {"only-one"}}]

    @platform.tool()
    def circular(ctx: ToolContext) -> dict[str, Any]:
        """An item that cannot be serialised at all."""
        loop: dict[str, Any] = {"title": "t"}
        loop["self"] = loop
        return loop

    @platform.tool()
    def noisy(ctx: ToolContext) -> dict[str, Any]:
        """An exception with a whole page (and a token) in it."""
        raise RuntimeError("<html>" + "error page " * 2000 + f" token={GITHUB_SECRET}</html>")

    registry = Registry(env={"DEMO_SITE": "x"}, platforms={"demo": platform})
    dated_result = registry.call("demo_dated", {})
    assert dated_result.status == "ok" and dated_result.items[0]["when"] == "2025-05-15 10:00:00+00:00"
    assert dated_result.items[0]["tags"] == "{'only-one'}"
    json.loads(dated_result.to_json())
    broken = registry.call("demo_circular", {})
    assert broken.is_error and "ValueError" in (broken.message or "")
    noisy_result = registry.call("demo_noisy", {})
    assert noisy_result.is_error and len(noisy_result.message or "") <= MAX_MESSAGE_CHARS + 60
    assert "ghp_" not in noisy_result.to_json() and "truncated" in (noisy_result.message or "")


# -- explicit environment limits cap a tool's own ----------------------------------------------------------------
def test_an_explicit_env_limit_caps_the_tools_declared_limit() -> None:
    platform = make_platform()

    @platform.tool(max_field_chars=20_000, max_items=200)
    def big(ctx: ToolContext) -> list[dict[str, Any]]:
        """Many items with long bodies."""
        return [{"title": str(i), "url": f"u{i}", "body": "b" * 10_000} for i in range(300)]

    def run(env: dict[str, str]) -> Result:
        return Registry(env={"DEMO_SITE": "x", "HELPBOT_TOOL_MAX_RESULT_CHARS": "10000000", **env},
                        platforms={"demo": platform}).call("demo_big", {})

    assert len(run({}).items) == 200 and len(run({}).items[0]["body"]) == 10_000  # the tool's own limits
    capped = run({"HELPBOT_TOOL_MAX_FIELD_CHARS": "500", "HELPBOT_TOOL_MAX_ITEMS": "7"})
    assert len(capped.items) == 7 and capped.items[0]["body"].startswith("b" * 500 + "…[truncated")
    looser = run({"HELPBOT_TOOL_MAX_FIELD_CHARS": "50000"})  # a cap, not a raise
    assert len(looser.items[0]["body"]) == 10_000 and len(looser.items) == 200
    limits = Limits.from_env({"HELPBOT_TOOL_MAX_ITEMS": "3"})
    assert limits.merged(max_items=200).max_items == 3 and Limits().merged(max_items=200).max_items == 200


# -- one time budget per call --------------------------------------------------------------------------------------
def test_invoke_gives_each_call_a_deadline_from_the_budget() -> None:
    platform = make_platform()
    seen: list[float | None] = []

    @platform.tool()
    def timed(ctx: ToolContext) -> list[dict[str, Any]]:
        """Report the deadline."""
        seen.append(ctx.deadline)
        return []

    clock = FakeClock(start=1000.0)
    registry = Registry(env={"DEMO_SITE": "x", "HELPBOT_TOOL_BUDGET_S": "12"}, platforms={"demo": platform},
                        clock=clock)
    registry.call("demo_timed", {})
    clock.advance(1000.0)
    registry.call("demo_timed", {})
    assert seen == [1012.0, 2012.0]  # a fresh deadline per call, not one carried over
    assert Registry(env={}).limits.budget_s == 45.0


# -- lazily loaded tools ---------------------------------------------------------------------------------------------
def test_a_platform_loads_its_tools_only_when_they_are_used() -> None:
    loads: list[str] = []

    def load(platform: Platform) -> None:
        loads.append(platform.name)
        platform.tools.update(make_platform().tools)

    lazy = Platform(name="lazy", overview="o", scenes=[], security_rules=[], load_config=lambda env: {"token": "t"},
                    make_client=lambda config: {"made_with": "t"}, load_tools=load)
    registry = Registry(env={"DEMO_SITE": "x"}, platforms={"demo": make_platform(), "lazy": lazy})
    assert registry.call("demo_find", {"query": "q"}).status == "ok"
    assert registry.is_enabled("lazy") and loads == []
    assert registry.find("lazy_find").wire_name == "demo_find"  # the borrowed declarations keep their name
    registry.tools()
    assert loads == ["lazy"]


def test_a_result_of_many_items_is_masked_only_as_far_as_it_is_shown() -> None:
    platform = Platform(name="t", overview="t", scenes=[], security_rules=[],
                        load_config=lambda env: object(), make_client=lambda config: None)

    @platform.tool()
    def rows(ctx: ToolContext) -> list[dict[str, Any]]:
        """Many rows, each with a secret."""
        return [{"url": f"https://x.test/{n}", "title": f"row {n}", "text": "a" * 5000 + GITHUB_SECRET}
                for n in range(2000)]

    result = Registry(env={}, platforms={"t": platform}).call("t_rows", {})
    assert result.status == "ok" and 0 < len(result.items) <= Limits().max_items
    assert GITHUB_SECRET not in result.to_json() and len(result.to_json()) <= Limits().max_result_chars


def test_the_json_safe_copy_is_what_json_would_give() -> None:
    from mcp_lib.core import _json_safe

    value = {"a": [1, 2.5, True, None, (3, "x")], 1: "one", None: {"when": datetime(2025, 5, 15, tzinfo=UTC)},
             False: {"set": {"s"}}}
    assert _json_safe(value) == json.loads(json.dumps(value, ensure_ascii=False, default=str))
    shared = ["same"]
    assert _json_safe({"x": shared, "y": shared}) == {"x": ["same"], "y": ["same"]}  # shared is not circular


def test_a_credential_the_registry_holds_is_masked_in_every_result_whatever_its_length() -> None:
    """The model must never read one: it could write it back reversed or hex-encoded, past every mask."""
    registry = Registry(env={"DEMO_SITE": "t0ken", "SALES_API_KEY": "k9z"}, platforms={"demo": make_platform()})
    found = registry.call("demo_find", {"query": "鍵k9zです", "limit": 1})
    assert found.items[0]["title"] == "鍵[REDACTED]です 0"


def test_a_servers_text_nested_deeper_than_json_goes_is_kept_as_text() -> None:
    text = "[" * 100_000 + "]" * 100_000  # a hostile in-house server's reply: text, not a crash
    result = from_call_result("x", types.CallToolResult(content=[types.TextContent(type="text", text=text)]))
    assert result.status == "ok" and result.item == {"text": text}
