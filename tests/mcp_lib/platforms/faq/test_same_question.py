"""FaqIndex.same_question: what faq-draft uses to skip questions the FAQ already asks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_lib.platforms.faq import FaqIndex

REPO_FAQ = Path(__file__).resolve().parents[4] / "faq"


@pytest.fixture(scope="module")
def bundled() -> FaqIndex:
    return FaqIndex.load(REPO_FAQ)


@pytest.mark.parametrize(("question", "entry"), [
    ("楽天の注文が取り込まれない", "rakuten-order-import"),
    ("CSVが文字化けする", "csv-encoding"),
    ("注文のキャンセル方法", "order-cancel"),
    ("Shopifyの在庫同期が遅れる", "stock-sync-delay"),
])
def test_the_same_question_in_other_words(bundled: FaqIndex, question: str, entry: str) -> None:
    found = bundled.same_question(question)
    assert found is not None and found.id == entry


@pytest.mark.parametrize("question", [
    "楽天で送料無料の設定をしたい",  # shares 楽天 and 送料 with entries, asks something else
    "Shopifyの商品画像を一括で差し替えたい",
    "ギフト包装の設定方法",
    "会議室の予約方法",
])
def test_a_new_question_is_not_a_duplicate(bundled: FaqIndex, question: str) -> None:
    assert bundled.same_question(question) is None
