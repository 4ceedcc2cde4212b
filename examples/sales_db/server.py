"""An in-house MCP server for the farm's sales DB: the "AI concierge" server of the article, on SQLite.

Three tools -- get_customers, get_sales (read) and add_sale (write) -- with the article's status semantics:
404 unknown customer -> an error result (isError); 204 nothing matched -> success with count 0; 200 rows;
201 the registered sale. Every result is the article's JSON envelope, as text and as structuredContent.
The tool annotations (readOnlyHint / destructiveHint) are what a client such as helpbot reads to tell the
write tool from the read tools.

Run over stdio:                 uv run python examples/sales_db/server.py
Run over streamable HTTP:       uv run python examples/sales_db/server.py --http --port 8765   (path /mcp)
Environment: SALES_DB_PATH (SQLite file, created and seeded when missing), SALES_DB_TODAY (YYYY-MM-DD, fixes
"today" for add_sale's default date; otherwise today's date in Asia/Tokyo).
"""

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from examples.sales_db import store

SERVER_NAME = "sales-db"
DEFAULT_DB_PATH = Path(tempfile.gettempdir()) / "helpbot-sales-db.sqlite3"
FARM_TZ = ZoneInfo("Asia/Tokyo")
BAD_REQUEST = 400

INSTRUCTIONS = (
    "ある架空の農園の販売アプリのDB（顧客マスタと販売データ）を読み書きするサーバーです。"
    "日付はすべて YYYY-MM-DD の形式です。週は月曜日にはじまり、日曜日に終わります。"
)


def _read_only(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def _write_additive(title: str) -> ToolAnnotations:
    """A write, but additive: it never changes or deletes an existing row."""
    return ToolAnnotations(
        title=title, read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )


GET_CUSTOMERS_DESCRIPTION = (
    "販売アプリにおいて、顧客マスタの検索を行い、顧客データを返す。"
    "（プロンプト例：顧客コード1234の名前と住所が知りたい。）（プロンプト例：佐藤さんというお客様の顧客データが見たい。）"
)
GET_SALES_DESCRIPTION = (
    "販売アプリにおいて、販売データの検索を行い、検索結果を返す。顧客が存在しない場合はエラー、"
    "条件に合う販売データが無い場合は0件を返す。"
    "（プロンプト例：顧客コード1234のお客様の販売実績を知りたい）（プロンプト例：顧客コード1234の先月の販売合計額は？）"
)
ADD_SALE_DESCRIPTION = (
    "販売アプリにおいて、販売データの登録を行い、登録された販売データ（販売番号を含む）を返す。"
    "（プロンプト例：販売登録。キュウリ15本とナス8個を2000円で顧客コード1234のお客様に売った。）"
    "（プロンプト例：販売登録。昨日、キュウリ15本とナス8個を2000円で売った。顧客コードは1234。）"
)


class BadRequest(Exception):
    """Arguments the model can correct (a malformed date); answered as status 400, isError."""


@dataclass(frozen=True)
class Settings:
    db_path: Path
    today: Callable[[], date]


def farm_today() -> date:
    """The farm is in Japan; a CI runner's clock is UTC, so "today" is taken in Asia/Tokyo."""
    return datetime.now(FARM_TZ).date()


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """SALES_DB_PATH and SALES_DB_TODAY; a malformed SALES_DB_TODAY raises ValueError naming the variable."""
    db_path = Path(env.get("SALES_DB_PATH") or DEFAULT_DB_PATH)
    fixed = env.get("SALES_DB_TODAY")
    if not fixed:
        return Settings(db_path, farm_today)
    try:
        day = datetime.strptime(fixed, "%Y-%m-%d").date()
    except ValueError:
        raise ValueError(f"SALES_DB_TODAY: {fixed!r} is not a date in the form YYYY-MM-DD") from None
    return Settings(db_path, lambda: day)


def build_server(db_path: Path, today: Callable[[], date] = farm_today) -> MCPServer:
    """The server over one SQLite file (created and seeded here when new); ``today`` is add_sale's default date."""
    store.prepare(db_path)
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version="1.0.0", log_level="WARNING")

    @server.tool(description=GET_CUSTOMERS_DESCRIPTION, annotations=_read_only("顧客検索"))
    def get_customers(
        code_customer: Annotated[
            str | None, Field(description="顧客マスタの検索条件の1つ。顧客コード。完全一致。オプション。")
        ] = None,
        name_str_customer: Annotated[
            str | None, Field(description="顧客マスタの検索条件の1つ。顧客名の一部または全部。部分一致。オプション。")
        ] = None,
    ) -> CallToolResult:
        with store.connect(db_path) as conn:
            outcome = store.get_customers(conn, _blank_to_none(code_customer), _blank_to_none(name_str_customer))
        return _success(outcome, {"customers": outcome.rows, "count": len(outcome.rows)})

    @server.tool(description=GET_SALES_DESCRIPTION, annotations=_read_only("販売データ検索"))
    def get_sales(
        code_customer: Annotated[
            str,
            Field(description="販売データの必須検索条件の1つ。検索したい販売データの販売相手である顧客のコード。"),
        ],
        code_sales: Annotated[
            str | None,
            Field(description="販売データの任意検索条件の1つ。販売番号で指定して検索したい場合に使用。"),
        ] = None,
        date_sales_begin_str: Annotated[
            str | None,
            Field(
                description="販売データの任意検索条件の1つ。販売日を期間で指定して検索したい場合に使用。"
                "その検索期間の開始年月日（この日を含む）。YYYY-MM-DDの形式。"
            ),
        ] = None,
        date_sales_end_str: Annotated[
            str | None,
            Field(
                description="販売データの任意検索条件の1つ。販売日を期間で指定して検索したい場合に使用。"
                "その検索期間の終了年月日（この日を含む）。YYYY-MM-DDの形式。"
            ),
        ] = None,
    ) -> CallToolResult:
        try:
            begin = _parse_date(date_sales_begin_str, "販売日期間の開始日（date_sales_begin_str）")
            end = _parse_date(date_sales_end_str, "販売日期間の終了日（date_sales_end_str）")
            if begin and end and begin > end:
                raise BadRequest(f"販売日期間の開始日 {begin} が終了日 {end} より後です。")
        except BadRequest as exc:
            return _error(BAD_REQUEST, str(exc))
        with store.connect(db_path) as conn:
            outcome = store.get_sales(conn, code_customer, _blank_to_none(code_sales), begin, end)
        if outcome.status_code == store.NOT_FOUND:
            return _error(outcome.status_code, outcome.message)
        return _success(outcome, {"sales": outcome.rows, "count": len(outcome.rows)})

    @server.tool(description=ADD_SALE_DESCRIPTION, annotations=_write_additive("販売登録"))
    def add_sale(
        code_customer: Annotated[str, Field(description="販売相手の顧客のコード。必須。")],
        products: Annotated[str, Field(min_length=1, description="販売した物。必須。（例：キュウリ15本とナス8個）")],
        price: Annotated[int, Field(ge=0, description="販売価格。通貨を除いた整数部分。必須。（例：2000）")],
        date_sales_str: Annotated[
            str | None, Field(description="販売した年月日。YYYY-MM-DDの形式。オプション。省略時は今日。")
        ] = None,
    ) -> CallToolResult:
        try:
            day = _parse_date(date_sales_str, "販売日（date_sales_str）") or today()
        except BadRequest as exc:
            return _error(BAD_REQUEST, str(exc))
        with store.connect(db_path) as conn:
            outcome = store.add_sale(conn, code_customer, products, price, day)
        if outcome.status_code == store.NOT_FOUND:
            return _error(outcome.status_code, outcome.message)
        return _success(outcome, {"sales_registered": outcome.rows[0]})

    return server


