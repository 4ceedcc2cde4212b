"""Issue 6.4 end to end: the DB-concierge article's conversations, replayed through helpbot.

The real agent loop (``agent.core.loop.Agent`` with the tools and settings ``agent.build.build_agent`` wires from a
``helpbot.toml``) talks to the real example server (``examples/sales_db/server.py``) over stdio; only the model
is scripted. Each script is a function of the transcript, like a model: it reads the date ranges from the system
prompt's date context, the customer codes and products from the question, the tool names from the tools it was
offered, and every number in its answer from the tool results. A missing range in the prompt, a tool that is
not offered, a status that does not come through or a leaked secret therefore shows as a wrong call or answer.

Today is the article's, 2025-05-15 (a Thursday): 先週 is 2025-05-05..11, 先週火曜日 2025-05-06, 今月 May.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.build import build_agent
from agent.core.loop import Agent
from agent.core.run import Answer, Turn
from agent.core.settings import Settings
from agent.core.tools import ToolExecutor
from examples.sales_db import store
from mcp_lib.config import ConfigError
from mcp_lib.external import server_entries
from tests.fakes.clock import FakeClock
from tests.fakes.loop import check_transcript
from tests.fakes.model import Reply, Request, ScriptedModel, calls

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "sales_db" / "server.py"
SERVER_README = ROOT / "examples" / "sales_db" / "README.md"
TOKYO = ZoneInfo("Asia/Tokyo")
ARTICLE_NOW = datetime(2025, 5, 15, 13, 28, tzinfo=TOKYO)  # 実行日：2025/5/15（木）
SALES_TOOLS = ["get_customers", "get_sales", "add_sale"]
FAKE_TOKEN = "xoxb-" + "1234567890-abcdefghijklmn"  # built in two parts: not a real token, not one to scanners


# -- what the scripted model reads -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DateContext:
    """The ranges the system prompt spells out; the script resolves 先週/今月/先週火曜日 only from these."""

    today: date
    last_week: tuple[date, date]
    last_week_days: dict[str, date]  # 月 -> Monday of last week, ...
    this_month: tuple[date, date]
    last_month: tuple[date, date]

    @classmethod
    def parse(cls, system: str) -> DateContext:
        def line(label: str) -> str:
            found = re.search(rf"^- {label}\b.*$", system, re.M)
            if found is None:
                pytest.fail(f"the system prompt has no explicit {label} line in its date context:\n{system[:1500]}")
            return found.group(0)

        def dates(text: str) -> list[date]:
            return [date.fromisoformat(d) for d in re.findall(r"\d{4}-\d{2}-\d{2}", text)]

        last_week = line("先週")
        days = {day: date.fromisoformat(iso) for day, iso in re.findall(r"([月火水木金土日]) (\d{4}-\d{2}-\d{2})",
                                                                          last_week)}
        if len(days) != 7:
            pytest.fail(f"the 先週 line does not list the seven days of last week: {last_week}")
        (this_begin, this_end), (last_begin, last_end) = dates(line("今月"))[:2], dates(line("先月"))[:2]
        return cls(dates(line("今日"))[0], (dates(last_week)[0], dates(last_week)[1]), days,
                   (this_begin, this_end), (last_begin, last_end))


@dataclass
class Seen:
    """One tool call of the current question and what the model read back."""

    name: str
    input: dict[str, Any]
    is_error: bool
    content: str  # the tool_result text, as the model got it
    envelope: dict[str, Any] | None  # the server's JSON envelope of a success (``item`` of helpbot's result)
    notes: list[str]

    @property
    def function(self) -> str:
        return self.name.split("_", 1)[-1]

    @property
    def data(self) -> dict[str, Any]:
        assert self.envelope is not None, f"{self.name} gave no result envelope: {self.content[:300]}"
        data: dict[str, Any] = self.envelope["data"]
        return data

    @property
    def message(self) -> str:
        """An error as a person would read it: the server's own message when it sent one."""
        try:
            outer = json.loads(self.content)
            text = str(outer.get("message", self.content))
        except (json.JSONDecodeError, AttributeError):
            return self.content
        try:
            return str(json.loads(text)["data"]["error"])
        except (json.JSONDecodeError, KeyError, TypeError):
            return text.removesuffix(" (status 404)")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _question_index(request: Request) -> int:
    for index in range(len(request.messages) - 1, -1, -1):
        message = request.messages[index]
        if message["role"] == "user" and not any(b.get("type") == "tool_result" for b in _blocks(message)):
            return index
    raise AssertionError("no question in the transcript")


