"""The example sales-DB MCP server, driven through real MCP client sessions: in memory, over stdio and HTTP.

The fixed "today" is the article's, 2025-05-15 (Thursday): 先週 is 2025-05-05..2025-05-11, 先週火曜日 is
2025-05-06, 今月 is May.
"""

import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from examples.sales_db import store
from examples.sales_db.server import build_server, main, settings_from_env

SERVER_SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "sales_db" / "server.py"
TODAY = date(2025, 5, 15)
LAST_WEEK = {"date_sales_begin_str": "2025-05-05", "date_sales_end_str": "2025-05-11"}
THIS_MONTH = {"date_sales_begin_str": "2025-05-01", "date_sales_end_str": "2025-05-31"}
# The article: 顧客コード0016のお客様に、先週火曜日、かぼちゃ4個を600円で売った。
TUESDAY_SALE = {"code_customer": "0016", "products": "かぼちゃ4個", "price": 600, "date_sales_str": "2025-05-06"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with Client(build_server(tmp_path / "sales.sqlite3", lambda: TODAY)) as connected:
        yield connected


def envelope(result: CallToolResult) -> dict[str, Any]:
    """The JSON text a model reads; structuredContent must say the same."""
    assert len(result.content) == 1
    text = result.content[0]
    assert text.type == "text"
    payload: dict[str, Any] = json.loads(text.text)
    assert result.structured_content == payload
    return payload


def sale_count(db_path: Path) -> int:
    with sqlite3.connect(db_path) as conn:
        count: int = conn.execute("SELECT count(*) FROM sales").fetchone()[0]
    return count


# -- list_tools --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_lists_the_three_tools_with_annotations_that_mark_the_write(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"get_customers", "get_sales", "add_sale"}

    for name in ("get_customers", "get_sales"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is True
    write = tools["add_sale"].annotations
    assert write is not None
    assert write.read_only_hint is False
    assert write.destructive_hint is False

    schemas = {name: tool.input_schema for name, tool in tools.items()}
    assert set(schemas["get_customers"]["properties"]) == {"code_customer", "name_str_customer"}
    assert not schemas["get_customers"].get("required")
    assert set(schemas["get_sales"]["properties"]) == {
        "code_customer",
        "code_sales",
        "date_sales_begin_str",
        "date_sales_end_str",
    }
    assert schemas["get_sales"]["required"] == ["code_customer"]
    assert set(schemas["add_sale"]["properties"]) == {"code_customer", "products", "price", "date_sales_str"}
    assert set(schemas["add_sale"]["required"]) == {"code_customer", "products", "price"}
    assert schemas["add_sale"]["properties"]["price"]["type"] == "integer"
    assert "販売データの登録" in (tools["add_sale"].description or "")
    assert "YYYY-MM-DD" in schemas["get_sales"]["properties"]["date_sales_begin_str"]["description"]


# -- get_customers -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_customers_matches_part_of_the_name(client: Client) -> None:
    payload = envelope(await client.call_tool("get_customers", {"name_str_customer": "佐藤"}))
    assert payload["status"] == "success" and payload["status_code"] == 200
    assert [c["name_customer"] for c in payload["data"]["customers"]] == ["佐藤太郎", "佐藤次郎"]
    assert payload["data"]["count"] == 2
    assert payload["data"]["customers"][1]["tel"] == "075-666-7777"


@pytest.mark.anyio
async def test_get_customers_matches_the_code_exactly(client: Client) -> None:
    found = envelope(await client.call_tool("get_customers", {"code_customer": "0003"}))
    assert [c["name_customer"] for c in found["data"]["customers"]] == ["山田花子"]

    partial_code = await client.call_tool("get_customers", {"code_customer": "000"})
    assert not partial_code.is_error
    assert envelope(partial_code)["data"] == {"customers": [], "count": 0}


# -- get_sales: 404 / 204 / 200 ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_sales_for_an_unknown_customer_is_a_404_error(client: Client) -> None:
    result = await client.call_tool("get_sales", {"code_customer": "9999"})
    assert result.is_error is True
    payload = envelope(result)
    assert payload["status"] == "error" and payload["status_code"] == 404
    assert "9999" in payload["data"]["error"] and "存在しません" in payload["data"]["error"]


@pytest.mark.anyio
async def test_get_sales_without_matches_is_a_204_success_with_count_0(client: Client) -> None:
    # The article: 顧客コード0010 has no sales 先週, though it has sales before and after that week.
    result = await client.call_tool("get_sales", {"code_customer": "0010", **LAST_WEEK})
    assert not result.is_error
    payload = envelope(result)
    assert payload["status"] == "success" and payload["status_code"] == 204
    assert payload["data"] == {"sales": [], "count": 0}
    everything = envelope(await client.call_tool("get_sales", {"code_customer": "0010"}))
    assert everything["data"]["count"] == 2


@pytest.mark.anyio
async def test_get_sales_with_matches_is_200_with_rows_and_count(client: Client) -> None:
    payload = envelope(await client.call_tool("get_sales", {"code_customer": "0009", **LAST_WEEK}))
    assert payload["status_code"] == 200
    assert payload["data"]["count"] == 1
    (sale,) = payload["data"]["sales"]
    assert sale["date_sales"] == "2025-05-10"
    assert sale["name_customer"] == "佐藤次郎"
    assert (sale["products"], sale["price"]) == ("キュウリ15本", 1050)


@pytest.mark.anyio
async def test_get_sales_range_includes_both_ends(client: Client) -> None:
    # The article's 先月と今月: John Smith's four sales total 2,180 yen.
    payload = envelope(
        await client.call_tool(
            "get_sales",
            {"code_customer": "0002", "date_sales_begin_str": "2025-04-19", "date_sales_end_str": "2025-05-07"},
        )
    )
    sales = payload["data"]["sales"]
    assert [s["date_sales"] for s in sales] == ["2025-04-19", "2025-04-22", "2025-05-02", "2025-05-07"]
    assert sum(s["price"] for s in sales) == 2180


@pytest.mark.anyio
async def test_get_sales_by_sale_number(client: Client) -> None:
    everything = envelope(await client.call_tool("get_sales", {"code_customer": "0002"}))
    wanted = everything["data"]["sales"][1]
    one = envelope(await client.call_tool("get_sales", {"code_customer": "0002", "code_sales": wanted["code_sales"]}))
    assert one["data"]["sales"] == [wanted]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [
        {"date_sales_begin_str": "2025/05/05"},
        {"date_sales_end_str": "2025-13-01"},
        {"date_sales_begin_str": "先週"},
        {"date_sales_begin_str": "2025-05-11", "date_sales_end_str": "2025-05-05"},
    ],
)
async def test_get_sales_with_a_bad_date_is_an_error(client: Client, arguments: dict[str, str]) -> None:
    result = await client.call_tool("get_sales", {"code_customer": "0009", **arguments})
    assert result.is_error is True
    payload = envelope(result)
    assert payload["status_code"] == 400
    assert "販売日期間" in payload["data"]["error"]


# -- add_sale: 201 ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_conditional_chain_no_sales_this_month_then_add_sale_defaults_to_today(client: Client) -> None:
    # The article: 顧客コード0014の今月の販売件数がまだ0件の場合、ナス20個を1800円で販売登録。
    before = envelope(await client.call_tool("get_sales", {"code_customer": "0014", **THIS_MONTH}))
    assert before["status_code"] == 204 and before["data"]["count"] == 0

    added = await client.call_tool("add_sale", {"code_customer": "0014", "products": "ナス20個", "price": 1800})
    assert not added.is_error
    payload = envelope(added)
    assert payload["status"] == "success" and payload["status_code"] == 201
    row = payload["data"]["sales_registered"]
    assert row["date_sales"] == TODAY.isoformat()
    assert (row["code_customer"], row["name_customer"], row["products"], row["price"]) == (
        "0014",
        "斉藤明",
        "ナス20個",
        1800,
    )
    assert row["code_sales"].startswith("S20250515")

    after = envelope(await client.call_tool("get_sales", {"code_customer": "0014", **THIS_MONTH}))
    assert after["status_code"] == 200
    assert after["data"]["sales"] == [row]


@pytest.mark.anyio
async def test_add_sale_on_a_given_date_is_found_by_a_range(client: Client) -> None:
    row = envelope(await client.call_tool("add_sale", TUESDAY_SALE))["data"]["sales_registered"]
    assert row["date_sales"] == "2025-05-06"
    last_week = envelope(await client.call_tool("get_sales", {"code_customer": "0016", **LAST_WEEK}))
    assert last_week["data"]["sales"] == [row]


@pytest.mark.anyio
async def test_add_sale_for_an_unknown_customer_is_a_404_error_and_writes_nothing(tmp_path: Path) -> None:
    db_path = tmp_path / "sales.sqlite3"
    async with Client(build_server(db_path, lambda: TODAY)) as client:
        before = sale_count(db_path)
        result = await client.call_tool("add_sale", {"code_customer": "9999", "products": "ナス1個", "price": 90})
        assert result.is_error is True
        assert envelope(result)["status_code"] == 404
        assert sale_count(db_path) == before


@pytest.mark.anyio
async def test_add_sale_with_a_bad_date_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    db_path = tmp_path / "sales.sqlite3"
    async with Client(build_server(db_path, lambda: TODAY)) as client:
        before = sale_count(db_path)
        args = {"code_customer": "0016", "products": "ナス1個", "price": 90, "date_sales_str": "先週火曜日"}
        result = await client.call_tool("add_sale", args)
        assert result.is_error is True
        payload = envelope(result)
        assert payload["status_code"] == 400 and "YYYY-MM-DD" in payload["data"]["error"]
        assert sale_count(db_path) == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments",
    [
        {"code_customer": "0016", "products": "ナス1個", "price": "九十円"},
        {"code_customer": "0016", "products": "ナス1個", "price": -90},
        {"code_customer": "0016", "products": "", "price": 90},
        {"code_customer": "0016", "price": 90},
    ],
)
async def test_add_sale_rejects_arguments_outside_the_schema(tmp_path: Path, arguments: dict[str, Any]) -> None:
    db_path = tmp_path / "sales.sqlite3"
    async with Client(build_server(db_path, lambda: TODAY)) as client:
        before = sale_count(db_path)
        result = await client.call_tool("add_sale", arguments)
        assert result.is_error is True
        assert sale_count(db_path) == before


