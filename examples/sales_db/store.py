"""The farm's sales database: schema, seed data and the three "stored functions" of the article, on SQLite.

The article keeps the business rules in PostgreSQL functions that answer with an HTTP-like status: 404 when the
customer does not exist, 204 when nothing matches, 200 with rows, 201 for a registered sale. SQLite has no stored
functions, so the same rules live here as plain functions over a connection; ``server.py`` only maps the status
to an MCP result. The seed reproduces the article's data around its "today", 2025-05-15 (a Thursday).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE customers (
    code_customer TEXT PRIMARY KEY,
    name_customer TEXT NOT NULL,
    address       TEXT NOT NULL,
    tel           TEXT NOT NULL
);
CREATE TABLE sales (
    id_sales      INTEGER PRIMARY KEY,
    code_sales    TEXT UNIQUE,
    code_customer TEXT NOT NULL REFERENCES customers(code_customer),
    date_sales    TEXT NOT NULL,
    products      TEXT NOT NULL,
    price         INTEGER NOT NULL
);
CREATE INDEX sales_by_customer_date ON sales(code_customer, date_sales);
"""

CUSTOMERS: list[tuple[str, str, str, str]] = [
    ("0001", "佐藤太郎", "東京都新宿区西新宿3丁目ヒカリビル12階", "03-1234-5678"),
    ("0002", "John Smith", "神奈川県横浜市中区山下町1-2", "045-111-2222"),
    ("0003", "山田花子", "北海道札幌市中央区大通西4丁目ファンタジアA101", "011-987-6543"),
    ("0004", "鈴木一郎", "千葉県木更津市潮見2-5", "0438-22-3344"),
    ("0009", "佐藤次郎", "京都府京都市下京区烏丸通河原町スモータル館302", "075-666-7777"),
    ("0010", "高橋美咲", "埼玉県さいたま市浦和区高砂3-1", "048-555-1212"),
    ("0014", "斉藤明", "静岡県静岡市葵区追手町9-6", "054-333-4545"),
    ("0016", "松本理恵", "長野県松本市中央1-1-1", "0263-88-9900"),
]

# (customer, date, products, price). Six weeks up to the article's "today"; nobody has a sale after it.
SALES: list[tuple[str, str, str, int]] = [
    ("0014", "2025-04-10", "ナス20個", 1800),
    ("0001", "2025-04-08", "トマト10個", 800),
    ("0003", "2025-04-15", "じゃがいも5kg", 1500),
    ("0016", "2025-04-18", "かぼちゃ3個", 450),
    ("0002", "2025-04-19", "トマト2個とかぼちゃ1個", 340),
    ("0002", "2025-04-22", "トマト8個", 640),
    ("0014", "2025-04-24", "キュウリ10本", 700),
    ("0001", "2025-04-25", "キュウリ20本", 1400),
    ("0009", "2025-04-28", "ナス6個", 540),
    ("0010", "2025-04-30", "ピーマン10個", 500),
    ("0002", "2025-05-02", "かぼちゃ2個", 240),
    ("0002", "2025-05-07", "トマト12個", 960),
    ("0001", "2025-05-09", "ナス10個", 900),
    ("0009", "2025-05-10", "キュウリ15本", 1050),
    ("0003", "2025-05-12", "玉ねぎ3kg", 900),
    ("0001", "2025-05-13", "トマト5個とキュウリ5本", 750),
    ("0010", "2025-05-13", "ピーマン20個", 1000),
]

OK, CREATED, NO_CONTENT, NOT_FOUND = 200, 201, 204, 404


@dataclass(frozen=True)
class Outcome:
    """What a stored function answers: an HTTP-like status, a message for people, and the rows."""

    status_code: int
    message: str
    rows: list[dict[str, Any]] = field(default_factory=list)