def question(request: Request) -> str:
    message = request.messages[_question_index(request)]
    return "\n".join(b.get("text", "") for b in _blocks(message) if b.get("type") == "text")


def results(request: Request) -> list[Seen]:
    """Every tool call since the current question, paired with its tool_result, in order."""
    seen: list[Seen] = []
    messages = request.messages[_question_index(request) + 1:]
    for asked, answered in zip(messages[::2], messages[1::2], strict=False):
        uses = [b for b in _blocks(asked) if b.get("type") == "tool_use"]
        outs = {b["tool_use_id"]: b for b in _blocks(answered) if b.get("type") == "tool_result"}
        for use in uses:
            out = outs[use["id"]]
            content = out["content"] if isinstance(out["content"], str) else json.dumps(out["content"])
            try:
                parsed = json.loads(content)
            except json.JSONDecodeError:
                parsed = None
            is_error = bool(out.get("is_error"))
            envelope = parsed.get("item") if isinstance(parsed, dict) and not is_error else None
            notes = parsed.get("notes", []) if isinstance(parsed, dict) else []
            seen.append(Seen(use["name"], use["input"], is_error, content, envelope, notes))
    return seen


def last(seen: list[Seen], function: str) -> Seen | None:
    found = [s for s in seen if s.function == function]
    return found[-1] if found else None


def tool(request: Request, function: str) -> str:
    """The offered tool for a server function; a model that "knows" the server guesses the name otherwise."""
    for entry in request.tools:
        if entry["name"].endswith("_" + function):
            return str(entry["name"])
    return "sales_" + function


def yen(amount: int) -> str:
    return f"{amount:,}円"


# -- the scripted concierge: one script per kind of request in the article ------------------------------------
def sales_report(request: Request) -> Reply:
    """「顧客コード0009と0010の、先週の販売データを見せて。」 (also 今月 / 先月と今月): each customer's master data
    and sales, all requested in ONE response, then an answer built from the results."""
    asked = question(request)
    codes = re.findall(r"(?<!\d)\d{4}(?!\d)", asked)
    ctx = DateContext.parse(request.system_text)
    if "先月と今月" in asked:
        label, (begin, end) = "先月と今月", (ctx.last_month[0], ctx.this_month[1])
    elif "先週" in asked:
        label, (begin, end) = "先週", ctx.last_week
    elif "今月" in asked:
        label, (begin, end) = "今月", ctx.this_month
    else:
        raise AssertionError(f"the script does not know the period of {asked!r}")
    seen = results(request)
    if not seen:
        return calls(*[(tool(request, "get_customers"), {"code_customer": code}) for code in codes],
                     *[(tool(request, "get_sales"), {"code_customer": code, "date_sales_begin_str": begin.isoformat(),
                                                     "date_sales_end_str": end.isoformat()}) for code in codes])
    lines = []
    for code in codes:
        customer = next(s for s in seen if s.function == "get_customers" and s.input["code_customer"] == code)
        sales = next(s for s in seen if s.function == "get_sales" and s.input["code_customer"] == code)
        rows = customer.data["customers"] if not customer.is_error else []
        head = f"顧客コード{code}" + (f"（{rows[0]['name_customer']}様）" if rows else "")
        if sales.is_error:
            lines.append(f"{head}: {sales.message}")
        elif sales.data["count"] == 0:
            lines.append(f"{head}の{label}（{begin}〜{end}）の販売データはありませんでした。")
        else:
            found = sales.data["sales"]
            total = sum(int(row["price"]) for row in found)
            lines.append(f"{head}の{label}（{begin}〜{end}）の販売データは{sales.data['count']}件、"
                         f"合計{yen(total)}です：")
            lines += [f"- {row['date_sales']}: {row['products']} - {yen(int(row['price']))}"
                      f"（販売番号 {row['code_sales']}）" for row in found]
    return "\n".join(lines)


