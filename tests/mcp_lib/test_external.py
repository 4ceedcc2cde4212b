"""In-house MCP servers from helpbot.toml, against the real example server in examples/sales_db over stdio."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from mcp_lib import Registry
from mcp_lib.config import ConfigError
from mcp_lib.external import server_entries
from mcp_lib.redact import Masker

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "sales_db" / "server.py"


def write_config(tmp_path: Path, *, tools: list[str], allow_writes: bool = False, extra: str = "") -> dict[str, str]:
    config = tmp_path / "helpbot.toml"
    config.write_text(
        f"""
[[mcp_servers]]
name = "sales"
description = "農園の販売DB"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]
cwd = {json.dumps(str(ROOT))}
env = ["SALES_DB_PATH", "SALES_DB_TODAY"]
tools = {json.dumps(tools)}
allow_writes = {"true" if allow_writes else "false"}
{extra}
""",
        encoding="utf-8",
    )
    return {"HELPBOT_CONFIG": str(config), "SALES_DB_PATH": str(tmp_path / "sales.sqlite3"),
            "SALES_DB_TODAY": "2025-05-15", "SECRET_NOT_PASSED": "x"}


@pytest.mark.scenario
def test_allowlisted_read_tools_join_the_catalog(tmp_path: Path) -> None:
    env = write_config(tmp_path, tools=["get_customers", "get_sales", "add_sale"])
    registry = Registry(env=env)
    names = {tool.wire_name for tool in registry.tools()}
    assert {"sales_get_customers", "sales_get_sales", "faq_search"} <= names
    assert "sales_add_sale" not in names  # a write tool, and allow_writes is false
    schema = registry.find("sales_get_sales").input_schema
    assert "code_customer" in schema["required"]


@pytest.mark.scenario
def test_tools_outside_the_allowlist_are_never_offered(tmp_path: Path) -> None:
    registry = Registry(env=write_config(tmp_path, tools=["get_customers"]))
    assert [t.wire_name for t in registry.tools(only=["sales"])] == ["sales_get_customers"]
    assert registry.call("sales_get_sales", {"code_customer": "0009"}).is_error


@pytest.mark.scenario
def test_writes_only_with_allow_writes(tmp_path: Path) -> None:
    registry = Registry(env=write_config(tmp_path, tools=["get_sales", "add_sale"], allow_writes=True))
    add = registry.find("sales:add_sale")
    assert not add.read_only
    added = registry.call("sales_add_sale", {"code_customer": "0014", "products": "トマト", "price": 500})
    assert not added.is_error, added.message
    assert added.item and added.item["status_code"] == 201
    found = registry.call("sales_get_sales", {"code_customer": "0014", "date_sales_begin_str": "2025-05-15"})
    assert found.item and found.item["data"]["count"] >= 1


@pytest.mark.scenario
def test_status_semantics_come_through_as_values(tmp_path: Path) -> None:
    registry = Registry(env=write_config(tmp_path, tools=["get_sales"]))
    unknown = registry.call("sales_get_sales", {"code_customer": "9999"})
    assert unknown.is_error and "9999" in (unknown.message or "")
    nothing = registry.call("sales_get_sales", {"code_customer": "0010", "date_sales_begin_str": "2025-05-05",
                                                "date_sales_end_str": "2025-05-11"})
    assert not nothing.is_error and nothing.item and nothing.item["data"]["count"] == 0
    invalid = registry.call("sales_get_sales", {"code_sales": 1})
    assert invalid.is_error and "invalid arguments" in (invalid.message or "")


def test_unreachable_server_leaves_an_empty_platform(tmp_path: Path) -> None:
    env = write_config(tmp_path, tools=["get_sales"])
    config = Path(env["HELPBOT_CONFIG"])
    config.write_text(config.read_text().replace(json.dumps(sys.executable), '"/nonexistent/python"'))
    registry = Registry(env=env)
    assert [p.name for p in registry.enabled()][:1] == ["faq"]
    assert registry.tools(only=["sales"]) == []
    assert "unavailable" in registry.platforms()["sales"].overview


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[[mcp_servers]]\nname = "Sales!"\ncommand = "x"\ntools = ["a"]\n', "name"),
        ('[[mcp_servers]]\nname = "s"\ntools = ["a"]\n', "exactly one of"),
        ('[[mcp_servers]]\nname = "s"\ncommand = "x"\nurl = "http://h"\ntools = ["a"]\n', "exactly one of"),
        ('[[mcp_servers]]\nname = "s"\ncommand = "x"\ntools = []\n', "allowlist"),
        ('[[mcp_servers]]\nname = "s"\ncommand = "x"\ntools = ["a"]\nbogus = 1\n', "bogus"),
        ("this is not toml", "TOML"),
    ],
)
def test_bad_config_is_a_config_error(tmp_path: Path, toml: str, expected: str) -> None:
    (tmp_path / "helpbot.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=expected):
        server_entries({"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")})


def test_a_name_taken_by_a_builtin_platform_is_refused(tmp_path: Path) -> None:
    (tmp_path / "helpbot.toml").write_text('[[mcp_servers]]\nname = "faq"\ncommand = "x"\ntools = ["a"]\n')
    with pytest.raises(ConfigError, match="taken"):
        Registry(env={"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")}).platforms()


@pytest.mark.scenario
def test_a_prefix_renames_the_tools_and_nested_rows_are_capped(tmp_path: Path) -> None:
    env = write_config(tmp_path, tools=["get_customers"], extra='prefix = "farm_"')
    registry = Registry(env={**env, "HELPBOT_TOOL_MAX_ITEMS": "3"})
    assert [t.wire_name for t in registry.tools(only=["farm"])] == ["farm_get_customers"]
    listing = registry.call("farm:get_customers", {})
    assert not listing.is_error and listing.item is not None
    assert len(listing.item["data"]["customers"]) == 3
    assert any("showing 3 of" in note for note in listing.notes)


# -- over streamable HTTP, with a header taken from the environment ------------------------------------------------
@contextmanager
def sales_over_http(tmp_path: Path, token: str) -> Iterator[tuple[str, list[str | None]]]:
    """The example server in-process behind a bearer check (an in-house server's usual gate), on a free port."""
    import uvicorn

    from examples.sales_db.server import build_server

    app = build_server(tmp_path / "sales.sqlite3", today=lambda: date(2025, 5, 15)).streamable_http_app()
    seen: list[str | None] = []

    async def gate(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization")
            seen.append(header.decode() if header else None)
            if header != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    sock = socket.create_server(("127.0.0.1", 0))  # bound here and handed over: no free-port race
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(gate, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(600):  # readiness, not timing
            if server.started:
                break
            threading.Event().wait(0.01)
        yield f"http://127.0.0.1:{port}/mcp", seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_streamable_http_server_with_a_header_from_the_environment(tmp_path: Path) -> None:
    with sales_over_http(tmp_path, token="s3cret") as (url, seen):
        config = tmp_path / "helpbot.toml"
        config.write_text(f'[[mcp_servers]]\nname = "sales"\nurl = "{url}"\nheader_env = "SALES_MCP_TOKEN"\n'
                          'tools = ["get_sales"]\n', encoding="utf-8")
        registry = Registry(env={"HELPBOT_CONFIG": str(config), "SALES_MCP_TOKEN": "s3cret"})
        assert [t.wire_name for t in registry.tools(only=["sales"])] == ["sales_get_sales"]
        found = registry.call("sales_get_sales", {"code_customer": "0009", "date_sales_begin_str": "2025-05-05",
                                                  "date_sales_end_str": "2025-05-11"})
        assert not found.is_error and found.item and found.item["data"]["count"] == 1
        assert seen and set(seen) == {"Bearer s3cret"}

        refused = Registry(env={"HELPBOT_CONFIG": str(config), "SALES_MCP_TOKEN": "wrong"})
        assert refused.tools(only=["sales"]) == []
        assert "unavailable" in refused.platforms()["sales"].overview
        with pytest.raises(ConfigError, match="SALES_MCP_TOKEN"):
            Registry(env={"HELPBOT_CONFIG": str(config)}).tools()


@pytest.mark.scenario
def test_mcp_lib_all_commands_lists_the_server_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_lib.cli import main

    for name, value in write_config(tmp_path, tools=["get_customers", "get_sales"]).items():
        monkeypatch.setenv(name, value)
    assert main(["all-commands"]) == 0
    out = capsys.readouterr().out
    assert "# SALES Platform" in out and "sales:get_sales" in out and "sales:add_sale" not in out
    assert "Only these tools are offered: get_customers, get_sales" in out


# -- contacted only when needed, bounded, and named so that clients accept the names ------------------------------
def odd_server(tmp_path: Path, body: str, tools: list[str], extra: str = "") -> dict[str, str]:
    """A small stdio MCP server written for one test (official SDK), and a helpbot.toml naming it."""
    script = tmp_path / "odd_server.py"
    script.write_text(body, encoding="utf-8")
    config = tmp_path / "odd.toml"
    config.write_text(f"[[mcp_servers]]\nname = \"odd\"\ncommand = {json.dumps(sys.executable)}\n"
                      f"args = [{json.dumps(str(script))}]\ntools = {json.dumps(tools)}\n{extra}", encoding="utf-8")
    return {"HELPBOT_CONFIG": str(config)}


ODD_TOOLS = """
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("odd")
read_only = ToolAnnotations(read_only_hint=True)

@server.tool(name="get.rows", annotations=read_only)
def dotted() -> str:
    return "dotted"

@server.tool(name="r" * 70, annotations=read_only)
def long_name() -> str:
    return "long"

@server.tool(name="fine_tool", annotations=read_only)
def fine() -> str:
    return "fine"

server.run("stdio")
"""


@pytest.mark.scenario
def test_tools_whose_wire_names_would_be_invalid_are_skipped_with_a_note(tmp_path: Path) -> None:
    registry = Registry(env=odd_server(tmp_path, ODD_TOOLS, ["get.rows", "r" * 70, "fine_tool"]))
    assert [t.wire_name for t in registry.tools(only=["odd"])] == ["odd_fine_tool"]
    overview = registry.platforms()["odd"].overview
    assert "'get.rows'" in overview and "r" * 70 in overview and "[A-Za-z0-9_-]" in overview
    assert registry.call("odd_fine_tool", {}).item == {"result": "fine"}


@pytest.mark.scenario
def test_a_server_is_not_started_for_other_platforms_tools(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    body = f"open({str(marker)!r}, 'w').close()\n" + ODD_TOOLS
    registry = Registry(env=odd_server(tmp_path, body, ["fine_tool"]))
    assert registry.call("faq_search", {"query": "在庫"}).status == "ok"
    assert registry.find("faq:getEntry").platform == "faq"
    assert registry.is_enabled("odd") and "odd" in registry.platforms()
    assert not marker.exists()  # nothing so far needed the odd server
    assert [t.wire_name for t in registry.tools(only=["odd"])] == ["odd_fine_tool"]
    assert marker.exists()


@pytest.mark.scenario
def test_a_hung_server_costs_at_most_its_listing_timeout(tmp_path: Path) -> None:
    hung = "import time\ntime.sleep(600)\n"  # never answers initialize
    registry = Registry(env=odd_server(tmp_path, hung, ["fine_tool"], extra="list_timeout_s = 0.5\n"))
    assert registry.tools(only=["odd"]) == []
    assert "no tool list within 0.5 s" in registry.platforms()["odd"].overview
    assert {t.wire_name for t in registry.tools()} >= {"faq_search"}  # the rest of the catalog is intact


def test_the_working_directorys_helpbot_toml_is_only_for_the_process_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "helpbot.toml").write_text('[[mcp_servers]]\nname = "faq"\ncommand = "x"\ntools = ["a"]\n',
                                           encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert "faq" in Registry(env={}).platforms()  # an injected environment: the stray file is not read
    assert server_entries({"SOME": "thing"}) == []
    with pytest.raises(ConfigError, match="taken"):
        Registry().platforms()  # the process environment: ./helpbot.toml applies, as documented
    with pytest.raises(ConfigError, match="taken"):
        Registry(env=dict(os.environ)).platforms()  # an unchanged copy of it, as the helpbot CLI passes


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "helpbot.toml"
    path.write_bytes('[[mcp_servers]]\nname = "販売"\n'.encode("shift_jis"))
    with pytest.raises(ConfigError, match="UTF-8"):
        server_entries({"HELPBOT_CONFIG": str(path)})


@pytest.mark.parametrize("setting", ['command = "python"\nenv = ["AWS_SECRET_ACCESS_KEY"]',
                                     'command = "python"\nenv = ["SLACK_SIGNING_SECRET"]',
                                     'url = "https://mcp.example.test/mcp"\nheader_env = "AWS_SECRET_ACCESS_KEY"'])
def test_the_never_sent_secrets_never_reach_an_in_house_server(tmp_path: Path, setting: str) -> None:
    """The README: "An in-house stdio server's environment holds only the variables its env names, and none of the
    credentials above" -- among them SLACK_SIGNING_SECRET and AWS_SECRET_ACCESS_KEY, "never sent": every secret
    mcp_lib/config.py declares is refused, not only those that travel (doors.WHERE), as a child's environment
    variable and as a header to any URL."""
    (tmp_path / "helpbot.toml").write_text(f'[[mcp_servers]]\nname = "sales"\n{setting}\ntools = ["get_sales"]\n',
                                           encoding="utf-8")
    with pytest.raises(ConfigError, match=r"may not be passed to an MCP server"):
        server_entries({"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")})


def _listed_tool(schema: dict[str, Any], description: str = "Find.", masker: Masker | None = None) -> Any:
    """The tool ``_list_tools`` makes of one read-only tool a server lists with ``schema``."""
    from types import SimpleNamespace

    from mcp_lib.core import Platform
    from mcp_lib.external import ServerEntry, _list_tools

    entry = ServerEntry(name="sales", command="sales-server", tools=["find"])
    remote = SimpleNamespace(name="find", description=description, input_schema=schema,
                             annotations=SimpleNamespace(read_only_hint=True))
    session: Any = SimpleNamespace(call=lambda *_: ([remote], ""))
    platform = Platform(name="sales", overview="", scenes=[], security_rules=[], load_config=lambda _: entry,
                        make_client=lambda config: config)
    _list_tools(platform, entry, session, *([masker] if masker else []))
    return platform.tools["find"]


def test_what_a_server_says_of_its_tools_is_masked_as_its_answers_are() -> None:
    """A listed tool's description and schema go into every model request: a secret or a credential helpbot holds
    in them (an in-house server's example, a default) is masked there as in the tool's results."""
    token = "xoxb-1234567890-abcdefghijkl"
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "default k9zHeldValue"}}}
    tool = _listed_tool(schema, description=f"Find. example key {token}", masker=Masker(values=["k9zHeldValue"]))
    shown = json.dumps([tool.description, tool.input_schema])
    assert token not in shown and "k9zHeldValue" not in shown and "[REDACTED]" in tool.description
    assert tool.validate({"q": "x"}) == {"q": "x"}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}},
    {"type": "object", "patternProperties": {"^(a+)+$": {}}, "additionalProperties": False},
    {"type": "object", "$defs": {"q": {"anyOf": [{"pattern": "^(a+)+$"}]}}, "properties": {"q": {"$ref": "#/$defs/q"}}},
])
def test_a_servers_regular_expression_is_never_run_on_the_models_arguments(schema: dict[str, Any]) -> None:
    """``^(a+)+$`` backtracks exponentially in Python's engine, holding the GIL: the model's ``"a" * 40 + "b"``
    (as a value or a key) held the run for hours in the local check. The server checks its own input."""
    tool = _listed_tool(schema)
    for arguments in ({"q": "a" * 5 + "b"}, {"a" * 5 + "b": 1}):
        assert tool.validate(arguments) == arguments  # not evaluated here (it would not match)