def prepare(path: Path) -> bool:
    """Create the tables and seed them, in one transaction, when the database is new; True when it was seeded."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with connect(path) as conn:
        conn.execute("BEGIN IMMEDIATE")  # two servers starting at once: one seeds, the other waits and sees it
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'customers'").fetchone()
        if exists:
            return False
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", CUSTOMERS)
        for code_customer, day, products, price in SALES:
            _insert_sale(conn, code_customer, products, price, day)
        return True


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """One short-lived connection per call: the SDK runs sync tools on worker threads."""
    with closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        with conn:  # commits on success, rolls back on error
            yield conn


def get_customers(conn: sqlite3.Connection, code_customer: str | None, name_part: str | None) -> Outcome:
    """Exact customer code and/or a part of the name; no condition lists everyone."""
    rows = conn.execute(
        "SELECT code_customer, name_customer, address, tel FROM customers"
        " WHERE (:code IS NULL OR code_customer = :code)"
        " AND (:name IS NULL OR instr(name_customer, :name) > 0)"
        " ORDER BY code_customer",
        {"code": code_customer, "name": name_part},
    ).fetchall()
    if not rows:
        return Outcome(NO_CONTENT, "検索条件に合う顧客データはありません。")
    return Outcome(OK, f"顧客データが{len(rows)}件見つかりました。", [dict(r) for r in rows])


def get_sales(
    conn: sqlite3.Connection,
    code_customer: str,
    code_sales: str | None,
    begin: date | None,
    end: date | None,
) -> Outcome:
    """A customer's sales, optionally one sale number and/or a date range (both ends inclusive)."""
    if not _customer_exists(conn, code_customer):
        return Outcome(NOT_FOUND, f"顧客コード{code_customer}の顧客は存在しません。")
    rows = conn.execute(
        _SALES_SELECT + " WHERE s.code_customer = :customer"
        " AND (:code_sales IS NULL OR s.code_sales = :code_sales)"
        " AND (:begin IS NULL OR s.date_sales >= :begin)"
        " AND (:end IS NULL OR s.date_sales <= :end)"
        " ORDER BY s.date_sales, s.id_sales",
        {
            "customer": code_customer,
            "code_sales": code_sales,
            "begin": begin.isoformat() if begin else None,
            "end": end.isoformat() if end else None,
        },
    ).fetchall()
    if not rows:
        return Outcome(NO_CONTENT, "検索条件に合う販売データはありません。")
    return Outcome(OK, f"販売データが{len(rows)}件見つかりました。", [dict(r) for r in rows])


def add_sale(conn: sqlite3.Connection, code_customer: str, products: str, price: int, day: date) -> Outcome:
    """Register one sale and answer with the stored row, sale number included."""
    if not _customer_exists(conn, code_customer):
        return Outcome(NOT_FOUND, f"顧客コード{code_customer}の顧客は存在しません。")
    id_sales = _insert_sale(conn, code_customer, products, price, day.isoformat())
    row = conn.execute(_SALES_SELECT + " WHERE s.id_sales = ?", (id_sales,)).fetchone()
    return Outcome(CREATED, "販売データを登録しました。", [dict(row)])


_SALES_SELECT = (
    "SELECT s.code_sales, s.code_customer, c.name_customer, s.date_sales, s.products, s.price"
    " FROM sales s JOIN customers c ON c.code_customer = s.code_customer"
)


def _customer_exists(conn: sqlite3.Connection, code_customer: str) -> bool:
    found = conn.execute("SELECT 1 FROM customers WHERE code_customer = ?", (code_customer,)).fetchone()
    return found is not None


def _insert_sale(conn: sqlite3.Connection, code_customer: str, products: str, price: int, day: str) -> int:
    """The sale number is S + sale date + row id (S20250515000018): unique, and readable over the phone."""
    cursor = conn.execute(
        "INSERT INTO sales (code_customer, date_sales, products, price) VALUES (?, ?, ?, ?)",
        (code_customer, day, products, price),
    )
    id_sales = cursor.lastrowid
    assert id_sales is not None
    conn.execute(
        "UPDATE sales SET code_sales = ? WHERE id_sales = ?",
        (f"S{day.replace('-', '')}{id_sales:06d}", id_sales),
    )
    return id_sales