def register_sale(request: Request) -> Reply:
    """「販売登録して。顧客コード0016のお客様に、先週火曜日、かぼちゃ4個を600円で売った。」: add_sale with the
    weekday read off the prompt's 先週 line, then get_sales by the new sale number to confirm."""
    asked = question(request)
    code = re.findall(r"顧客コード(\d{4})", asked)[0]
    weekday = re.findall(r"先週([月火水木金土日])曜日", asked)[0]
    products, price = re.findall(r"、([^、]+?)を(\d+)円で売った", asked)[0]
    day = DateContext.parse(request.system_text).last_week_days[weekday]
    seen = results(request)
    added = last(seen, "add_sale")
    if added is None:
        return calls((tool(request, "add_sale"), {"code_customer": code, "products": products, "price": int(price),
                                                  "date_sales_str": day.isoformat()}))
    if added.is_error:
        return f"販売登録できませんでした（{added.message}）。"
    row = added.data["sales_registered"]
    confirmed = last(seen, "get_sales")
    if confirmed is None:
        return calls((tool(request, "get_sales"), {"code_customer": code, "code_sales": row["code_sales"]}))
    stored = confirmed.data["sales"] if not confirmed.is_error else []
    return "\n".join([
        f"販売登録が完了しました（販売番号 {row['code_sales']}、登録後の検索で{len(stored)}件確認）。"
        "内容は以下の通りです：",
        f"- 顧客: {row['name_customer']}さん (顧客コード: {row['code_customer']})",
        f"- 日付: {row['date_sales']} (先週{weekday}曜日)",
        f"- 商品: {row['products']}",
        f"- 価格: {yen(int(row['price']))}",
    ])


def register_if_none_this_month(recheck: bool = False) -> Callable[[Request], Reply]:
    """「顧客コード0014の今月の販売件数がまだ0件の場合、急遽、販売登録を行う。ナス20個を1800円で販売。」:
    get_sales for 今月; only when its count is 0, add_sale (no date: the server's today); then the answer.
    With ``recheck`` the model asks the very same get_sales again after registering, to report the new count."""

    def script(request: Request) -> Reply:
        asked = question(request)
        code = re.findall(r"顧客コード(\d{4})", asked)[0]
        products, price = re.findall(r"([^。、]+?)を(\d+)円で販売", asked)[0]
        begin, end = DateContext.parse(request.system_text).this_month
        lookup = {"code_customer": code, "date_sales_begin_str": begin.isoformat(),
                  "date_sales_end_str": end.isoformat()}
        seen = results(request)
        if not seen:
            return calls((tool(request, "get_sales"), lookup))
        looked = seen[0]
        if looked.is_error:
            return f"販売件数を確認できませんでした（{looked.message}）。"
        if looked.data["count"]:
            return (f"顧客コード{code}の今月（{begin}〜{end}）の販売件数は既に{looked.data['count']}件のため、"
                    "販売登録は行いませんでした。")
        added = last(seen, "add_sale")
        if added is None:
            return calls((tool(request, "add_sale"), {"code_customer": code, "products": products,
                                                      "price": int(price)}))
        if added.is_error:
            return f"販売登録できませんでした（{added.message}）。"
        row = added.data["sales_registered"]
        answer = (f"顧客コード{code}の今月の販売件数が0件だったため、新たに販売を登録しました。\n"
                  f"{row['name_customer']}様に{row['products']}を{yen(int(row['price']))}で販売しました"
                  f"（販売日 {row['date_sales']}、販売番号 {row['code_sales']}）。")
        if not recheck:
            return answer
        if len(seen) == 2:
            return calls((tool(request, "get_sales"), lookup))
        after = seen[2]
        count = after.data["count"] if after.envelope else "不明"
        return answer + f"\n登録後の今月の販売件数: {count}件"

    return script


def customer_list(request: Request) -> Reply:
    """「顧客の一覧を見せて。」: get_customers without conditions."""
    seen = results(request)
    if not seen:
        return calls((tool(request, "get_customers"), {}))
    return "\n".join(f"- {row['code_customer']}: {row['name_customer']}" for row in seen[0].data["customers"])