def _blank_to_none(value: str | None) -> str | None:
    """Models often send "" for an optional filter; an empty condition means no condition."""
    return value if value and value.strip() else None


def _parse_date(value: str | None, what: str) -> date | None:
    if not _blank_to_none(value):
        return None
    assert value is not None
    try:
        return datetime.strptime(value.strip(), "%Y-%m-%d").date()
    except ValueError:
        raise BadRequest(f"{what}の形式が不正です。YYYY-MM-DDの形式で指定してください: {value!r}") from None


def _success(outcome: store.Outcome, data: dict[str, Any]) -> CallToolResult:
    payload = {"status": "success", "status_code": outcome.status_code, "message": outcome.message, "data": data}
    return _result(payload, is_error=False)


def _error(status_code: int, message: str) -> CallToolResult:
    payload = {"status": "error", "status_code": status_code, "data": {"error": message}}
    return _result(payload, is_error=True)


def _result(payload: dict[str, Any], *, is_error: bool) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=payload, is_error=is_error)


def serve_http(server: MCPServer, host: str, port: int) -> None:
    """Streamable HTTP on a socket bound here, so that port 0 works: the URL is printed once it is bound."""
    import socket

    import uvicorn

    sock = socket.create_server((host, port))
    bound = sock.getsockname()[1]
    print(f"serving http://{host}:{bound}/mcp", flush=True)
    app = server.streamable_http_app(host=host)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The farm sales-DB MCP server (stdio by default).")
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: any free port (the URL is printed on stdout)")
    args = parser.parse_args(argv)
    try:
        settings = settings_from_env(os.environ if env is None else env)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    server = build_server(settings.db_path, settings.today)
    if args.http:
        serve_http(server, args.host, args.port)
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