def test_unique_items_are_left_to_the_server() -> None:
    """jsonschema's uniqueItems compares items it cannot sort pairwise: the model's 8000 small objects held the run
    a minute (2000: 3 s); the server, which checks its own input, judges them."""
    tool = _listed_tool({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": True}}})
    arguments = {"l": [{"a": 1}, {"a": 1}]}  # not unique: not judged here
    assert tool.validate(arguments) == arguments


def test_many_wrong_items_cost_the_first_error_not_all() -> None:
    """20,000 wrong items under a 50-way anyOf: every error was built (a million) to pick the best one, 9 s."""
    from mcp_lib.errors import ArgumentError

    tool = _listed_tool({"type": "object", "properties": {"l": {"type": "array", "items": {
        "anyOf": [{"type": "string", "maxLength": n} for n in range(1, 51)]}}}})
    with pytest.raises(ArgumentError, match="l/0: 1 is not valid under any of the given schemas"):
        tool.validate({"l": [1] * 20_000})


def test_a_schema_without_regular_expressions_is_still_checked() -> None:
    from mcp_lib.errors import ArgumentError

    tool = _listed_tool({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                         "additionalProperties": False})
    with pytest.raises(ArgumentError, match="'q' is a required property"):
        tool.validate({})
    assert tool.validate({"q": "x"}) == {"q": "x"}


def test_a_listed_tools_description_is_cut_and_a_huge_schema_not_offered() -> None:
    """Both go into every model request of the run: a 5 MB description (or schema) of one allowlisted tool made
    each request too long for the model, ending the run."""
    tool = _listed_tool({"type": "object"}, description="d" * 5_000_000)
    assert len(tool.description) < 4100 and tool.description.startswith("dddd")
    from types import SimpleNamespace

    from mcp_lib.core import Platform
    from mcp_lib.external import ServerEntry, _list_tools

    entry = ServerEntry(name="sales", command="sales-server", tools=["find"])
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    remote = SimpleNamespace(name="find", description="Find.", input_schema=huge,
                             annotations=SimpleNamespace(read_only_hint=True))
    session: Any = SimpleNamespace(call=lambda *_: ([remote], ""))
    platform = Platform(name="sales", overview="", scenes=[], security_rules=[], load_config=lambda _: entry,
                        make_client=lambda config: config)
    _list_tools(platform, entry, session)
    assert platform.tools == {} and "input schema is over" in platform.overview


def test_a_listing_failures_words_are_cut_in_the_overview() -> None:
    from types import SimpleNamespace

    from mcp_lib.core import Platform
    from mcp_lib.external import ServerEntry, _list_tools

    def fails(*_: Any) -> Any:
        raise RuntimeError("the server says " + "x" * 1_000_000)

    entry = ServerEntry(name="sales", command="sales-server", tools=["find"])
    platform = Platform(name="sales", overview="", scenes=[], security_rules=[], load_config=lambda _: entry,
                        make_client=lambda config: config)
    _list_tools(platform, entry, SimpleNamespace(call=fails))  # type: ignore[arg-type]
    assert platform.tools == {} and "unavailable: RuntimeError: the server says" in platform.overview
    assert len(platform.overview) < 500