# -- helpbot wired from a helpbot.toml -----------------------------------------------------------------------------
@dataclass
class Concierge:
    """helpbot's tools and settings as ``build_agent`` wires them from the environment, over one SQLite file."""

    env: dict[str, str]
    db: Path
    tools: ToolExecutor
    agent_settings: Settings

    def run(self, script: Callable[[Request], Reply], question: str, *, now: datetime = ARTICLE_NOW,
            history: list[Turn] | None = None) -> tuple[Answer, ScriptedModel]:
        model = ScriptedModel(script)
        agent = Agent(model, self.tools, self.agent_settings, clock=FakeClock(wall=now.timestamp()))
        answer = agent.run(question, history or [])
        check_transcript(answer.messages)
        return answer, model

    def rows(self, code_customer: str) -> list[dict[str, Any]]:
        with sqlite3.connect(self.db) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(
                "SELECT code_sales, date_sales, products, price FROM sales WHERE code_customer = ? ORDER BY id_sales",
                (code_customer,))]


def concierge(folder: Path, *, tools: list[str], allow_writes: bool, env: dict[str, str] | None = None,
              seed: Callable[[Path], None] | None = None) -> Concierge:
    config = folder / "helpbot.toml"
    config.write_text(f"""
[[mcp_servers]]
name = "sales"
description = "農園の販売DB（顧客マスタと販売データ）"
scenes = ["顧客や販売データの質問、販売登録"]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]
cwd = {json.dumps(str(ROOT))}
env = ["SALES_DB_PATH", "SALES_DB_TODAY"]
tools = {json.dumps(tools)}
allow_writes = {json.dumps(allow_writes)}
""", encoding="utf-8")
    db = folder / "sales.sqlite3"
    if seed is not None:
        store.prepare(db)
        seed(db)
    full_env = {"HELPBOT_CONFIG": str(config), "SALES_DB_PATH": str(db), "SALES_DB_TODAY": "2025-05-15",
                **(env or {})}
    built = build_agent(full_env)  # no model credentials in this environment: the model is ours
    assert built.model is None
    return Concierge(full_env, db, built.tools, built.settings)


@pytest.fixture(scope="module")
def readonly(tmp_path_factory: pytest.TempPathFactory) -> Concierge:
    return concierge(tmp_path_factory.mktemp("readonly"), tools=SALES_TOOLS, allow_writes=False)


@pytest.fixture(scope="module")
def writable(tmp_path_factory: pytest.TempPathFactory) -> Concierge:
    """Shared by the write tests; each writes for a different customer, so their order does not matter."""
    return concierge(tmp_path_factory.mktemp("writable"), tools=SALES_TOOLS, allow_writes=True)


def _seed_secrets(db: Path) -> None:
    with store.connect(db) as conn:
        store.add_sale(conn, "0004", f"トマト3個（メモ: 担当者トークン {FAKE_TOKEN}）", 300, date(2025, 5, 8))
        store.add_sale(conn, "0004", "有機野菜おまかせセット（" + "にんじん・" * 40 + "）", 2500, date(2025, 5, 9))


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Concierge:
    """Tight helpbot limits, and a DB holding a pasted token and an overlong product name for customer 0004."""
    return concierge(tmp_path_factory.mktemp("limited"), tools=SALES_TOOLS, allow_writes=False, seed=_seed_secrets,
                     env={"HELPBOT_TOOL_MAX_FIELD_CHARS": "100", "HELPBOT_TOOL_MAX_ITEMS": "3"})


def offered(model: ScriptedModel) -> list[str]:
    """The sales tools the model was given, request by request (they must not change within a run)."""
    lists = {tuple(t["name"] for t in request.tools if t["name"].startswith("sales_")) for request in model.requests}
    assert len(lists) == 1, lists
    return list(lists.pop())


def seed_sales(code: str, begin: date, end: date) -> list[tuple[str, str, str, int]]:
    """The seed's sales of one customer in a range: the expectation, taken from the data, not from the article."""
    return [s for s in store.SALES if s[0] == code and begin.isoformat() <= s[1] <= end.isoformat()]