# -- the database file and the configuration ---------------------------------------------------------------


def test_prepare_seeds_a_new_database_once(tmp_path: Path) -> None:
    db_path = tmp_path / "new" / "sales.sqlite3"
    assert store.prepare(db_path) is True
    assert sale_count(db_path) == len(store.SALES)
    with store.connect(db_path) as conn:
        store.add_sale(conn, "0001", "トマト1個", 80, TODAY)
    assert store.prepare(db_path) is False
    assert sale_count(db_path) == len(store.SALES) + 1


def test_seed_has_nothing_after_the_articles_today() -> None:
    assert max(date.fromisoformat(day) for _, day, _, _ in store.SALES) < TODAY
    assert {code for code, *_ in store.SALES} <= {code for code, *_ in store.CUSTOMERS}


def test_settings_from_env_fixes_today_and_the_path(tmp_path: Path) -> None:
    settings = settings_from_env({"SALES_DB_PATH": str(tmp_path / "x.db"), "SALES_DB_TODAY": "2025-05-15"})
    assert settings.db_path == tmp_path / "x.db"
    assert settings.today() == TODAY


def test_a_malformed_today_stops_the_server_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db_path = tmp_path / "never.db"
    assert main([], env={"SALES_DB_PATH": str(db_path), "SALES_DB_TODAY": "2025/05/15"}) == 2
    assert "SALES_DB_TODAY" in capsys.readouterr().err
    assert not db_path.exists()


