"""English questions against Japanese entries in the default install: English inflections folded, and the
glossary (faq/_glossary.yml) bringing an English word's Japanese word into the query. Small fixed entries here;
the bundled FAQ's figures come from bench/faq_recall.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_lib.config import ConfigError
from mcp_lib.platforms.faq import Entry, FaqIndex, store
from mcp_lib.platforms.faq.text import _stem, analyze

ENTRIES = [
    Entry("warehouse", "倉庫の在庫数がモールと合わない", ["在庫"], "倉庫とモールの在庫を比べる。", "a.md"),
    Entry("refund", "返金した注文の扱い", ["返金"], "返金は注文画面で処理します。", "b.md"),
    Entry("english", "How do I re-run a failed import job?", ["jobs"], "Open the jobs page and press re-run.", "c.md"),
]
GLOSSARY = {"倉庫": ["warehouse"], "返金": ["refund"], "在庫数": ["stock level"]}


@pytest.mark.parametrize("words", [
    ("order", "orders", "ordered", "ordering"), ("ship", "ships", "shipped", "shipping"),
    ("update", "updates", "updated", "updating"), ("cancel", "cancels", "cancelled", "canceled"),
    ("import", "imports", "imported", "importing"), ("company", "companies"), ("call", "called", "calls"),
])
def test_inflections_fold_to_one_term(words: tuple[str, ...]) -> None:
    assert len({_stem(w) for w in words}) == 1
    assert len({tuple(analyze(w)) for w in words}) == 1


def test_different_words_stay_apart() -> None:
    assert len({_stem(w) for w in ("ship", "shipment", "address", "status", "sync", "single")}) == 6


def test_an_inflected_word_finds_its_synonym_group() -> None:
    index = FaqIndex(ENTRIES[:2], synonyms=[["返金", "refund"]])
    assert [e.id for e, _ in index.search("refunded orders")] == ["refund"]
    assert [e.id for e, _ in index.search("refunding")] == ["refund"]


def test_the_glossary_brings_in_the_japanese_word() -> None:
    plain = FaqIndex(ENTRIES)
    glossed = FaqIndex(ENTRIES, glossary=GLOSSARY)
    assert plain.search("warehouse numbers do not match") == []
    assert [e.id for e, _ in glossed.search("warehouse numbers do not match")][:1] == ["warehouse"]
    assert [e.id for e, _ in glossed.search("the stock levels in our warehouses")][:1] == ["warehouse"]
    assert [e.id for e, _ in glossed.search("refunded order")][:1] == ["refund"]
    # whole words only, and an English entry still answers an English question
    assert glossed.search("refundable") == []
    assert [e.id for e, _ in glossed.search("rerun a failed job")][:1] == ["english"]


def test_the_snippet_shows_the_japanese_words_found() -> None:
    index = FaqIndex(ENTRIES, glossary=GLOSSARY)
    assert "倉庫" in index.plan("warehouse").words


@pytest.mark.parametrize(("text", "problem"), [
    ("- [a, b]\n", "日本語: \\[english"), ("倉庫: warehouse\n", "list of English words"), ("倉庫: []\n", "list"),
    ("倉庫: [a\n", "not valid YAML"),
])
def test_a_malformed_glossary_names_the_file(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "a.md").write_text("---\nid: a\nquestion: 倉庫\n---\n本文\n", encoding="utf-8")
    (tmp_path / "_glossary.yml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=problem) as exc:
        FaqIndex.load(tmp_path)
    assert "_glossary.yml" in str(exc.value)


def test_the_cached_index_keeps_the_glossary_and_a_new_glossary_is_a_new_index(tmp_path: Path) -> None:
    folder, cache = tmp_path / "faq", tmp_path / "cache"
    folder.mkdir()
    (folder / "a.md").write_text("---\nid: a\nquestion: 倉庫の在庫\n---\n倉庫の在庫を確認する。\n", encoding="utf-8")
    (folder / "_glossary.yml").write_text("倉庫: [warehouse]\n", encoding="utf-8")
    built = store.load_index(folder, cache=cache)
    loaded = store.load_index(folder, cache=cache)
    assert isinstance(loaded.postings, store.PackedPostings) and loaded.glossary == {"倉庫": ["warehouse"]}
    assert [e.id for e, _ in loaded.search("warehouse")] == ["a"] == [e.id for e, _ in built.search("warehouse")]
    (folder / "_glossary.yml").write_text("倉庫: [depot]\n", encoding="utf-8")
    changed = store.load_index(folder, cache=cache)
    assert changed.key != loaded.key and [e.id for e, _ in changed.search("depot")] == ["a"]