# -- 1. 「顧客コード0009と0010の、先週の販売データを見せて。」 ---------------------------------------------------------
@pytest.mark.parametrize(("now", "week"), [
    (ARTICLE_NOW, (date(2025, 5, 5), date(2025, 5, 11))),  # the article's Thursday
    (ARTICLE_NOW + timedelta(days=7), (date(2025, 5, 12), date(2025, 5, 18))),  # a week later: other dates, data
], ids=["article-2025-05-15", "a-week-later"])
def test_last_week_sales_of_two_customers_in_one_round(readonly: Concierge, now: datetime,
                                                       week: tuple[date, date]) -> None:
    answer, model = readonly.run(sales_report, "顧客コード0009と0010の、先週の販売データを見せて。", now=now)

    # One round: all four lookups were asked for in one response and answered together.
    assert answer.stop == "end_turn" and answer.rounds == 1 and len(model.requests) == 2
    first_response = model.requests[1].messages[-2]["content"]
    assert [b["name"] for b in first_response if b["type"] == "tool_use"] == [
        "sales_get_customers", "sales_get_customers", "sales_get_sales", "sales_get_sales"]
    assert all(call.round == 1 and not call.is_error for call in answer.tool_calls)
    ranges = {(c.input["code_customer"], c.input["date_sales_begin_str"], c.input["date_sales_end_str"])
              for c in answer.tool_calls if c.name == "sales_get_sales"}
    begin, end = (d.isoformat() for d in week)
    assert ranges == {("0009", begin, end), ("0010", begin, end)}

    # The answer is what the server returned for those dates (expected rows taken from the seed data).
    seen = {s.input["code_customer"]: s for s in results(model.requests[1]) if s.function == "get_sales"}
    for code, name in (("0009", "佐藤次郎"), ("0010", "高橋美咲")):
        expected = seed_sales(code, *week)
        assert seen[code].data["count"] == len(expected)
        if not expected:
            assert f"顧客コード{code}（{name}様）の先週（{begin}〜{end}）の販売データはありませんでした。" in (
                answer.text)
        for _, day, products, price in expected:
            assert f"- {day}: {products} - {yen(price)}" in answer.text
    if now == ARTICLE_NOW:  # the article's own answer: 0009 2025-05-10 キュウリ15本 1050円, 0010 nothing
        for line in ("顧客コード0009（佐藤次郎様）の先週（2025-05-05〜2025-05-11）の販売データは1件、合計1,050円です",
                     "- 2025-05-10: キュウリ15本 - 1,050円",
                     "顧客コード0010（高橋美咲様）の先週（2025-05-05〜2025-05-11）の販売データはありませんでした。"):
            assert line in answer.text


def test_two_months_total_is_computed_from_the_results(readonly: Concierge) -> None:
    """「顧客コード0002の先月と今月の2ヶ月間の販売金額合計は？」 -> 2025-04-01..2025-05-31, 合計 2,180円."""
    answer, _ = readonly.run(sales_report, "顧客コード0002の先月と今月の2ヶ月間の販売金額合計は？")
    [lookup] = [c.input for c in answer.tool_calls if c.name == "sales_get_sales"]
    assert (lookup["date_sales_begin_str"], lookup["date_sales_end_str"]) == ("2025-04-01", "2025-05-31")
    assert "顧客コード0002（John Smith様）の先月と今月（2025-04-01〜2025-05-31）の販売データは4件、合計2,180円です" in (
        answer.text)
    for line in ("2025-04-19: トマト2個とかぼちゃ1個 - 340円", "2025-04-22: トマト8個 - 640円",
                 "2025-05-02: かぼちゃ2個 - 240円", "2025-05-07: トマト12個 - 960円"):
        assert line in answer.text


# -- 2. 「販売登録して。顧客コード0016のお客様に、先週火曜日、かぼちゃ4個を600円で売った。」 ---------------------------
TUESDAY_SALE = "販売登録して。顧客コード0016のお客様に、先週火曜日、かぼちゃ4個を600円で売った。"


def test_sale_registered_last_tuesday_then_confirmed(writable: Concierge) -> None:
    before = writable.rows("0016")
    answer, model = writable.run(register_sale, TUESDAY_SALE)

    assert "sales_add_sale" in offered(model)
    assert [(c.name, c.round, c.is_error) for c in answer.tool_calls] == [
        ("sales_add_sale", 1, False), ("sales_get_sales", 2, False)]
    assert answer.tool_calls[0].input == {"code_customer": "0016", "products": "かぼちゃ4個", "price": 600,
                                          "date_sales_str": "2025-05-06"}
    [new] = [row for row in writable.rows("0016") if row not in before]
    assert (new["date_sales"], new["products"], new["price"]) == ("2025-05-06", "かぼちゃ4個", 600)
    assert new["code_sales"].startswith("S20250506")
    # The confirmation looked the new sale up by the number add_sale returned, and found it.
    assert answer.tool_calls[1].input == {"code_customer": "0016", "code_sales": new["code_sales"]}
    assert f"販売登録が完了しました（販売番号 {new['code_sales']}、登録後の検索で1件確認）" in answer.text
    for line in ("- 顧客: 松本理恵さん (顧客コード: 0016)", "- 日付: 2025-05-06 (先週火曜日)",
                 "- 商品: かぼちゃ4個", "- 価格: 600円"):
        assert line in answer.text