# -- over stdio, as helpbot will start it ------------------------------------------------------------------


def stdio_params(db_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER_SCRIPT)],
        env={"SALES_DB_PATH": str(db_path), "SALES_DB_TODAY": TODAY.isoformat()},
    )


@asynccontextmanager
async def stdio_session(db_path: Path, errlog: TextIO) -> AsyncIterator[ClientSession]:
    """Start server.py as a subprocess, the way helpbot will, and open an initialized session to it."""
    async with (
        stdio_client(stdio_params(db_path), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.mark.scenario
@pytest.mark.anyio
async def test_over_stdio_every_status_path_and_persistence(tmp_path: Path) -> None:
    db_path = tmp_path / "data" / "sales.sqlite3"
    with (tmp_path / "server-stderr.log").open("w") as errlog:
        async with stdio_session(db_path, errlog) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"get_customers", "get_sales", "add_sale"}
            write_hint = tools["add_sale"].annotations
            assert write_hint is not None and write_hint.read_only_hint is False
            assert write_hint.destructive_hint is False
            read_hint = tools["get_sales"].annotations
            assert read_hint is not None and read_hint.read_only_hint is True

            missing = await session.call_tool("get_sales", {"code_customer": "9999"})
            assert missing.is_error is True and envelope(missing)["status_code"] == 404
            empty = await session.call_tool("get_sales", {"code_customer": "0016", **LAST_WEEK})
            assert not empty.is_error and envelope(empty)["status_code"] == 204
            bad = await session.call_tool("get_sales", {"code_customer": "0016", "date_sales_end_str": "5/11"})
            assert bad.is_error is True and envelope(bad)["status_code"] == 400

            added = envelope(await session.call_tool("add_sale", TUESDAY_SALE))
            assert added["status_code"] == 201
            found = envelope(await session.call_tool("get_sales", {"code_customer": "0016", **LAST_WEEK}))
            assert found["status_code"] == 200
            assert found["data"]["sales"] == [added["data"]["sales_registered"]]

        # A second start finds the file, does not seed again, and still has the new sale.
        async with stdio_session(db_path, errlog) as session:
            again = envelope(await session.call_tool("get_sales", {"code_customer": "0016"}))
            assert again["data"]["count"] == 2
            assert added["data"]["sales_registered"] in again["data"]["sales"]
    assert sale_count(db_path) == len(store.SALES) + 1


# -- over streamable HTTP ------------------------------------------------------------------------------------


async def wait_until_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Readiness, not timing: poll until the port accepts, failing early if the server died."""
    with anyio.fail_after(30):
        while True:
            assert process.poll() is None, "the HTTP server exited during start-up"
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


@pytest.mark.scenario
@pytest.mark.anyio
async def test_over_streamable_http(tmp_path: Path) -> None:
    env = {"SALES_DB_PATH": str(tmp_path / "sales.sqlite3"), "SALES_DB_TODAY": TODAY.isoformat()}
    process = subprocess.Popen(  # port 0: the server binds a free port itself and prints its URL (no port race)
        [sys.executable, str(SERVER_SCRIPT), "--http", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        assert line.startswith("serving http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        await wait_until_listening(port, process)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {
                "get_customers",
                "get_sales",
                "add_sale",
            }
            added = await client.call_tool("add_sale", {"code_customer": "0001", "products": "トマト3個", "price": 240})
            assert envelope(added)["data"]["sales_registered"]["date_sales"] == TODAY.isoformat()
    finally:
        process.terminate()
        process.wait(timeout=10)