def test_without_allow_writes_add_sale_is_not_offered_and_an_attempt_is_refused(readonly: Concierge) -> None:
    before = readonly.rows("0016")
    answer, model = readonly.run(register_sale, TUESDAY_SALE)

    assert offered(model) == ["sales_get_customers", "sales_get_sales"]
    assert "Read-only: tools that may write are never offered" in model.requests[0].system_text
    [attempt] = results(model.requests[1])
    assert attempt.name == "sales_add_sale" and attempt.is_error
    assert "unknown tool 'sales_add_sale'" in attempt.content
    assert answer.stop == "end_turn"
    assert answer.text.startswith("販売登録できませんでした（unknown tool 'sales_add_sale'")
    assert readonly.rows("0016") == before  # nothing reached the database


# -- 3. the conditional chain: 「今月の販売件数がまだ0件の場合、急遽、販売登録を行う。」 ---------------------------
def test_no_sales_this_month_so_a_sale_is_registered_and_shows_up_in_the_follow_up(writable: Concierge) -> None:
    asked = "顧客コード0014の今月の販売件数がまだ0件の場合、急遽、販売登録を行う。ナス20個を1800円で販売。"
    answer, model = writable.run(register_if_none_this_month(), asked)

    assert [(c.name, c.round) for c in answer.tool_calls] == [("sales_get_sales", 1), ("sales_add_sale", 2)]
    assert answer.tool_calls[0].input == {"code_customer": "0014", "date_sales_begin_str": "2025-05-01",
                                          "date_sales_end_str": "2025-05-31"}
    assert results(model.requests[1])[0].data["count"] == 0  # the branch was taken on the result it read
    assert answer.tool_calls[1].input == {"code_customer": "0014", "products": "ナス20個", "price": 1800}
    [new] = [row for row in writable.rows("0014") if row["date_sales"] >= "2025-05-01"]
    assert (new["date_sales"], new["products"], new["price"]) == ("2025-05-15", "ナス20個", 1800)  # SALES_DB_TODAY
    assert answer.text == ("顧客コード0014の今月の販売件数が0件だったため、新たに販売を登録しました。\n"
                           "斉藤明様にナス20個を1,800円で販売しました"
                           f"（販売日 2025-05-15、販売番号 {new['code_sales']}）。")

    # 「顧客コード0014の今月の販売データを見せて。」 in the same conversation: the new sale is there.
    follow_up, _ = writable.run(sales_report, "顧客コード0014の今月の販売データを見せて。",
                                history=[Turn(asked, answer.text)])
    assert "顧客コード0014（斉藤明様）の今月（2025-05-01〜2025-05-31）の販売データは1件、合計1,800円です" in (
        follow_up.text)
    assert f"- 2025-05-15: ナス20個 - 1,800円（販売番号 {new['code_sales']}）" in follow_up.text


def test_sales_this_month_so_nothing_is_registered(writable: Concierge) -> None:
    before = writable.rows("0002")
    answer, _ = writable.run(register_if_none_this_month(),
                             "顧客コード0002の今月の販売件数がまだ0件の場合、急遽、販売登録を行う。ナス20個を1800円で販売。")
    assert [c.name for c in answer.tool_calls] == ["sales_get_sales"]
    in_may = len(seed_sales("0002", date(2025, 5, 1), date(2025, 5, 31)))
    assert in_may == 2
    assert answer.text == (f"顧客コード0002の今月（2025-05-01〜2025-05-31）の販売件数は既に{in_may}件のため、"
                           "販売登録は行いませんでした。")
    assert writable.rows("0002") == before


def test_a_read_repeated_after_a_write_is_run_again(writable: Concierge) -> None:
    answer, model = writable.run(register_if_none_this_month(recheck=True),
                                 "顧客コード0004の今月の販売件数がまだ0件の場合、急遽、販売登録を行う。玉ねぎ2kgを500円で販売。")
    assert [c.name for c in answer.tool_calls] == ["sales_get_sales", "sales_add_sale", "sales_get_sales"]
    recheck = results(model.requests[-1])[2]
    assert "Not run again" not in recheck.content
    assert recheck.data["count"] == 1 and answer.text.endswith("登録後の今月の販売件数: 1件")


# -- allowlist, errors as values, redaction and limits ------------------------------------------------------------
@pytest.mark.scenario
def test_a_tool_not_on_the_allowlist_is_never_offered_nor_run(tmp_path: Path) -> None:
    only_sales = concierge(tmp_path, tools=["get_sales"], allow_writes=True)  # writes allowed, add_sale not listed
    answer, model = only_sales.run(sales_report, "顧客コード0009の先週の販売データを見せて。")

    assert offered(model) == ["sales_get_sales"]
    assert "Only these tools are offered: get_sales" in model.requests[0].system_text
    customers, sales = results(model.requests[1])
    assert customers.name == "sales_get_customers" and customers.is_error
    assert customers.content.startswith("unknown tool 'sales_get_customers'")  # refused by helpbot, not the server
    assert not sales.is_error and sales.data["count"] == 1
    assert "顧客コード0009の先週（2025-05-05〜2025-05-11）の販売データは1件、合計1,050円です" in answer.text


def test_an_unknown_customer_is_an_error_result_and_the_run_still_answers(readonly: Concierge) -> None:
    answer, model = readonly.run(sales_report, "顧客コード9999の先週の販売データを見せて。")
    customers, sales = results(model.requests[1])
    assert not customers.is_error and customers.data["count"] == 0  # 204: nothing matched, not an error
    assert sales.is_error  # 404: an is_error tool_result carrying the server's own envelope and message
    assert json.loads(sales.content)["message"] == "顧客コード9999の顧客は存在しません。 (status 404)"
    assert [c.is_error for c in answer.tool_calls] == [False, True]
    assert answer.stop == "end_turn" and answer.text == "顧客コード9999: 顧客コード9999の顧客は存在しません。"


def test_results_pass_through_helpbot_redaction_and_field_limits(limited: Concierge) -> None:
    stored = [row["products"] for row in limited.rows("0004")]
    assert any(FAKE_TOKEN in products for products in stored)  # the secret really is in the database

    answer, model = limited.run(sales_report, "顧客コード0004の先週の販売データを見せて。")
    sales = next(s for s in results(model.requests[1]) if s.function == "get_sales")
    products = [row["products"] for row in sales.data["sales"]]
    assert products[0] == "トマト3個（メモ: 担当者トークン [REDACTED]）"
    assert products[1].startswith("有機野菜おまかせセット（にんじん・") and "…[truncated:" in products[1]
    assert len(products[1].split("…[truncated:")[0]) == 100
    assert "long fields cut to 100 characters" in sales.notes
    assert "[REDACTED]" in answer.text
    everything = json.dumps([[r.system, r.messages] for r in model.requests] + [answer.messages, answer.trace],
                            ensure_ascii=False)
    assert FAKE_TOKEN not in everything and FAKE_TOKEN not in answer.text


def test_the_item_limit_applies_to_rows_inside_an_external_result(limited: Concierge) -> None:
    _, model = limited.run(customer_list, "顧客の一覧を見せて。")
    [listing] = results(model.requests[1])
    assert len(listing.data["customers"]) <= 3  # HELPBOT_TOOL_MAX_ITEMS=3; the server returns all 8
    assert listing.notes


def test_the_sales_db_readme_config_loads(tmp_path: Path) -> None:
    found = re.search(r"```toml\n(.*?)```", SERVER_README.read_text(encoding="utf-8"), re.S)
    assert found is not None
    (tmp_path / "helpbot.toml").write_text(found.group(1), encoding="utf-8")
    try:
        [entry] = server_entries({"HELPBOT_CONFIG": str(tmp_path / "helpbot.toml")})
    except ConfigError as exc:
        pytest.fail(str(exc))
    assert entry.name == "sales" and entry.tools == SALES_TOOLS and not entry.allow_writes
